"""Honest softmax: a [BLOCK_M, BLOCK_N] tile per program, several rows each, reductions along axis 1."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=1)[:, None]
    e = tl.exp(x)
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x):
    y = torch.empty_like(x)
    M, N = x.shape
    BLOCK_M = 16
    _softmax_rows_kernel[(triton.cdiv(M, BLOCK_M),)](x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=BLOCK_M,
                                                    BLOCK_N=triton.next_power_of_2(N))
    return y
