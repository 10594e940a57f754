"""Naive routing: one program per token takes the full softmax over all E experts (E exponentials), then k
argmax rounds; every pair bumps a global expert counter with an atomic. The permutation takes each pair's slot
from a second global atomic cursor, one program per (token, slot) copying the token's row. X_perm is sized
from the device total read back with .item()."""
import torch
import triton
import triton.language as tl


@triton.jit
def _route(logits_ptr, ids_ptr, w_ptr, counts_ptr, E, K: tl.constexpr, BLOCK_E: tl.constexpr):
    t = tl.program_id(0)
    cols = tl.arange(0, BLOCK_E)
    x = tl.load(logits_ptr + t * E + cols, mask=cols < E, other=-float("inf"))
    p = tl.exp(x - tl.max(x, axis=0))
    p = p / tl.sum(p, axis=0)
    picked_sum = 0.0
    for j in tl.static_range(K):
        i = tl.argmax(p, axis=0)
        pj = tl.max(p, axis=0)
        tl.store(ids_ptr + t * K + j, i)
        tl.store(w_ptr + t * K + j, pj)
        tl.atomic_add(counts_ptr + i, 1)
        picked_sum += pj
        p = tl.where(cols == i, -1.0, p)
    for j in tl.static_range(K):
        wj = tl.load(w_ptr + t * K + j)
        tl.store(w_ptr + t * K + j, wj / picked_sum)


@triton.jit
def _scatter_pairs(x_ptr, xp_ptr, ids_ptr, offsets_ptr, cursor_ptr, row_map_ptr, H,
                   K: tl.constexpr, BLOCK_H: tl.constexpr):
    r = tl.program_id(0)
    t = r // K
    e = tl.load(ids_ptr + r)
    slot = tl.atomic_add(cursor_ptr + e, 1)
    dest = tl.load(offsets_ptr + e) + slot
    tl.store(row_map_ptr + r, dest)
    for h0 in range(0, H, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        v = tl.load(x_ptr + t * H + h, mask=h < H)
        tl.store(xp_ptr + dest * H + h, v, mask=h < H)


def kernel(logits, X, *, k):
    T, E = logits.shape
    H = X.shape[1]
    dev = logits.device
    ids = torch.empty((T, k), dtype=torch.int32, device=dev)
    w = torch.empty((T, k), dtype=torch.float32, device=dev)
    counts = torch.zeros(E, dtype=torch.int32, device=dev)
    _route[(T,)](logits, ids, w, counts, E, K=k, BLOCK_E=triton.next_power_of_2(E))
    offsets = torch.zeros(E + 1, dtype=torch.int32, device=dev)
    offsets[1:] = torch.cumsum(counts, 0)
    rows = int(offsets[-1].item())
    X_perm = torch.empty((rows, H), dtype=X.dtype, device=dev)
    cursor = torch.zeros(E, dtype=torch.int32, device=dev)
    row_map = torch.empty((T, k), dtype=torch.int32, device=dev)
    _scatter_pairs[(T * k,)](X, X_perm, ids, offsets, cursor, row_map, H, K=k, BLOCK_H=256)
    return ids, w, offsets, row_map, X_perm
