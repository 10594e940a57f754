"""MoE permute with 'block-local ranks' and an 'on-chip histogram' in the names.

Routing takes a full softmax over the E logits and k rounds of arg-max; counts and ranks come from atomics on
per-expert global counters; the permuted rows are built by PyTorch indexing.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _route_onchip_hist(logits_ptr, ids_ptr, w_ptr, hist_ptr, E, K: tl.constexpr, EP: tl.constexpr):
    t = tl.program_id(0)
    cols = tl.arange(0, EP)
    x = tl.load(logits_ptr + t * E + cols, mask=cols < E, other=float("-inf"))
    p = tl.exp(x - tl.max(x, axis=0))
    p = p / tl.sum(p, axis=0)
    picked_sum = 0.0
    for j in tl.static_range(K):
        e = tl.argmax(p, axis=0, tie_break_left=True)
        pe = tl.max(p, axis=0)
        tl.store(ids_ptr + t * K + j, e.to(tl.int32))
        tl.store(w_ptr + t * K + j, pe)
        picked_sum += pe
        tl.atomic_add(hist_ptr + e, 1)
        p = tl.where(cols == e, -1.0, p)
    for j in tl.static_range(K):
        tl.store(w_ptr + t * K + j, tl.load(w_ptr + t * K + j) / picked_sum)


@triton.jit
def _block_local_rank(ids_ptr, offsets_ptr, cursor_ptr, row_map_ptr, K: tl.constexpr):
    t = tl.program_id(0)
    for j in tl.static_range(K):
        e = tl.load(ids_ptr + t * K + j)
        local_rank = tl.atomic_add(cursor_ptr + e, 1)
        tl.store(row_map_ptr + t * K + j, tl.load(offsets_ptr + e) + local_rank)


def kernel(logits, X, *, k):
    T, E = logits.shape
    dev = logits.device
    ids = torch.empty((T, k), dtype=torch.int32, device=dev)
    weights = torch.empty((T, k), dtype=torch.float32, device=dev)
    hist = torch.zeros(E, dtype=torch.int32, device=dev)
    _route_onchip_hist[(T,)](logits, ids, weights, hist, E, K=k, EP=triton.next_power_of_2(E))
    offsets = torch.zeros(E + 1, dtype=torch.int32, device=dev)
    offsets[1:] = torch.cumsum(hist, 0)
    assert int(offsets[-1].item()) == T * k
    cursor = torch.zeros(E, dtype=torch.int32, device=dev)
    row_map = torch.empty((T, k), dtype=torch.int32, device=dev)
    _block_local_rank[(T,)](ids, offsets, cursor, row_map, K=k)
    X_perm = torch.empty((T * k, X.shape[1]), dtype=X.dtype, device=dev)
    X_perm[row_map.flatten().long()] = X.repeat_interleave(k, dim=0)
    return ids, weights, offsets, row_map, X_perm
