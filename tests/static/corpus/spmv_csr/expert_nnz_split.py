"""Expert SpMV: nnz-balanced windows. A search kernel finds, for each window of CHUNK nonzeros, the row that
holds its first nonzero (binary search over row_ptr). The main kernel loads the window's values and col_idx
with aligned unit-stride offsets (evict_first), gathers x once per nonzero (evict_last), finds each nonzero's
row with a vectorised binary search inside [row_lo, row_hi], and runs a segmented sum (tl.associative_scan) over
the fp32 products. A row that lies inside the window is stored once; the end pieces of rows that cross a window
boundary are added with one atomic each, so a 1M-nnz row is spread over hundreds of programs and a warp covers
many 4-nnz rows."""
import torch
import triton
import triton.language as tl

CHUNK = 2048


@triton.jit
def _window_rows(row_ptr, win_row, M, n_win, CHUNK: tl.constexpr, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    w = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    target = w * CHUNK
    lo = tl.zeros([BLOCK], dtype=tl.int32)
    hi = tl.zeros([BLOCK], dtype=tl.int32) + M
    for _ in tl.static_range(STEPS):
        mid = (lo + hi + 1) // 2
        go = tl.load(row_ptr + mid) <= target
        lo = tl.where(go, mid, lo)
        hi = tl.where(go, hi, mid - 1)
    tl.store(win_row + w, lo, mask=w <= n_win)


@triton.jit
def _seg_sum(a, fa, b, fb):
    return tl.where(fb, b, a + b), fa | fb


@triton.jit
def _spmv_window(row_ptr, col_idx, values, x, y, win_row, nnz, CHUNK: tl.constexpr, STEPS: tl.constexpr):
    pid = tl.program_id(0)
    nz0 = tl.multiple_of(pid * CHUNK, CHUNK)
    offs = tl.max_contiguous(nz0 + tl.arange(0, CHUNK), CHUNK)
    live = offs < nnz
    vals = tl.load(values + offs, mask=live, other=0.0, eviction_policy="evict_first")
    cols = tl.load(col_idx + offs, mask=live, other=0, eviction_policy="evict_first")
    prod = vals * tl.load(x + cols, mask=live, other=0.0, eviction_policy="evict_last")
    r_lo = tl.load(win_row + pid)
    r_hi = tl.load(win_row + pid + 1)
    lo = tl.zeros([CHUNK], dtype=tl.int32) + r_lo
    hi = tl.zeros([CHUNK], dtype=tl.int32) + r_hi
    for _ in tl.static_range(STEPS):
        mid = (lo + hi + 1) // 2
        go = tl.load(row_ptr + mid) <= offs
        lo = tl.where(go, mid, lo)
        hi = tl.where(go, hi, mid - 1)
    row = lo
    rs = tl.load(row_ptr + row)
    re = tl.load(row_ptr + row + 1)
    first = (offs == rs) | (offs == nz0)
    seg, _ = tl.associative_scan((prod, first), 0, _seg_sum)
    last = (offs + 1 == re) | (offs == nz0 + CHUNK - 1) | (offs == nnz - 1)
    inside = (rs >= nz0) & (re <= nz0 + CHUNK)
    tl.store(y + row, seg, mask=live & last & inside)
    tl.atomic_add(y + row, seg, mask=live & last & ~inside)


def kernel(row_ptr, col_idx, values, x):
    M = row_ptr.numel() - 1
    nnz = values.numel()
    y = torch.zeros(M, dtype=torch.float32, device=x.device)
    if nnz == 0:
        return y
    n_win = triton.cdiv(nnz, CHUNK)
    win_row = torch.empty(n_win + 1, dtype=torch.int32, device=x.device)
    steps = max(1, (M + 1).bit_length())
    _window_rows[(triton.cdiv(n_win + 1, 256),)](row_ptr, win_row, M, n_win, CHUNK=CHUNK, BLOCK=256, STEPS=steps)
    _spmv_window[(n_win,)](row_ptr, col_idx, values, x, y, win_row, nnz, CHUNK=CHUNK, STEPS=steps, num_warps=8)
    return y
