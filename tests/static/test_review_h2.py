"""Each case fixed by helper H2's review (issue 16, point 2), asserted on the file that has it.

The review corpus (``tests/static/review/<task>/``) was labelled and committed before the rater was run on it;
``test_accuracy.py`` holds whole tasks to a threshold, which would let one shape regress unnoticed. Here every case
names its file, the property it decides and the verdict: the hand label and the static rater must both say it.
The first cases are the CUDA CTA tile that ``cuda_tensor_core(min_tile=...)`` reads (gemm_bf16 rubric v4), on the
in-repo and wild corpora; then one per shape the review found (a valid form the first pass refused, or a weaker
form it took), with the weaker form's refusal where the corpus has one.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from d2kgrade.static.corpus import variant_verdicts
from d2kgrade.suite import Suite

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

# (case, corpus/task/file, property without the task prefix, verdict)
CASES = [
    # CUDA CTA tile (cuda_tensor_core min_tile)
    ("64x64 wmma tile from constexpr BM/BN", "corpus/gemm_bf16/cuda_wmma_cp_async.py", "L1.tiled-tensor-core",
     "absent"),
    ("128x256 / 128x128 template instantiations", "corpus/gemm_bf16/mma_sync_grouped.cu", "L1.tiled-tensor-core",
     "present"),
    ("template tile forwarded through a host template", "wild/gemm_bf16/cuda_wmma_template.py",
     "L1.tiled-tensor-core", "present"),
    # gemm_bias_act
    ("bias through a 1-D tensor descriptor", "review/gemm_bias_act/launcher_desc_bias.py", "L1.epilogue-fusion",
     "present"),
    ("bias through a 1-D tensor descriptor", "review/gemm_bias_act/launcher_desc_bias.py",
     "L2.bias-once-per-tile", "present"),
    ("grid closure reading the launcher's SM count", "review/gemm_bias_act/launcher_desc_bias.py",
     "L2.persistent-overlap", "present"),
    ("bias loaded in the K loop, added after it", "review/gemm_bias_act/overlap_claims_libdevice.py",
     "L1.epilogue-fusion", "present"),
    ("bias loaded in the K loop, added after it", "review/gemm_bias_act/overlap_claims_libdevice.py",
     "L2.bias-once-per-tile", "absent"),
    ("persistent loop without flatten", "review/gemm_bias_act/overlap_claims_libdevice.py",
     "L2.persistent-overlap", "absent"),
    ("sigmoid through an inline-asm rcp.approx", "review/gemm_bias_act/split_acc_rcp_asm.py",
     "L1.gelu-as-sigmoid", "present"),
    # gemm_splitk
    ("GEMV relaunched per 4-row chunk with the same weights", "review/gemm_splitk/cuda_gemv_splitk.py",
     "L1.bandwidth-roofline", "absent"),
    ("comprehension-built configs with BLOCK_M 128 only", "review/gemm_splitk/fixed_split_bf16_atomics.py",
     "L2.small-m-tiles", "absent"),
    ("comprehension-built configs with BM 16-64", "review/gemm_splitk/swap_ab_ticket_class.py", "L2.small-m-tiles",
     "present"),
    ("B read once in 128-row tiles (label corrected)", "review/gemm_splitk/fixed_split_bf16_atomics.py",
     "L1.bandwidth-roofline", "present"),
    # gemm_fp8_blockwise
    ("host TensorDescriptor(A, ...) constructor", "review/gemm_fp8_blockwise/swap_ab_host_desc.py",
     "L2.bk-equals-scale-block", "present"),
    ("host TensorDescriptor(B, ...) constructor", "review/gemm_fp8_blockwise/swap_ab_host_desc.py",
     "L3.k-major-operands", "present"),
    ("swap-AB kernel for M <= 64", "review/gemm_fp8_blockwise/swap_ab_host_desc.py", "L2.skinny-m-parallelism",
     "present"),
    ("tiles dequantized to bf16 before the dot", "review/gemm_fp8_blockwise/dequant_bf16_claims.py",
     "L1.native-fp8-mma", "absent"),
    # grouped_gemm_moe
    ("binary search over a shared-memory tile table (.cu)", "review/grouped_gemm_moe/cuda_wmma_grouped.cu",
     "L1.flattened-tile-schedule", "present"),
    ("binary search over a shared-memory tile table (.cu)", "review/grouped_gemm_moe/cuda_wmma_grouped.cu",
     "L2.device-side-metadata", "present"),
    ("template BM and thread count chosen by T / E", "review/grouped_gemm_moe/cuda_wmma_grouped.cu",
     "L3.config-by-rows", "present"),
    ("32-bit e * stride_we, only token rows widened", "review/grouped_gemm_moe/expert_grid_item_claims.py",
     "L3.int64-expert-base", "absent"),
    ("descriptor loads of X only", "review/grouped_gemm_moe/expert_grid_item_claims.py", "L3.tma-per-expert",
     "absent"),
    ("decode and prefill kernels with their own row tiles", "review/grouped_gemm_moe/decode_prefill_paths.py",
     "L1.rows-by-offsets", "present"),
    ("decode and prefill kernels with their own row tiles", "review/grouped_gemm_moe/decode_prefill_paths.py",
     "L2.decode-weight-stream", "present"),
    ("config tuple chosen by a conditional on T // E", "review/grouped_gemm_moe/decode_prefill_paths.py",
     "L3.config-by-rows", "present"),
    ("per-expert device descriptor on w + e.to(int64) * s", "review/grouped_gemm_moe/persistent_tile_table.py",
     "L3.int64-expert-base", "present"),
    ("per-expert device descriptor on w + e.to(int64) * s", "review/grouped_gemm_moe/persistent_tile_table.py",
     "L3.tma-per-expert", "present"),
    # conv2d_implicit_gemm
    ("channel loop nested in static_range taps", "review/conv2d_implicit_gemm/nested_taps_swizzle.py",
     "L2.pipelined-operands", "absent"),
    ("one flat pipelined reduction loop", "review/conv2d_implicit_gemm/flat_k_loop_autotuned.py",
     "L2.pipelined-operands", "present"),
    # flash_attention_fwd
    ("division by l once per tile, in the store loop (CUDA)", "review/flash_attention_fwd/cuda_wmma_smem_p.py",
     "L1.online-softmax-tiling", "present"),
    ("division by l once per tile, in a persistent loop", "review/flash_attention_fwd/persistent_packgqa_lpt.py",
     "L1.online-softmax-tiling", "present"),
    ("two stages bounded by a claimed work id", "review/flash_attention_fwd/persistent_packgqa_lpt.py",
     "L1.causal-block-skipping", "present"),
    ("PackGQA: the group's heads in the tile rows", "review/flash_attention_fwd/persistent_packgqa_lpt.py",
     "L2.gqa-l2-reuse", "present"),
    ("longest tiles first from an atomic counter", "review/flash_attention_fwd/persistent_packgqa_lpt.py",
     "L2.causal-load-balance", "present"),
    ("one loop, mask under a diagonal-block branch", "review/flash_attention_fwd/single_loop_diag_branch.py",
     "L1.causal-block-skipping", "present"),
    ("every block visited and masked", "review/flash_attention_fwd/masked_every_block_claims.py",
     "L1.causal-block-skipping", "absent"),
    ("acc + tl.dot(p.to(bf16), v)", "review/flash_attention_fwd/masked_every_block_claims.py",
     "L3.bf16-p-tensor-core", "absent"),
    # paged_attention_decode
    ("last tile masked through an in-loop branch", "review/paged_attention_decode/worklist_branch_tail.py",
     "L2.online-softmax-over-pages", "present"),
    ("every tile masked", "review/paged_attention_decode/per_head_scalar_pages_claims.py",
     "L2.online-softmax-over-pages", "absent"),
    ("pages.to(tl.int64)[:, None] * stride", "review/paged_attention_decode/worklist_branch_tail.py",
     "L3.int64-page-addressing", "present"),
    ("32-bit block-table row, 64-bit page offsets", "review/paged_attention_decode/fma_heads_peeled_tail.py",
     "L3.int64-page-addressing", "present"),
    ("fixed-size token partitions on a grid axis (CUDA)",
     "review/paged_attention_decode/cuda_partitioned_gqa_warps.py", "L1.token-balanced-split", "present"),
    ("the group's heads on CUDA cores, one K load each",
     "review/paged_attention_decode/cuda_partitioned_gqa_warps.py", "L1.gqa-head-packing", "present"),
    ("the group's heads scored by FMA, no tl.dot", "review/paged_attention_decode/fma_heads_peeled_tail.py",
     "L1.gqa-head-packing", "present"),
    ("one real query row in a padded tl.dot tile", "review/paged_attention_decode/per_head_scalar_pages_claims.py",
     "L1.gqa-head-packing", "absent"),
    ("one query head per block (CUDA)", "corpus/paged_attention_decode/cuda_chunk_plan.py", "L1.gqa-head-packing",
     "absent"),
]


@cache
def _verdicts(rel: str) -> tuple[dict[str, str], dict[str, str]]:
    return variant_verdicts(Suite(ROOT), HERE / rel)


@pytest.mark.parametrize(("case", "rel", "prop", "verdict"), CASES, ids=[f"{c[1]}:{c[2]}" for c in CASES])
def test_case_is_graded_as_labelled(case, rel, prop, verdict):
    labels, got = _verdicts(rel)
    pid = f"{rel.split('/', 2)[1]}.{prop}"
    assert labels[pid] == verdict, f"{case}: the case table disagrees with labels.yaml"
    assert got[pid] == verdict, f"{case}: {rel} {pid} graded {got[pid]}, labelled {verdict}"


def test_tile_names_and_template_order():
    from d2kgrade.static import extract_facts
    from d2kgrade.static.patterns.mma import template_order, tile_axis

    assert [tile_axis(n) for n in ("BM", "BLOCK_N", "kTileM", "CTA_N", "WM", "BK", "tile_m")] == [
        "m", "n", "m", "n", None, None, "m"]
    facts = extract_facts(HERE / "wild/gemm_bf16/cuda_wmma_template.py")
    fn = facts.functions["cu:gemm_bf16_wmma"]
    assert template_order(facts, fn) == ["BM", "BN", "BK", "STAGES", "WM", "WN"]


def test_every_review_task_has_a_case():
    tasks = {c[1].split("/")[1] for c in CASES if c[1].startswith("review/")}
    assert tasks == {"gemm_bias_act", "gemm_splitk", "gemm_fp8_blockwise", "grouped_gemm_moe", "conv2d_implicit_gemm",
                     "flash_attention_fwd", "paged_attention_decode"}


_CHUNKED = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _gemv(a_ptr, b_ptr, c_ptr, M, N, K, k0, BN: tl.constexpr, BK: tl.constexpr):
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    for m in range(0, M):
        acc = tl.zeros((BN,), dtype=tl.float32)
        for k in range(k0, K, BK):
            kk = k + tl.arange(0, BK)
            b = tl.load(b_ptr + n[:, None] * K + kk[None, :], eviction_policy="evict_first")
            a = tl.load(a_ptr + m * K + kk)
            acc += tl.sum(b * a[None, :], axis=1)
        tl.atomic_add(c_ptr + m * N + n, acc)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[0]
    C = torch.zeros((M, N), device=A.device, dtype=torch.float32)
    for s in range(4):
        _gemv[(triton.cdiv(N, 64),)](A, B, C, M, N, K, s * (K // 4), BN=64, BK=128)
    return C.to(A.dtype)
'''


def test_a_host_loop_over_k_slices_is_not_a_per_chunk_relaunch(tmp_path):
    """``weights_read_once`` refuses the kernel launched once per chunk of rows with the same weights
    (``cuda_gemv_splitk.py``), not a host loop whose launches take the whole rows input and different K offsets."""
    from d2kgrade.static import extract_facts
    from d2kgrade.static.checks.tasks.gemm_splitk import _relaunched_per_chunk

    f = tmp_path / "k.py"
    f.write_text(_CHUNKED)
    assert _relaunched_per_chunk(extract_facts(f), 1) is None
    chunked = extract_facts(HERE / "review/gemm_splitk/cuda_gemv_splitk.py")
    assert _relaunched_per_chunk(chunked, 1) is not None
