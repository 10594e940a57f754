"""Routing, counting and block-local ranks in one kernel (argmax rounds, exp over the k picks, tl.histogram, a
one-hot cumsum), the [blocks, E] scan and the offsets in torch on the device, then an element-wise scatter: each
program copies BLOCK flat elements of X_perm, decomposing every element index into (pair, h)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _route_rank(logits_ptr, ids_ptr, w_ptr, counts_ptr, rank_ptr, T, E,
                K: tl.constexpr, KP: tl.constexpr, EP: tl.constexpr, BT: tl.constexpr):
    b = tl.program_id(0)
    rows = b * BT + tl.arange(0, BT)
    cols = tl.arange(0, EP)
    slots = tl.arange(0, KP)
    x = tl.load(logits_ptr + rows[:, None] * E + cols[None, :],
                mask=(rows[:, None] < T) & (cols[None, :] < E), other=-float("inf"))
    ids = tl.zeros([BT, KP], dtype=tl.int32)
    top = tl.full([BT, KP], -float("inf"), dtype=tl.float32)
    for j in tl.static_range(K):
        a = tl.argmax(x, axis=1, tie_break_left=True)
        ids = tl.where(slots[None, :] == j, a[:, None], ids)
        top = tl.where(slots[None, :] == j, tl.max(x, axis=1)[:, None], top)
        x = tl.where(cols[None, :] == a[:, None], -float("inf"), x)
    ok = (rows[:, None] < T) & (slots[None, :] < K)
    p = tl.where(ok, tl.exp(top - tl.max(top, axis=1)[:, None]), 0.0)
    p = p / tl.sum(p, axis=1)[:, None]
    pair = rows[:, None] * K + slots[None, :]
    tl.store(ids_ptr + pair, ids, mask=ok)
    tl.store(w_ptr + pair, p, mask=ok)
    flat = tl.reshape(ids, [BT * KP])
    fok = tl.reshape(ok, [BT * KP])
    tl.store(counts_ptr + b * E + cols, tl.histogram(flat, EP, mask=fok), mask=cols < E)
    hot = ((flat[:, None] == cols[None, :]) & fok[:, None]).to(tl.int32)
    tl.store(rank_ptr + tl.reshape(pair, [BT * KP]), tl.sum(tl.cumsum(hot, axis=0) * hot, axis=1) - 1, mask=fok)


@triton.jit
def _scatter_elems(x_ptr, xp_ptr, ids_ptr, offsets_ptr, base_ptr, rank_ptr, row_map_ptr, n, H, E,
                   K: tl.constexpr, BT: tl.constexpr, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = idx < n
    pair = idx // H
    h = idx % H
    t = pair // K
    e = tl.load(ids_ptr + pair, mask=ok, other=0)
    dest = (tl.load(offsets_ptr + e, mask=ok, other=0) + tl.load(base_ptr + (t // BT) * E + e, mask=ok, other=0)
            + tl.load(rank_ptr + pair, mask=ok, other=0))
    v = tl.load(x_ptr + t * H + h, mask=ok)
    tl.store(xp_ptr + dest * H + h, v, mask=ok)
    tl.store(row_map_ptr + pair, dest, mask=ok & (h == 0))


def kernel(logits, X, *, k):
    T, E = logits.shape
    H = X.shape[1]
    dev = logits.device
    KP, EP = triton.next_power_of_2(k), triton.next_power_of_2(E)
    BT = max(1, min(64, 4096 // (KP * EP)))
    nb = triton.cdiv(T, BT)
    ids = torch.empty((T, k), dtype=torch.int32, device=dev)
    w = torch.empty((T, k), dtype=torch.float32, device=dev)
    counts = torch.empty((nb, E), dtype=torch.int32, device=dev)
    rank = torch.empty((T, k), dtype=torch.int32, device=dev)
    _route_rank[(nb,)](logits, ids, w, counts, rank, T, E, K=k, KP=KP, EP=EP, BT=BT)
    base = (torch.cumsum(counts, 0) - counts).to(torch.int32).contiguous()
    offsets = torch.zeros(E + 1, dtype=torch.int32, device=dev)
    offsets[1:] = torch.cumsum(counts.sum(0), 0)
    row_map = torch.empty((T, k), dtype=torch.int32, device=dev)
    X_perm = torch.empty((T * k, H), dtype=X.dtype, device=dev)
    n = T * k * H
    _scatter_elems[(triton.cdiv(n, 1024),)](X, X_perm, ids, offsets, base, rank, row_map, n, H, E,
                                             K=k, BT=BT, BLOCK=1024)
    return ids, w, offsets, row_map, X_perm
