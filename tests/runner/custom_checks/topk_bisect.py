"""topk test submission: a bisection for each row's k-th largest key, then the k survivors ranked among themselves.

CPU tests only (it stores and reloads its survivors within one program, which a GPU would need a barrier for).
HIGH_INDEX_FIRST takes tied values in decreasing index order, both at the k-th value and within runs of equal
values: a valid answer that differs from the reference's canonical one. The tests make their variants by
replacing the MODE and FROM_CALL lines: after the kernel, ``_spoil`` breaks the [B, k] indices one way.
"""
import torch
import triton
import triton.language as tl

HIGH_INDEX_FIRST = True
MODE = "valid"  # valid | duplicate | out_of_range | wrong_value
FROM_CALL = 1  # spoil the indices from this call on
_CALLS = [0]


@triton.jit
def _topk_row_kernel(x_ptr, val_ptr, idx_ptr, V, K, stride_x, stride_o,
                     BLOCK: tl.constexpr, KP: tl.constexpr, HIGH_FIRST: tl.constexpr):
    row = tl.program_id(0)
    xr = x_ptr + row * stride_x
    offs = tl.arange(0, BLOCK)
    valid = offs < V
    x = tl.load(xr + offs, mask=valid, other=0.0).to(tl.float32)
    bits = x.to(tl.int32, bitcast=True)
    key = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits).to(tl.int64)
    key = tl.where(valid, key, -(1 << 40))
    lo = tl.full([], -(1 << 31), tl.int64)
    hi = tl.full([], 1 << 31, tl.int64)
    for _ in range(33):  # count(key >= lo) >= K > count(key >= hi)
        mid = (lo + hi) // 2
        enough = tl.sum((key >= mid).to(tl.int32), axis=0) >= K
        lo = tl.where(enough, mid, lo)
        hi = tl.where(enough, hi, mid)
    above = key > lo
    eq = key == lo
    need = K - tl.sum(above.to(tl.int32), axis=0)
    before = tl.cumsum(eq.to(tl.int32), axis=0) - eq.to(tl.int32)  # equal keys at lower indices
    if HIGH_FIRST:
        before = tl.sum(eq.to(tl.int32), axis=0) - before - 1
    take = above | (eq & (before < need))
    slot = tl.cumsum(take.to(tl.int32), axis=0) - 1
    tl.store(idx_ptr + row * stride_o + slot, offs.to(tl.int64), mask=take)
    o = tl.arange(0, KP)
    keep = o < K
    idx = tl.load(idx_ptr + row * stride_o + o, mask=keep, other=0)
    kx = tl.load(xr + idx, mask=keep, other=0.0).to(tl.float32)
    kb = kx.to(tl.int32, bitcast=True)
    kk = tl.where(kb < 0, kb ^ 0x7FFFFFFF, kb).to(tl.int64)
    kk = tl.where(keep, kk, -(1 << 40))
    if HIGH_FIRST:
        first = (kk[None, :] > kk[:, None]) | ((kk[None, :] == kk[:, None]) & (idx[None, :] > idx[:, None]))
    else:
        first = (kk[None, :] > kk[:, None]) | ((kk[None, :] == kk[:, None]) & (idx[None, :] < idx[:, None]))
    rank = tl.sum((first & keep[None, :]).to(tl.int32), axis=1)
    tl.store(idx_ptr + row * stride_o + rank, idx, mask=keep)
    tl.store(val_ptr + row * stride_o + rank, tl.load(xr + idx, mask=keep), mask=keep)


def _spoil(values, indices, V):
    """Break valid indices one way (small [B, k] tensors only)."""
    if MODE == "duplicate":  # the index before a tie again: the value still matches, the index repeats
        ties = values[:, 1:] == values[:, :-1]
        indices[:, 1:] = torch.where(ties, indices[:, :-1], indices[:, 1:])
    elif MODE == "out_of_range":
        indices[:, -1] = V
    elif MODE == "wrong_value":  # distinct and in range, but the first and last point at each other's value
        indices[:, [0, -1]] = indices[:, [-1, 0]].clone()
    return indices


def kernel(x, *, k):
    B, V = x.shape
    values = torch.empty((B, k), dtype=x.dtype, device=x.device)
    indices = torch.empty((B, k), dtype=torch.int64, device=x.device)
    _topk_row_kernel[(B,)](x, values, indices, V, k, x.stride(0), k, BLOCK=triton.next_power_of_2(V),
                           KP=triton.next_power_of_2(k), HIGH_FIRST=HIGH_INDEX_FIRST)
    _CALLS[0] += 1
    if _CALLS[0] >= FROM_CALL:
        indices = _spoil(values, indices, V)
    return values, indices
