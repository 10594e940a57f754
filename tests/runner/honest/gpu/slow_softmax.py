"""Honest but slow softmax: the row-per-program kernel launched 256 times per call, each writing the same right
output: 256 times one launch (the reference softmax took 73 us on the H200's rows_4k in round 8). A kernel this long is what the evaluator's clock can hold a host to:
one that reports a tenth of it is caught (tests/runner/test_gpu.py). A submission is one file: the kernel
body is rows_per_program.py's, repeated here."""

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


REPEAT = 256


def kernel(x):
    y = torch.empty_like(x)
    M, N = x.shape
    for _ in range(REPEAT):
        _softmax_rows_kernel[(triton.cdiv(M, 16),)](x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=16,
                                                   BLOCK_N=triton.next_power_of_2(N))
    return y
