"""MoE routing + permutation in three Triton launches: route/count/rank, scan, scatter-copy.

Route: a [BLOCK_T, E] logit tile becomes packed int64 keys (order-preserving fp32 bits << 32 | (E - 1 - expert));
k rounds of tl.max pick the top experts with ties to the lower index. Weights: exp2 softmax over the k picks.
The block's expert counts come from tl.histogram. In-block ranks: the block's pairs as (expert << 16 | position)
words are sorted with tl.sort (a BLOCK_T*K-element sort in registers, not a sort of all T*k pairs); a pair's rank
is its sorted position minus the first position of its expert (exclusive cumsum of the counts).
Scan: per expert column, an exclusive cumsum down the [blocks, E] count matrix plus the expert totals.
Scatter: a program per token reads X[t] once per chunk and stores it to its k destination rows.
"""
import torch
import triton
import triton.language as tl

LOG2E: tl.constexpr = 1.4426950408889634


@triton.jit
def _route_rank(logits_ptr, ids_ptr, w_ptr, counts_ptr, rank_ptr, T, E,
                K: tl.constexpr, KP: tl.constexpr, EP: tl.constexpr, BLOCK_T: tl.constexpr):
    blk = tl.program_id(0)
    rows = blk * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, EP)
    slots = tl.arange(0, KP)
    row_ok = rows < T
    x = tl.load(logits_ptr + rows[:, None] * E + cols[None, :], mask=row_ok[:, None] & (cols[None, :] < E),
                other=float("-inf"))
    bits = x.to(tl.int32, bitcast=True)
    okey = tl.where(bits < 0, ~bits, bits | -2147483648).to(tl.uint32, bitcast=True).to(tl.int64)
    packed = (okey << 32) | (E - 1 - cols)[None, :].to(tl.int64)
    packed = tl.where(cols[None, :] < E, packed, -1)
    ids = tl.zeros([BLOCK_T, KP], dtype=tl.int32)
    vals = tl.full([BLOCK_T, KP], float("-inf"), dtype=tl.float32)
    for j in tl.static_range(K):
        best = tl.max(packed, axis=1)
        e = (E - 1 - (best & 0xFFFFFFFF)).to(tl.int32)
        v = tl.sum(tl.where(cols[None, :] == e[:, None], x, 0.0), axis=1)
        ids = tl.where(slots[None, :] == j, e[:, None], ids)
        vals = tl.where(slots[None, :] == j, v[:, None], vals)
        packed = tl.where(cols[None, :] == e[:, None], -1, packed)
    pair_ok = row_ok[:, None] & (slots[None, :] < K)
    top = tl.max(vals, axis=1)
    p = tl.where(pair_ok, tl.exp2((vals - top[:, None]) * LOG2E), 0.0)
    w = p / tl.sum(p, axis=1)[:, None]
    pair = rows[:, None] * K + slots[None, :]
    tl.store(ids_ptr + pair, ids, mask=pair_ok)
    tl.store(w_ptr + pair, w, mask=pair_ok)
    N: tl.constexpr = BLOCK_T * KP
    flat = tl.reshape(tl.where(pair_ok, ids, EP), [N])
    cnt = tl.histogram(flat, 2 * EP)  # bin EP collects the padding pairs
    counts = tl.sum(tl.where(tl.arange(0, 2 * EP)[:, None] == cols[None, :], cnt[:, None], 0), axis=0)
    tl.store(counts_ptr + blk * E + cols, counts, mask=cols < E)
    first = tl.cumsum(counts, axis=0) - counts
    words = tl.sort((flat << 16) | tl.arange(0, N))
    s_exp = words >> 16
    s_pos = words & 0xFFFF
    s_first = tl.sum(tl.where(s_exp[:, None] == cols[None, :], first[None, :], 0), axis=1)
    rank = tl.arange(0, N) - s_first
    flat_pair = tl.reshape(pair, [N])
    dest_pair = tl.sum(tl.where(s_pos[:, None] == tl.arange(0, N)[None, :], flat_pair[None, :], 0), axis=1)
    tl.store(rank_ptr + dest_pair, rank, mask=s_exp < E)


@triton.jit
def _scan_counts(counts_ptr, totals_ptr, NB, E, BLOCK_B: tl.constexpr, EG: tl.constexpr):
    cols = tl.program_id(0) * EG + tl.arange(0, EG)
    carry = tl.zeros([EG], dtype=tl.int32)
    for b0 in range(0, NB, BLOCK_B):
        b = b0 + tl.arange(0, BLOCK_B)
        ok = (b[:, None] < NB) & (cols[None, :] < E)
        c = tl.load(counts_ptr + b[:, None] * E + cols[None, :], mask=ok, other=0)
        tl.store(counts_ptr + b[:, None] * E + cols[None, :], tl.cumsum(c, axis=0) - c + carry[None, :], mask=ok)
        carry += tl.sum(c, axis=0)
    tl.store(totals_ptr + cols, carry, mask=cols < E)


@triton.jit
def _scatter_rows(x_ptr, xp_ptr, ids_ptr, base_ptr, totals_ptr, row_map_ptr, offsets_ptr, T, E, H,
                  K: tl.constexpr, KP: tl.constexpr, EP: tl.constexpr, BLOCK_T: tl.constexpr,
                  BLOCK_H: tl.constexpr):
    t = tl.program_id(0)
    experts = tl.arange(0, EP)
    totals = tl.load(totals_ptr + experts, mask=experts < E, other=0)
    if t == 0:
        incl = tl.cumsum(totals, axis=0)
        tl.store(offsets_ptr + experts + 1, incl, mask=experts < E)
        tl.store(offsets_ptr, 0)
    slots = tl.arange(0, KP)
    ok = slots < K
    e = tl.load(ids_ptr + t * K + slots, mask=ok, other=0)
    rank = tl.load(row_map_ptr + t * K + slots, mask=ok, other=0)
    base = tl.load(base_ptr + (t // BLOCK_T) * E + e, mask=ok, other=0)
    start = tl.sum(tl.where(experts[None, :] < e[:, None], totals[None, :], 0), axis=1)
    dest = start + base + rank
    tl.store(row_map_ptr + t * K + slots, dest, mask=ok)
    for h0 in range(0, H, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        x = tl.load(x_ptr + t.to(tl.int64) * H + h, mask=h < H, eviction_policy="evict_first")
        tl.store(xp_ptr + dest.to(tl.int64)[:, None] * H + h[None, :], tl.broadcast_to(x[None, :], [KP, BLOCK_H]),
                 mask=ok[:, None] & (h[None, :] < H), cache_modifier=".cs")


def kernel(logits, X, *, k):
    T, E = logits.shape
    H = X.shape[1]
    dev = logits.device
    kp, ep = triton.next_power_of_2(k), triton.next_power_of_2(E)
    block_t = max(1, min(64, 4096 // (kp * ep)))
    nb = triton.cdiv(T, block_t)
    ids = torch.empty((T, k), dtype=torch.int32, device=dev)
    weights = torch.empty((T, k), dtype=torch.float32, device=dev)
    counts = torch.empty((nb, E), dtype=torch.int32, device=dev)
    totals = torch.empty(E, dtype=torch.int32, device=dev)
    offsets = torch.empty(E + 1, dtype=torch.int32, device=dev)
    row_map = torch.empty((T, k), dtype=torch.int32, device=dev)
    X_perm = torch.empty((T * k, H), dtype=X.dtype, device=dev)
    _route_rank[(nb,)](logits, ids, weights, counts, row_map, T, E, K=k, KP=kp, EP=ep, BLOCK_T=block_t, num_warps=4)
    _scan_counts[(triton.cdiv(E, 8),)](counts, totals, nb, E, BLOCK_B=128, EG=8)
    _scatter_rows[(T,)](X, X_perm, ids, counts, totals, row_map, offsets, T, E, H, K=k, KP=kp, EP=ep,
                        BLOCK_T=block_t, BLOCK_H=1024, num_warps=4)
    return ids, weights, offsets, row_map, X_perm
