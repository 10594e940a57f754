"""Each production-style code shape of issue 16, asserted on the held-out file that has it.

``test_accuracy.py`` holds the held-out corpus to 0.95 of a task's labels, which would let one of these shapes
regress unnoticed. Here every shape names its file, the property it decides and the verdict: the hand label
(written before the rater was tuned, ``labels.yaml``) and the static rater must both say it. Where the corpus has
a weaker form of the same shape, its refusal is listed too.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from d2kgrade.static.corpus import variant_verdicts
from d2kgrade.suite import Suite

ROOT = Path(__file__).resolve().parents[2]
WILD = Path(__file__).resolve().parent / "wild"

# (shape, task/file, property without the task prefix, verdict)
CASES = [
    # host structure
    ("launch helpers (vLLM split-KV)", "flash_decoding/vllm_split_kv_helpers.py", "L1.split-kv-lse-merge", "present"),
    ("launch helpers (vLLM cheap combine)", "flash_decoding/vllm_split_kv_helpers.py", "L2.cheap-combine", "present"),
    ("launcher class with cached workspaces", "flash_decoding/atomic_ticket_class.py", "L2.split-heuristic", "present"),
    ("regimes by size: fused row", "softmax/launcher_class.py", "L2.row-in-registers", "present"),
    ("regimes by size: two-sweep for long rows", "softmax/launcher_class.py", "L2.tiled-two-sweep", "present"),
    ("regimes by size: CUDA instantiations", "gemm_bf16/cuda_wmma_template.py", "L3.tile-config-autotune", "present"),
    ("host constexpr mode for N > 16384 only", "rmsnorm_residual/constexpr_mode.py", "L2.tile-long-rows", "absent"),
    ("host constexpr mode for N > 16384 only", "layernorm/welford_constexpr_modes.py", "L2.tiled-chan-merge",
     "absent"),
    ("kernels in a sibling module", "softmax/multi_file", "L2.tiled-two-sweep", "present"),
    ("kernels in a sibling module", "softmax/multi_file", "L1.online-normalizer", "present"),
    ("functools.partial over a dict of kernels", "softmax/partial_dict_dispatch.py", "L2.split-row-combine", "present"),
    ("kernel = lambda", "softmax/lambda_entry.py", "L2.row-in-registers", "present"),
    ("kernel rebound to a torch stub", "softmax/rebound_stub.py", "L1.online-normalizer", "absent"),
    # dtype and form
    ("upcast as .to(other.dtype)", "rmsnorm_residual/exp2_log2_persistent.py", "L1.fp32-sumsq", "present"),
    ("partials stored in bf16", "rmsnorm_residual/split_partials_bf16.py", "L1.fp32-sumsq", "absent"),
    ("persistent while loop", "rmsnorm_residual/exp2_log2_persistent.py", "L2.weight-hoist-persistent", "present"),
    ("persistent while loop", "gemm_bf16/autotune_appended_list.py", "L2.persistent-tiles", "present"),
    ("persistent while loop", "histogram/while_strategies.py", "L2.persistent-grid", "present"),
    ("rsqrt as exp2(-0.5 * log2(x))", "rmsnorm_residual/exp2_log2_persistent.py", "L3.rsqrt-once", "present"),
    ("rsqrt as 1 / sqrt", "rmsnorm_residual/vllm_style_helpers.py", "L3.rsqrt-once", "present"),
    ("rsqrt as 1 / sqrt", "layernorm/welford_constexpr_modes.py", "L3.rsqrt-fma", "present"),
    ("num_warps from an if-chain of literals", "rmsnorm_residual/vllm_style_helpers.py", "L2.row-in-registers",
     "present"),
    ("num_warps from an if-chain of literals", "layernorm/liger_style_function.py", "L2.row-in-registers", "present"),
    ("autotune over a module-level list", "gemm_bf16/autotune_named_space.py", "L3.tile-config-autotune", "present"),
    ("autotune over a module-level list", "gemm_bf16/autotune_named_space.py", "L2.smem-pipeline", "present"),
    ("autotune configs appended at import", "gemm_bf16/autotune_appended_list.py", "L3.tile-config-autotune",
     "present"),
    # CUDA
    ("vector type behind a template alias", "softmax/cuda_vec_alias.py", "L3.vector-io", "present"),
    ("const uint4* parameters", "rmsnorm_residual/cuda_uint4_persistent.py", "L3.vector-io", "present"),
    ("register arrays sized by a template expression", "rmsnorm_residual/cuda_uint4_persistent.py",
     "L2.row-in-registers", "present"),
    ("a register copy read through a cast pointer", "flash_decoding/cuda_split_combine.py", "L1.gqa-head-packing",
     "present"),
    ("atomicCAS/atomicExch spin lock", "histogram/cuda_spinlock_merge.py", "L1.privatize-then-merge", "present"),
    ("atomicCAS spin lock", "topk/cuda_radix_spinlock.py", "L3.smem-histogram-atomics", "present"),
    # rubrics that accepted one code shape
    ("hand-written bitonic network", "topk/bitonic_running_topk.py", "L1.filter-then-sort", "present"),
    ("hand-written bitonic network", "topk/bitonic_running_topk.py", "L3.tie-exact-count", "present"),
    ("three passes with evict_last are not a two-sweep", "softmax/closure_while_persistent.py",
     "L2.tiled-two-sweep", "absent"),
    ("rows per program as [ROWS, BLOCK_N] tiles", "softmax/closure_while_persistent.py", "L2.rows-per-program",
     "present"),
    ("unmasked CUDA main loop without TMA", "gemm_bf16/cuda_wmma_template.py", "L3.k-loop-no-masks", "present"),
    ("masks in every K iteration", "gemm_bf16/partial_functools.py", "L3.k-loop-no-masks", "absent"),
]


@cache
def _verdicts(rel: str) -> tuple[dict[str, str], dict[str, str]]:
    return variant_verdicts(Suite(ROOT), WILD / rel)


@pytest.mark.parametrize(("shape", "rel", "prop", "verdict"), CASES, ids=[f"{c[1]}:{c[2]}" for c in CASES])
def test_shape_is_graded_as_labelled(shape, rel, prop, verdict):
    labels, got = _verdicts(rel)
    pid = f"{rel.split('/', 1)[0]}.{prop}"
    assert labels[pid] == verdict, f"{shape}: the case table disagrees with labels.yaml"
    assert got[pid] == verdict, f"{shape}: {rel} {pid} graded {got[pid]}, labelled {verdict}"


def test_every_wild_task_has_a_case():
    assert {c[1].split("/", 1)[0] for c in CASES} == {p.name for p in WILD.iterdir() if p.is_dir()}
