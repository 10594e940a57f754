"""Naive SpMV: each lane of a program owns one row and walks that row's nonzeros serially, so a warp's loads hit
32 different rows' positions; the longest row in the block sets the trip count."""
import torch
import triton
import triton.language as tl


@triton.jit
def spmv_lane_per_row(row_ptr, col_idx, values, x, y, M, BLOCK_ROWS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    rm = rows < M
    start = tl.load(row_ptr + rows, mask=rm, other=0)
    end = tl.load(row_ptr + rows + 1, mask=rm, other=0)
    length = end - start
    acc = tl.zeros([BLOCK_ROWS], dtype=tl.float32)
    for j in range(0, tl.max(length, axis=0)):
        live = j < length
        c = tl.load(col_idx + start + j, mask=live, other=0)
        v = tl.load(values + start + j, mask=live, other=0.0)
        acc += v * tl.load(x + c, mask=live, other=0.0)
    tl.store(y + rows, acc, mask=rm)


def kernel(row_ptr, col_idx, values, x):
    M = row_ptr.numel() - 1
    y = torch.empty(M, dtype=torch.float32, device=x.device)
    spmv_lane_per_row[(triton.cdiv(M, 128),)](row_ptr, col_idx, values, x, y, M, BLOCK_ROWS=128)
    return y
