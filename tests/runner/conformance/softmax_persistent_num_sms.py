# task: softmax
# expect: passed
# style: the Triton tutorial's persistent softmax: the device and its SM count read from
# style: triton.runtime.driver.active at import time, a grid of at most a few programs per SM, each striding over
# style: rows with tl.range(..., num_stages=...); the row tile a power of two from the host; torch.empty_like glue
# needs: interp_compat
"""Persistent softmax: program p handles rows p, p + P, p + 2P, ... of x [M, N] (P programs, a few per SM); each
row fits one BLOCK tile, read once: max, exp, sum, normalize, store."""

import torch
import triton
import triton.language as tl
from triton.runtime import driver

DEVICE = triton.runtime.driver.active.get_active_torch_device()
PROPERTIES = driver.active.utils.get_device_properties(DEVICE.index)
NUM_SM = PROPERTIES["multiprocessor_count"]
PROGRAMS_PER_SM = 4


@triton.jit
def _softmax_persistent(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                        BLOCK_SIZE: tl.constexpr, NUM_STAGES: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row in tl.range(row_start, n_rows, row_step, num_stages=NUM_STAGES):
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
        num = tl.exp(x - tl.max(x, axis=0))
        y = num / tl.sum(num, axis=0)
        tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    y = torch.empty_like(x)
    programs = min(NUM_SM * PROGRAMS_PER_SM, n_rows)
    _softmax_persistent[(programs,)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=block,
                                     NUM_STAGES=2, num_warps=8 if block >= 2048 else 4)
    return y


def kernel(x):
    return softmax(x)
