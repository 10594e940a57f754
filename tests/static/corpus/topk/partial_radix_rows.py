"""Partial: MSB-first radix select, one program per row for every shape. Keys are uint32 with the sign flip; four
8-bit digit passes each re-read the whole row (no candidate buffer, no cache hints) and build tl.histogram counts;
a cumsum from the top picks the digit. A last pass appends the keys above the threshold at slots claimed with
tl.atomic_add and the first `need` keys equal to it (rank by cumsum of the equality mask); the k packed words are
sorted with tl.sort."""
import torch
import triton
import triton.language as tl


@triton.jit
def _ukey(x):
    b = x.to(tl.float32).to(tl.uint32, bitcast=True)
    return tl.where((b >> 31) != 0, ~b, b | 0x80000000)


@triton.jit
def _radix_rows_kernel(x_ptr, val_ptr, idx_ptr, sel_ptr, cnt_ptr, V, k, stride_x,
                       TILE: tl.constexpr, K_P2: tl.constexpr):
    row = tl.program_id(0)
    xr = x_ptr + row.to(tl.int64) * stride_x
    lanes = tl.arange(0, TILE)
    bins = tl.arange(0, 256)
    prefix = tl.zeros([], tl.uint32)
    need = k
    for p in tl.static_range(4):
        shift = 24 - 8 * p
        h = tl.zeros([256], tl.int32)
        for s in range(0, V, TILE):
            ok = s + lanes < V
            key = _ukey(tl.load(xr + s + lanes, mask=ok, other=0.0))
            if p > 0:
                ok = ok & ((key >> (shift + 8)) == prefix)
            h += tl.histogram(((key >> shift) & 255).to(tl.int32), 256, mask=ok)
        rev = tl.flip(h, 0)
        csum = tl.cumsum(rev, axis=0)                       # keys in the top j + 1 buckets
        pos = tl.sum((csum < need).to(tl.int32), axis=0)    # buckets entirely above the k-th key
        digit = 255 - pos
        need -= tl.sum(tl.where(bins > digit, h, 0), axis=0)
        prefix = (prefix << 8) | digit.to(tl.uint32)
    thr = prefix
    sel = sel_ptr + row.to(tl.int64) * K_P2
    seen = tl.zeros([], tl.int32)
    for s in range(0, V, TILE):
        offs = s + lanes
        ok = offs < V
        key = _ukey(tl.load(xr + offs, mask=ok, other=0.0))
        word = (key.to(tl.int64) << 32) | (V - 1 - offs).to(tl.int64)
        gt = ok & (key > thr)
        n_gt = tl.sum(gt.to(tl.int32), axis=0)
        base = tl.atomic_add(cnt_ptr + row, n_gt)
        tl.store(sel + base + tl.cumsum(gt.to(tl.int32), axis=0) - 1, word, mask=gt)
        eq = ok & (key == thr)
        rank = seen + tl.cumsum(eq.to(tl.int32), axis=0)
        take = eq & (rank <= need)
        base = tl.atomic_add(cnt_ptr + row, tl.sum(take.to(tl.int32), axis=0))
        tl.store(sel + base + tl.cumsum(take.to(tl.int32), axis=0) - 1, word, mask=take)
        seen += tl.sum(eq.to(tl.int32), axis=0)
    tl.debug_barrier()
    j = tl.arange(0, K_P2)
    w = tl.sort(tl.load(sel + j, mask=j < k, other=-1), descending=True)
    ix = V - 1 - (w & 0xFFFFFFFF)
    tl.store(idx_ptr + row.to(tl.int64) * k + j, ix, mask=j < k)
    tl.store(val_ptr + row.to(tl.int64) * k + j, tl.load(xr + ix, mask=j < k), mask=j < k)


def kernel(x, *, k):
    B, V = x.shape
    x = x.contiguous()
    vals = torch.empty((B, k), dtype=x.dtype, device=x.device)
    idx = torch.empty((B, k), dtype=torch.int64, device=x.device)
    k_p2 = triton.next_power_of_2(k)
    sel = torch.empty((B, k_p2), dtype=torch.int64, device=x.device)
    cnt = torch.zeros(B, dtype=torch.int32, device=x.device)
    _radix_rows_kernel[(B,)](x, vals, idx, sel, cnt, V, k, x.stride(0), TILE=4096, K_P2=k_p2, num_warps=8)
    return vals, idx
