"""Expert Triton reference for ``moe_permute``: top-k routing (softmax renormalized over the k picks) and the
stable expert-major permutation of the T*k (token, slot) pairs, in three launches with no host synchronization.

Guidance implemented (tasks/moe_permute/task.yaml): L1.counting-sort, L1.fused-router-topk, L2.block-local-ranks,
L2.row-copy-mapping, L2.hot-expert-contention, L3.vector-row-copy, L3.topk-small-e, L3.no-host-sync.

1. ``_moe_route_kernel``, one program per block of BLOCK_T tokens: the [BLOCK_T, E] logit tile stays in
   registers; k rounds of ``tl.argmax(..., tie_break_left=True)`` with the winner masked to -inf pick the experts
   (lowest index on ties), and the weights are exp2((l - l_max) log2 e) over just the k picks, times the
   reciprocal of their sum (the full softmax denominator cancels). The same pass builds a one-hot [BLOCK_T*k, E]
   tile of the block's pairs: its column sums are the block's per-expert counts, stored as one row of the
   [blocks, E] count matrix (no atomics, so hot experts cost nothing extra), and an inclusive ``tl.cumsum`` down
   it ranks each pair among the block's earlier pairs of its expert, in (token, slot) order. The
   rank goes to row_id_map, which the scatter overwrites with the final row. The one-hot tile is capped at 8192
   elements (64 per thread), so BLOCK_T is 4 tokens for E = 256, k = 8 (2048 programs), 8 for E = 128, k = 8
   and 128 for E = 8, k = 2.
2. ``_moe_scan_kernel``, one program per group of EG experts: walks the count matrix down its columns and
   replaces each count with the number of pairs of that expert in earlier blocks (an exclusive scan), and writes
   the per-expert totals. Stable and deterministic: ranks never come from global atomics.
3. ``_moe_scatter_kernel``, one program per source token: start[e] = the totals of the experts before e (E
   values, a masked sum per slot; program j stores expert_offsets[j]), dest = start[e] + base[block, e] + rank, and the
   token's row is read once (evict_first) in BLOCK_H chunks of 16-byte vectors and stored to its k destinations
   with streaming stores.

Metadata is int32 throughout (T*k < 2^31). The launcher derives every grid from T, E and H alone.

Roofline floors on H200 (bytes = 4*T*E + T*H*2 + T*k*H*2 + 12*T*k + 4*(E + 1) at the measured copy
bandwidth):

==================  ===================  =======  ==================================================
workload            T, E, k, H           floor    H200: time, fraction of floor, x best peer
==================  ===================  =======  ==================================================
mixtral_8e_top2     16384, 8, 2, 4096    97.0 us  139 us, 0.71, 3.16x eager_stable
deepseek_256e_top8  8192, 256, 8, 7168   256 us   356 us, 0.73, 2.54x eager
skewed_128e_top8    32768, 128, 8, 2048  295 us   427 us, 0.70, 2.76x eager
==================  ===================  =======  ==================================================

Floors use the rates measured on the H200 (copy 4.17 TB/s, bf16 754 TFLOP/s, fp8 1284 TFLOP/s;
benchmarks/data/references_h200.json, 2026-11-30).
The last column is benchmarks/summary.py's row for the workload (the newest evaluation against every baseline candidate;
the scatter fix's history is in NOTES.md).
The calls stream at 2.87-2.90 TB/s; the gap to the floor is the three-launch chain and a likely DRAM-side limit of
the write-heavy scatter (NOTES.md).
Investigation notes: references/moe_permute/NOTES.md.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)

_ONE_HOT = 8192   # elements of the [BLOCK_T*k, E] one-hot rank tile per routing program (64 per thread)
_MAX_BLOCK_T = 128
_EG = 8           # expert columns per scan program
_SCAN_ROWS = 128  # count-matrix rows per scan step
_BLOCK_H = 1024   # hidden elements per copy step: one 16-byte vector per thread at 4 warps


# ------------------------------------------------------------------------------------------------ kernels


@triton.jit
def _moe_route_kernel(
    logits_ptr, ids_ptr, weights_ptr, counts_ptr, rank_ptr,
    T, E,
    stride_lt,
    K: tl.constexpr, K_P2: tl.constexpr, E_P2: tl.constexpr, BLOCK_T: tl.constexpr,
):
    """Routes tokens [pid*BLOCK_T, +BLOCK_T): reads BLOCK_T*E*4 bytes of logits; writes each pair's id, weight
    and block-local rank (12 bytes per pair) and the block's E expert counts."""
    blk = tl.program_id(0)
    rows = blk * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, E_P2)
    slots = tl.arange(0, K_P2)
    row_ok = rows < T
    x = tl.load(logits_ptr + rows[:, None].to(tl.int64) * stride_lt + cols[None, :],
                mask=row_ok[:, None] & (cols[None, :] < E), other=-float("inf"))
    # Top-k in registers: k rounds of arg-max (lowest index on ties), each winner masked out for the next.
    ids = tl.zeros([BLOCK_T, K_P2], dtype=tl.int32)
    picked = tl.full([BLOCK_T, K_P2], -float("inf"), dtype=tl.float32)
    for j in tl.static_range(K):
        best = tl.argmax(x, axis=1, tie_break_left=True).to(tl.int32)
        top = tl.max(x, axis=1)
        ids = tl.where(slots[None, :] == j, best[:, None], ids)
        picked = tl.where(slots[None, :] == j, top[:, None], picked)
        x = tl.where(cols[None, :] == best[:, None], -float("inf"), x)
    # Softmax over the k picks only: k exponentials, one reciprocal per token.
    pair_ok = row_ok[:, None] & (slots[None, :] < K)
    top1 = tl.where(row_ok, tl.max(picked, axis=1), 0.0)  # rows past T hold -inf: keep them finite
    p = tl.where(pair_ok, tl.exp2((picked - top1[:, None]) * LOG2E), 0.0)
    inv = 1.0 / tl.where(row_ok, tl.sum(p, axis=1), 1.0)
    pair = rows[:, None] * K + slots[None, :]
    tl.store(ids_ptr + pair, ids, mask=pair_ok)
    tl.store(weights_ptr + pair, p * inv[:, None], mask=pair_ok)
    # Block-local counting sort: expert counts (one row of the count matrix, no atomics) and each pair's rank
    # among the block's earlier pairs of the same expert, in (token, slot) order.
    N: tl.constexpr = BLOCK_T * K_P2
    flat_ids = tl.reshape(ids, [N])
    flat_ok = tl.reshape(pair_ok, [N])
    one_hot = ((flat_ids[:, None] == cols[None, :]) & flat_ok[:, None]).to(tl.int32)
    tl.store(counts_ptr + blk * E + cols, tl.sum(one_hot, axis=0), mask=cols < E)
    rank = tl.sum(tl.cumsum(one_hot, axis=0) * one_hot, axis=1) - 1
    tl.store(rank_ptr + tl.reshape(pair, [N]), rank, mask=flat_ok)


@triton.jit
def _moe_scan_kernel(
    counts_ptr, totals_ptr,
    NB, E,
    BLOCK_B: tl.constexpr, EG: tl.constexpr,
):
    """Expert columns [pid*EG, +EG) of the [NB, E] count matrix: each count becomes the number of that expert's
    pairs in earlier blocks (exclusive scan down the column), and the column totals are written. Reads and
    writes NB*EG*4 bytes."""
    cols = tl.program_id(0) * EG + tl.arange(0, EG)
    col_ok = cols < E
    carry = tl.zeros([EG], dtype=tl.int32)
    for b0 in tl.range(0, NB, BLOCK_B, num_stages=2):
        b = b0 + tl.arange(0, BLOCK_B)
        ptrs = counts_ptr + b[:, None] * E + cols[None, :]
        ok = (b[:, None] < NB) & col_ok[None, :]
        c = tl.load(ptrs, mask=ok, other=0)
        tl.store(ptrs, tl.cumsum(c, axis=0) - c + carry[None, :], mask=ok)
        carry += tl.sum(c, axis=0)
    tl.store(totals_ptr + cols, carry, mask=col_ok)


@triton.jit
def _moe_scatter_kernel(
    x_ptr, xp_ptr, ids_ptr, base_ptr, totals_ptr, row_map_ptr, offsets_ptr,
    n_tokens, E, H,
    stride_xt, stride_pt,
    K: tl.constexpr, K_P2: tl.constexpr, E_P2: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr,
):
    """Token pid: computes the k destination rows and copies X[pid] (H*2 bytes read once) to each of them
    (k*H*2 bytes written); row_id_map[pid] (the route kernel's ranks) is replaced by the destinations."""
    t = tl.program_id(0)
    # Where each expert's rows start: the totals of the experts before it (E values from L2), as masked sums.
    experts = tl.arange(0, E_P2)
    totals = tl.load(totals_ptr + experts, mask=experts < E, other=0)
    # expert_offsets[j] for j = t, t + T, ... <= E: one masked sum per entry, spread over the programs.
    for e_out in range(t, E + 1, n_tokens):
        tl.store(offsets_ptr + e_out, tl.sum(tl.where(experts < e_out, totals, 0), axis=0))
    slots = tl.arange(0, K_P2)
    slot_ok = slots < K
    e = tl.load(ids_ptr + t * K + slots, mask=slot_ok, other=0)
    rank = tl.load(row_map_ptr + t * K + slots, mask=slot_ok, other=0)
    base = tl.load(base_ptr + (t // BLOCK_T) * E + e, mask=slot_ok, other=0)
    start = tl.sum(tl.where(experts[None, :] < e[:, None], totals[None, :], 0), axis=1)
    dest = start + base + rank
    tl.store(row_map_ptr + t * K + slots, dest, mask=slot_ok)
    # Every warp re-reads the k destinations its program just stored, after a barrier, instead of using its own
    # copy of `dest`. Seen on the H200 (Triton 3.6, benchmarks/debug_moe_permute.py): row_id_map, stored from
    # `dest`, was right, yet the copies below sent some 256-element pieces of rows (one warp's share of a chunk)
    # to other rows, or past the end (an illegal address on mixtral_8e_top2); the interpreter was right. With the
    # re-read every output is right. It costs k*4 bytes per token.
    tl.debug_barrier()
    dest = tl.load(row_map_ptr + t * K + slots, mask=slot_ok, other=0, volatile=True)
    # Row copy: read X[t] once per chunk, store it k times (16-byte vectors, streaming stores).
    x_row = x_ptr + t.to(tl.int64) * stride_xt
    # The k destinations are one [K_P2, BLOCK_H] store of the broadcast chunk.
    dest_rows = xp_ptr + dest.to(tl.int64)[:, None] * stride_pt
    for h0 in range(0, H, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        h_ok = h < H
        x = tl.load(x_row + h, mask=h_ok, eviction_policy="evict_first")
        tl.store(dest_rows + h[None, :], tl.broadcast_to(x[None, :], [K_P2, BLOCK_H]),
                 mask=slot_ok[:, None] & h_ok[None, :], cache_modifier=".cs")


# ------------------------------------------------------------------------------------------------ launcher


def moe_permute(logits: torch.Tensor, X: torch.Tensor, k: int, *, _block_t: int | None = None,
                _block_h: int | None = None, _eg: int | None = None, _scan_rows: int | None = None):
    """Route each token to its top-k experts and permute the token rows expert-major.

    Returns (topk_ids int32 [T, k], topk_weights fp32 [T, k], expert_offsets int32 [E+1], row_id_map int32
    [T, k], X_perm [T*k, H]). The underscored arguments override block sizes; tests use them to exercise
    several blocks, scan steps and copy chunks on small inputs.
    """
    if logits.dim() != 2 or X.dim() != 2 or logits.shape[0] != X.shape[0]:
        raise ValueError(f"expected logits [T, E] and X [T, H], got {tuple(logits.shape)} and {tuple(X.shape)}")
    if logits.dtype != torch.float32:
        raise TypeError(f"logits must be fp32, got {logits.dtype}")
    T, E = logits.shape
    H = X.shape[1]
    k = int(k)
    if not 1 <= k <= E:
        raise ValueError(f"k must be in [1, E={E}], got {k}")
    if T * k >= 2**31:
        raise ValueError("T*k must fit in int32")
    logits = logits if logits.stride(1) == 1 else logits.contiguous()
    X = X if X.stride(1) == 1 else X.contiguous()
    dev = logits.device
    ids = torch.empty((T, k), dtype=torch.int32, device=dev)
    weights = torch.empty((T, k), dtype=torch.float32, device=dev)
    offsets = torch.empty(E + 1, dtype=torch.int32, device=dev)
    row_map = torch.empty((T, k), dtype=torch.int32, device=dev)
    X_perm = torch.empty((T * k, H), dtype=X.dtype, device=dev)
    if T == 0:
        return ids, weights, offsets.zero_(), row_map, X_perm
    k_p2 = triton.next_power_of_2(k)
    e_p2 = triton.next_power_of_2(E)
    block_t = _block_t or max(1, min(_MAX_BLOCK_T, _ONE_HOT // (k_p2 * e_p2), triton.next_power_of_2(T)))
    nb = triton.cdiv(T, block_t)
    counts = torch.empty((nb, E), dtype=torch.int32, device=dev)   # every entry written by the route kernel
    totals = torch.empty(E, dtype=torch.int32, device=dev)
    _moe_route_kernel[(nb,)](logits, ids, weights, counts, row_map, T, E, logits.stride(0),
                             K=k, K_P2=k_p2, E_P2=e_p2, BLOCK_T=block_t, num_warps=4)
    eg = _eg or min(_EG, e_p2)
    _moe_scan_kernel[(triton.cdiv(E, eg),)](counts, totals, nb, E, BLOCK_B=_scan_rows or _SCAN_ROWS, EG=eg,
                                             num_warps=4)
    block_h = _block_h or min(_BLOCK_H, max(16, triton.next_power_of_2(H)))
    _moe_scatter_kernel[(T,)](X, X_perm, ids, counts, totals, row_map, offsets, T, E, H, X.stride(0), X_perm.stride(0),
                              K=k, K_P2=k_p2, E_P2=e_p2, BLOCK_T=block_t, BLOCK_H=block_h, num_warps=4)
    return ids, weights, offsets, row_map, X_perm


def kernel(logits: torch.Tensor, X: torch.Tensor, *, k: int):
    """Submission entry point: (topk_ids, topk_weights, expert_offsets, row_id_map, X_perm)."""
    return moe_permute(logits, X, k)
