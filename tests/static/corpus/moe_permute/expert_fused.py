"""Three launches, no host sync. (1) route: a [BT, E] logit tile per program, k argmax rounds (lowest index on
ties), exp2 softmax over the picks, the block's expert histogram stored as one row of the [blocks, E] matrix and
each pair's block-local rank from a cumsum down a one-hot tile; (2) scan: each program walks a group of expert
columns down the blocks (exclusive, with a carry) and writes the totals; (3) scatter: a program per token reads
X[t] once per chunk (evict_first) and writes the k copies as one [k, BH] tile with streaming stores."""
import torch
import triton
import triton.language as tl

LOG2E: tl.constexpr = 1.4426950408889634


@triton.jit
def _route_count(logits_ptr, ids_ptr, w_ptr, counts_ptr, rank_ptr, T, E,
                 K: tl.constexpr, KP: tl.constexpr, EP: tl.constexpr, BT: tl.constexpr):
    blk = tl.program_id(0)
    t = blk * BT + tl.arange(0, BT)
    e_idx = tl.arange(0, EP)
    j_idx = tl.arange(0, KP)
    live = t < T
    z = tl.load(logits_ptr + t[:, None] * E + e_idx[None, :], mask=live[:, None] & (e_idx[None, :] < E),
                other=-float("inf"))
    chosen = tl.zeros([BT, KP], dtype=tl.int32)
    score = tl.full([BT, KP], -float("inf"), dtype=tl.float32)
    for j in tl.static_range(K):
        win = tl.argmax(z, axis=1, tie_break_left=True)
        chosen = tl.where(j_idx[None, :] == j, win[:, None], chosen)
        score = tl.where(j_idx[None, :] == j, tl.max(z, axis=1)[:, None], score)
        z = tl.where(e_idx[None, :] == win[:, None], -float("inf"), z)
    ok = live[:, None] & (j_idx[None, :] < K)
    lead = tl.where(live, tl.max(score, axis=1), 0.0)
    p = tl.where(ok, tl.exp2((score - lead[:, None]) * LOG2E), 0.0)
    r = 1.0 / tl.where(live, tl.sum(p, axis=1), 1.0)
    flat_pair = t[:, None] * K + j_idx[None, :]
    tl.store(ids_ptr + flat_pair, chosen, mask=ok)
    tl.store(w_ptr + flat_pair, p * r[:, None], mask=ok)
    NP: tl.constexpr = BT * KP
    f_ids = tl.reshape(chosen, [NP])
    f_ok = tl.reshape(ok, [NP])
    tl.store(counts_ptr + blk * E + e_idx, tl.histogram(f_ids, EP, mask=f_ok), mask=e_idx < E)
    hot = ((f_ids[:, None] == e_idx[None, :]) & f_ok[:, None]).to(tl.int32)
    before = tl.sum((tl.cumsum(hot, axis=0) - hot) * hot, axis=1)
    tl.store(rank_ptr + tl.reshape(flat_pair, [NP]), before, mask=f_ok)


@triton.jit
def _scan_blocks(counts_ptr, totals_ptr, NB, E, RB: tl.constexpr, EG: tl.constexpr):
    ecol = tl.program_id(0) * EG + tl.arange(0, EG)
    carry = tl.zeros([EG], dtype=tl.int32)
    for b0 in range(0, NB, RB):
        b = b0 + tl.arange(0, RB)
        m = (b[:, None] < NB) & (ecol[None, :] < E)
        c = tl.load(counts_ptr + b[:, None] * E + ecol[None, :], mask=m, other=0)
        tl.store(counts_ptr + b[:, None] * E + ecol[None, :], carry[None, :] + tl.cumsum(c, axis=0) - c, mask=m)
        carry += tl.sum(c, axis=0)
    tl.store(totals_ptr + ecol, carry, mask=ecol < E)


@triton.jit
def _scatter_rows(x_ptr, xp_ptr, ids_ptr, base_ptr, totals_ptr, rank_ptr, offsets_ptr, E, H,
                  K: tl.constexpr, KP: tl.constexpr, EP: tl.constexpr, BT: tl.constexpr, BH: tl.constexpr):
    t = tl.program_id(0)
    ev = tl.arange(0, EP)
    tot = tl.load(totals_ptr + ev, mask=ev < E, other=0)
    first = tl.cumsum(tot, axis=0) - tot
    if t == 0:
        tl.store(offsets_ptr + ev, first, mask=ev < E)
        tl.store(offsets_ptr + E, tl.sum(tot, axis=0))
    j = tl.arange(0, KP)
    jm = j < K
    e = tl.load(ids_ptr + t * K + j, mask=jm, other=0)
    dest = (tl.sum(tl.where(ev[None, :] == e[:, None], first[None, :], 0), axis=1)
            + tl.load(base_ptr + (t // BT) * E + e, mask=jm, other=0)
            + tl.load(rank_ptr + t * K + j, mask=jm, other=0))
    tl.store(rank_ptr + t * K + j, dest, mask=jm)
    src = x_ptr + t.to(tl.int64) * H
    for h0 in range(0, H, BH):
        h = h0 + tl.arange(0, BH)
        row = tl.load(src + h, mask=h < H, eviction_policy="evict_first")
        out = xp_ptr + dest.to(tl.int64)[:, None] * H + h[None, :]
        tl.store(out, tl.broadcast_to(row[None, :], [KP, BH]), mask=jm[:, None] & (h[None, :] < H),
                 cache_modifier=".cs")


def kernel(logits, X, *, k):
    T, E = logits.shape
    H = X.shape[1]
    dev = logits.device
    KP, EP = triton.next_power_of_2(k), triton.next_power_of_2(E)
    BT = max(1, min(128, 8192 // (KP * EP)))
    nb = triton.cdiv(T, BT)
    ids = torch.empty((T, k), dtype=torch.int32, device=dev)
    w = torch.empty((T, k), dtype=torch.float32, device=dev)
    counts = torch.empty((nb, E), dtype=torch.int32, device=dev)
    row_map = torch.empty((T, k), dtype=torch.int32, device=dev)
    totals = torch.empty(E, dtype=torch.int32, device=dev)
    offsets = torch.empty(E + 1, dtype=torch.int32, device=dev)
    X_perm = torch.empty((T * k, H), dtype=X.dtype, device=dev)
    _route_count[(nb,)](logits, ids, w, counts, row_map, T, E, K=k, KP=KP, EP=EP, BT=BT, num_warps=4)
    _scan_blocks[(triton.cdiv(E, 8),)](counts, totals, nb, E, RB=128, EG=8)
    BH = min(1024, triton.next_power_of_2(H))
    _scatter_rows[(T,)](X, X_perm, ids, counts, totals, row_map, offsets, E, H, K=k, KP=KP, EP=EP, BT=BT, BH=BH,
                        num_warps=4)
    return ids, w, offsets, row_map, X_perm
