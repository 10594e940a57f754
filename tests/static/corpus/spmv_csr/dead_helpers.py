"""[ROWS, 32] tiles for every row length: a program takes 16 rows and walks them together in 32-nonzero steps
(masked from row_ptr), sums with tl.sum and stores each row once; the longest row of the block sets the trip
count. A merge-path search kernel, a long-row atomic kernel with cache hints, and a warp-per-row CUDA string are
defined but never launched or compiled."""
import torch
import triton
import triton.language as tl

CUDA_SRC = r"""
__global__ void spmv_warp(const int* rp, const int* col, const float* val, const float* x, float* y, int M) {
    int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    float s = 0.f;
    for (int i = rp[row] + lane; i < rp[row + 1]; i += 32) s += __ldcs(val + i) * __ldg(x + col[i]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
    if (lane == 0) y[row] = s;
}
"""


@triton.jit
def _merge_path_search(row_ptr, starts, M, CHUNK: tl.constexpr):
    p = tl.program_id(0)
    lo = 0
    hi = M
    while lo < hi:
        mid = (lo + hi) // 2
        if tl.load(row_ptr + mid + 1) <= p * CHUNK:
            lo = mid + 1
        else:
            hi = mid
    tl.store(starts + p, lo)


@triton.jit
def _long_row_chunks(row_ptr, col_idx, values, x, y, row, CHUNK: tl.constexpr):
    start = tl.load(row_ptr + row) + tl.program_id(0) * CHUNK
    offs = start + tl.arange(0, CHUNK)
    m = offs < tl.load(row_ptr + row + 1)
    v = tl.load(values + offs, mask=m, other=0.0, eviction_policy="evict_first")
    c = tl.load(col_idx + offs, mask=m, other=0, eviction_policy="evict_first")
    tl.atomic_add(y + row, tl.sum(v * tl.load(x + c, mask=m, other=0.0, eviction_policy="evict_last"), axis=0))


@triton.jit
def spmv_rows_tile(row_ptr, col_idx, values, x, y, M, ROWS: tl.constexpr, W: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rm = rows < M
    start = tl.load(row_ptr + rows, mask=rm, other=0)
    end = tl.load(row_ptr + rows + 1, mask=rm, other=0)
    acc = tl.zeros([ROWS, W], dtype=tl.float32)
    for k in range(0, tl.max(end - start, axis=0), W):
        offs = start[:, None] + k + tl.arange(0, W)[None, :]
        m = offs < end[:, None]
        v = tl.load(values + offs, mask=m, other=0.0)
        c = tl.load(col_idx + offs, mask=m, other=0)
        acc += v * tl.load(x + c, mask=m, other=0.0)
    tl.store(y + rows, tl.sum(acc, axis=1), mask=rm)


def kernel(row_ptr, col_idx, values, x):
    M = row_ptr.numel() - 1
    y = torch.empty(M, dtype=torch.float32, device=x.device)
    spmv_rows_tile[(triton.cdiv(M, 16),)](row_ptr, col_idx, values, x, y, M, ROWS=16, W=32)
    return y
