"""MoE routing + permutation behind a launcher class; destination-owning row copies (four launches).

route: per [BLOCK_T, E] tile, tl.topk over packed int64 keys (order-preserving fp32 bits << 32 | (E-1-expert)),
  so the k largest logits come out with ties to the lower expert; exp2 softmax over the k picks; block counts by
  a one-hot sum; block-local ranks by tl.cumsum over the one-hot [BLOCK_T*K, E] tile.
scan: exclusive scan of the [blocks, E] count matrix down each expert column, and the totals.
place: per token, dest = offsets[e] + base[block, e] + rank -> row_id_map, and src_token[dest] = t.
gather: per destination row r, X_perm[r] = X[src_token[r]] in 16-byte vectors.
"""
import torch
import triton
import triton.language as tl

LOG2E: tl.constexpr = 1.4426950408889634


@triton.jit
def _route(logits_ptr, ids_ptr, w_ptr, counts_ptr, rank_ptr, T, E,
           K: tl.constexpr, KP: tl.constexpr, EP: tl.constexpr, BLOCK_T: tl.constexpr):
    blk = tl.program_id(0)
    rows = blk * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, EP)
    row_ok = rows < T
    x = tl.load(logits_ptr + rows[:, None] * E + cols[None, :], mask=row_ok[:, None] & (cols[None, :] < E),
                other=float("-inf"))
    bits = x.to(tl.int32, bitcast=True)
    okey = tl.where(bits < 0, ~bits, bits | -2147483648).to(tl.uint32, bitcast=True).to(tl.int64)
    packed = tl.where(cols[None, :] < E, (okey << 32) | (E - 1 - cols)[None, :].to(tl.int64), -1)
    top = tl.topk(packed, KP, dim=1)
    slots = tl.arange(0, KP)
    e = (E - 1 - (top & 0xFFFFFFFF)).to(tl.int32)
    hi = (top >> 32).to(tl.uint32)
    vbits = tl.where(hi >= 2147483648, hi ^ 2147483648, ~hi).to(tl.int32, bitcast=True)
    v = vbits.to(tl.float32, bitcast=True)
    pair_ok = row_ok[:, None] & (slots[None, :] < K)
    m = tl.max(tl.where(pair_ok, v, float("-inf")), axis=1)
    p = tl.where(pair_ok, tl.exp2((v - m[:, None]) * LOG2E), 0.0)
    w = p / tl.sum(p, axis=1)[:, None]
    pair = rows[:, None] * K + slots[None, :]
    tl.store(ids_ptr + pair, e, mask=pair_ok)
    tl.store(w_ptr + pair, w, mask=pair_ok)
    N: tl.constexpr = BLOCK_T * KP
    flat = tl.reshape(e, [N])
    flat_ok = tl.reshape(pair_ok, [N])
    one_hot = ((flat[:, None] == cols[None, :]) & flat_ok[:, None]).to(tl.int32)
    tl.store(counts_ptr + blk * E + cols, tl.sum(one_hot, axis=0), mask=cols < E)
    rank = tl.sum((tl.cumsum(one_hot, axis=0) - one_hot) * one_hot, axis=1)
    tl.store(rank_ptr + tl.reshape(pair, [N]), rank, mask=flat_ok)


@triton.jit
def _scan(counts_ptr, totals_ptr, NB, E, BLOCK_B: tl.constexpr, EG: tl.constexpr):
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
def _place(ids_ptr, base_ptr, totals_ptr, row_map_ptr, src_ptr, offsets_ptr, E,
           K: tl.constexpr, KP: tl.constexpr, EP: tl.constexpr, BLOCK_T: tl.constexpr):
    t = tl.program_id(0)
    experts = tl.arange(0, EP)
    totals = tl.load(totals_ptr + experts, mask=experts < E, other=0)
    if t == 0:
        tl.store(offsets_ptr + experts + 1, tl.cumsum(totals, axis=0), mask=experts < E)
        tl.store(offsets_ptr, 0)
    slots = tl.arange(0, KP)
    ok = slots < K
    e = tl.load(ids_ptr + t * K + slots, mask=ok, other=0)
    rank = tl.load(row_map_ptr + t * K + slots, mask=ok, other=0)
    base = tl.load(base_ptr + (t // BLOCK_T) * E + e, mask=ok, other=0)
    start = tl.sum(tl.where(experts[None, :] < e[:, None], totals[None, :], 0), axis=1)
    dest = start + base + rank
    tl.store(row_map_ptr + t * K + slots, dest, mask=ok)
    tl.store(src_ptr + dest, tl.zeros([KP], dtype=tl.int32) + t, mask=ok)


@triton.jit
def _gather_rows(x_ptr, xp_ptr, src_ptr, H, BLOCK_H: tl.constexpr):
    r = tl.program_id(0)
    t = tl.load(src_ptr + r)
    for h0 in range(0, H, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        x = tl.load(x_ptr + t.to(tl.int64) * H + h, mask=h < H, eviction_policy="evict_first")
        tl.store(xp_ptr + r.to(tl.int64) * H + h, x, mask=h < H, cache_modifier=".cs")


class MoEPermute:
    ONE_HOT = 8192

    def __call__(self, logits, X, k):
        T, E = logits.shape
        H = X.shape[1]
        dev = logits.device
        kp, ep = triton.next_power_of_2(k), triton.next_power_of_2(E)
        block_t = max(1, min(128, self.ONE_HOT // (kp * ep)))
        nb = triton.cdiv(T, block_t)
        ids = torch.empty((T, k), dtype=torch.int32, device=dev)
        weights = torch.empty((T, k), dtype=torch.float32, device=dev)
        counts = torch.empty((nb, E), dtype=torch.int32, device=dev)
        totals = torch.empty(E, dtype=torch.int32, device=dev)
        offsets = torch.empty(E + 1, dtype=torch.int32, device=dev)
        row_map = torch.empty((T, k), dtype=torch.int32, device=dev)
        src = torch.empty(T * k, dtype=torch.int32, device=dev)
        X_perm = torch.empty((T * k, H), dtype=X.dtype, device=dev)
        _route[(nb,)](logits, ids, weights, counts, row_map, T, E, K=k, KP=kp, EP=ep, BLOCK_T=block_t)
        _scan[(triton.cdiv(E, 8),)](counts, totals, nb, E, BLOCK_B=128, EG=8)
        _place[(T,)](ids, counts, totals, row_map, src, offsets, E, K=k, KP=kp, EP=ep, BLOCK_T=block_t)
        _gather_rows[(T * k,)](X, X_perm, src, H, BLOCK_H=1024, num_warps=4)
        return ids, weights, offsets, row_map, X_perm


_permute = MoEPermute()


def kernel(logits, X, *, k):
    return _permute(logits, X, k)
