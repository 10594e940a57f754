"""Each code shape the review corpus (issue 16, point 2) found a static block refusing or wrongly crediting, asserted
on the held-out file that has it, for cross_entropy, swiglu, transpose, rotary_embedding, quant_absmax,
embedding_bag, moe_permute and layernorm_backward.

``test_accuracy.py`` holds a corpus's properties to a figure, which would let one shape regress unnoticed. Here
every case names its file, the property and the verdict: the hand label (``labels.yaml``, written before the
rater was run on the file) and the static rater must both say it. Where a weaker form of the same shape exists,
its refusal is listed too (``corpus:`` names a file of the in-repo corpus).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from d2kgrade.static.corpus import variant_verdicts
from d2kgrade.suite import Suite

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
REVIEW = HERE / "review"
CORPUS = HERE / "corpus"

# (shape, task/file, property without the task prefix, verdict)
CASES = [
    # cross_entropy
    ("vocab split as a flat (row, chunk) work list, pid // C and pid % C", "cross_entropy/launcher_flat_split.py",
     "L2.vocab-split-lse-merge", "present"),
    ("vocab split as a flat work list: the merge kernel writes the gradient", "cross_entropy/launcher_flat_split.py",
     "L1.fused-grad", "present"),
    ("one program per row: no vocab split", "cross_entropy/vector_online_autotune.py", "L2.vocab-split-lse-merge",
     "absent"),
    ("CUDA int64_t row declared from blockIdx.x", "cross_entropy/cuda_block_row.py", "L3.int64-offsets", "present"),
    ("int32 row * stride under a '64-bit' comment", "cross_entropy/misleading_online_names.py", "L3.int64-offsets",
     "absent"),
    # swiglu
    ("flat grid over T x I outputs", "swiglu/flat_grid_autotune.py", "L1.shape-independent-grid", "present"),
    ("flat (row, col) index for short rows", "swiglu/flat_grid_autotune.py", "L2.row-tiles-for-short-rows", "present"),
    ("flat grid: hundreds of programs at decode", "swiglu/flat_grid_autotune.py", "L2.enough-work-per-program",
     "present"),
    ("o % I under tl.max_contiguous is contiguous", "swiglu/flat_grid_autotune.py", "L2.two-coalesced-streams",
     "present"),
    ("o % I under tl.max_contiguous is contiguous", "swiglu/flat_grid_autotune.py", "L3.vector-io-hints", "present"),
    ("o % I under tl.max_contiguous is contiguous", "swiglu/flat_grid_autotune.py", "L3.packed-conversions",
     "present"),
    ("CUDA 2-D grid, 256 threads x 8 outputs", "swiglu/cuda_vec8_2d.py", "L2.enough-work-per-program", "present"),
    ("CUDA one row per CTA: masked lanes at I = 768", "swiglu/cuda_vec8_2d.py", "L2.row-tiles-for-short-rows",
     "absent"),
    ("row program with BLOCK = next_pow2(I)", "swiglu/misleading_fused_names.py", "L1.shape-independent-grid",
     "absent"),
    # transpose
    ("exchange by the tile's .T", "transpose/dot_t_persistent.py", "L1.staged-tile-transpose", "present"),
    ("exchange by the tile's .T", "transpose/dot_t_persistent.py", "L2.bank-conflict-free-smem", "present"),
    ("XOR swizzle through an index helper", "transpose/transpose_swizzle.cu", "L2.bank-conflict-free-smem",
     "present"),
    ("swapped strides, tl.trans only in a dead helper", "transpose/misleading_staged_names.py",
     "L1.staged-tile-transpose", "absent"),
    ("swapped strides, tl.trans only in a dead helper", "transpose/misleading_staged_names.py",
     "L2.bank-conflict-free-smem", "absent"),
    # rotary_embedding
    ("token block walking its heads in a loop, cos/sin gathered once", "rotary_embedding/head_loop_class.py",
     "L2.token-block-all-heads", "present"),
    ("(token, head) grid", "rotary_embedding/misleading_cached_names.py", "L2.token-block-all-heads", "absent"),
    ("GPT-J by two stride-2 loads", "rotary_embedding/misleading_cached_names.py", "L3.vectorized-io", "absent"),
    ("cos/sin narrowed to bf16 on the host", "rotary_embedding/token_block_bf16_tables.py", "L3.fp32-fma", "absent"),
    ("fp32 cos/sin", "rotary_embedding/head_loop_class.py", "L3.fp32-fma", "present"),
    # quant_absmax
    ("CUDA inverse scale in a const float declaration", "quant_absmax/cuda_group_lanes.py",
     "L1.scale-then-clamp-cast", "present"),
    ("split-row partial amax + finish kernel", "quant_absmax/reshape_autotune.py", "L2.long-row-two-sweep",
     "present"),
    ("whole 53k group loaded at once by an amax kernel", "quant_absmax/misleading_fused_names.py",
     "L2.long-row-two-sweep", "absent"),
    # embedding_bag
    ("indices broadcast with __shfl_sync", "embedding_bag/cuda_tbe_worklist.py", "L1.fused-gather-reduce", "present"),
    ("indices broadcast with __shfl_sync", "embedding_bag/cuda_tbe_worklist.py", "L3.int64-row-offsets", "present"),
    ("ld.global.nc.L1::no_allocate inline PTX vs __ldg", "embedding_bag/cuda_tbe_worklist.py", "L3.cache-policy",
     "present"),
    ("kernel picked by a ternary local, then launched", "embedding_bag/cuda_tbe_worklist.py", "L3.bf16-upconvert",
     "present"),
    ("evict_first on every workload", "embedding_bag/misleading_balanced_names.py", "L3.cache-policy", "absent"),
    # moe_permute
    ("block-local tl.sort for in-block ranks", "moe_permute/packed_sort_ranks.py", "L1.counting-sort", "present"),
    ("one program sorting all pairs", "corpus:moe_permute/sort_based.py", "L1.counting-sort", "absent"),
    ("one-hot counts of packed-and-unpacked keys", "moe_permute/dest_gather_class.py", "L2.hot-expert-contention",
     "present"),
    ("per-pair global atomics", "moe_permute/misleading_local_names.py", "L2.hot-expert-contention", "absent"),
    # layernorm_backward
    ("CUDA dw/db partials in shared memory, flushed once", "layernorm_backward/cuda_smem_partials.py",
     "L2.persistent-row-groups", "present"),
    ("CUDA dw/db partials in shared memory, flushed once", "layernorm_backward/cuda_smem_partials.py",
     "L2.wide-row-accumulators", "present"),
    ("partial buffers allocated like w (bf16)", "layernorm_backward/while_persistent_bf16_partials.py",
     "L3.fp32-accumulators", "absent"),
    ("atomics into a small buffer are not two stages", "layernorm_backward/misleading_two_stage_names.py",
     "L1.two-stage-param-grads", "absent"),
]


@cache
def _verdicts(rel: str) -> tuple[dict[str, str], dict[str, str]]:
    folder = CORPUS if rel.startswith("corpus:") else REVIEW
    return variant_verdicts(Suite(ROOT), folder / rel.removeprefix("corpus:"))


@pytest.mark.parametrize(("shape", "rel", "prop", "verdict"), CASES, ids=[f"{c[1]}:{c[2]}" for c in CASES])
def test_shape_is_graded_as_labelled(shape, rel, prop, verdict):
    labels, got = _verdicts(rel)
    pid = f"{rel.removeprefix('corpus:').split('/', 1)[0]}.{prop}"
    assert labels[pid] == verdict, f"{shape}: the case table disagrees with labels.yaml"
    assert got[pid] == verdict, f"{shape}: {rel} {pid} graded {got[pid]}, labelled {verdict}"


def test_every_h3_review_task_has_a_case():
    tasks = {"cross_entropy", "swiglu", "transpose", "rotary_embedding", "quant_absmax", "embedding_bag",
             "moe_permute", "layernorm_backward"}
    assert {c[1].removeprefix("corpus:").split("/", 1)[0] for c in CASES} == tasks
    assert tasks <= {p.name for p in REVIEW.iterdir() if p.is_dir()}
