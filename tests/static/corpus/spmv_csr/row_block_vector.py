"""Partial SpMV: one program per row, walking the row's nonzeros in 256-wide contiguous chunks (values and
col_idx evict_first, x gathered evict_last), summing the fp32 products with tl.sum and storing y once. A 1M-nnz
row is one program's serial loop."""
import torch
import triton
import triton.language as tl


@triton.jit
def spmv_row_kernel(row_ptr, col_idx, values, x, y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    start = tl.load(row_ptr + row)
    end = tl.load(row_ptr + row + 1)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for k in range(start, end, BLOCK):
        offs = k + tl.arange(0, BLOCK)
        m = offs < end
        cols = tl.load(col_idx + offs, mask=m, other=0, eviction_policy="evict_first")
        vals = tl.load(values + offs, mask=m, other=0.0, eviction_policy="evict_first")
        acc += vals * tl.load(x + cols, mask=m, other=0.0, eviction_policy="evict_last")
    tl.store(y + row, tl.sum(acc, axis=0))


def kernel(row_ptr, col_idx, values, x):
    M = row_ptr.numel() - 1
    y = torch.empty(M, dtype=torch.float32, device=x.device)
    spmv_row_kernel[(M,)](row_ptr, col_idx, values, x, y, BLOCK=256)
    return y
