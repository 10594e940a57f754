# task: prefix_scan
# expect: passed
# style: a multi-kernel pipeline planned by a host helper class: (1) each program scans one BLOCK of a row
# style: with tl.cumsum and writes the block's total, (2) one program per row scans the block totals into
# style: exclusive carries, (3) each block adds its carry; scratch buffers from torch.empty; one code path for
# style: int32 and fp32 (the accumulator dtype a constexpr chosen on the host)
"""Inclusive prefix sum along the last dim of x [B, N], in three launches over BLOCK-wide chunks."""

import torch
import triton
import triton.language as tl


@triton.jit
def _block_scan(x_ptr, y_ptr, totals_ptr, n_cols, n_blocks, stride_x, stride_y,
                BLOCK: tl.constexpr, ACC: tl.constexpr):
    row = tl.program_id(0)
    blk = tl.program_id(1)
    cols = blk * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0).to(ACC)
    s = tl.cumsum(x, axis=0)
    tl.store(y_ptr + row * stride_y + cols, s.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(totals_ptr + row * n_blocks + blk, tl.sum(x, axis=0))


@triton.jit
def _scan_totals(totals_ptr, carries_ptr, n_blocks, BLOCKS: tl.constexpr):
    row = tl.program_id(0)
    b = tl.arange(0, BLOCKS)
    t = tl.load(totals_ptr + row * n_blocks + b, mask=b < n_blocks, other=0)
    tl.store(carries_ptr + row * n_blocks + b, tl.cumsum(t, axis=0) - t, mask=b < n_blocks)


@triton.jit
def _add_carries(y_ptr, carries_ptr, n_cols, n_blocks, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    blk = tl.program_id(1) + 1  # block 0 has no carry
    cols = blk * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    carry = tl.load(carries_ptr + row * n_blocks + blk)
    y = tl.load(y_ptr + row * stride_y + cols, mask=mask)
    tl.store(y_ptr + row * stride_y + cols, (y.to(carry.dtype) + carry).to(y_ptr.dtype.element_ty), mask=mask)


class ScanPlan:
    """Block width and scratch dtype for one input; runs the three launches."""

    def __init__(self, x: torch.Tensor, block: int = 1024) -> None:
        self.rows, self.cols = x.shape
        self.block = min(block, triton.next_power_of_2(self.cols))
        self.n_blocks = triton.cdiv(self.cols, self.block)
        self.acc_torch = torch.float32 if x.dtype.is_floating_point else torch.int32
        self.acc = tl.float32 if x.dtype.is_floating_point else tl.int32

    def run(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        totals = torch.empty((self.rows, self.n_blocks), dtype=self.acc_torch, device=x.device)
        carries = torch.empty_like(totals)
        _block_scan[(self.rows, self.n_blocks)](x, y, totals, self.cols, self.n_blocks, x.stride(0), y.stride(0),
                                                BLOCK=self.block, ACC=self.acc)
        if self.n_blocks > 1:
            _scan_totals[(self.rows,)](totals, carries, self.n_blocks, BLOCKS=triton.next_power_of_2(self.n_blocks))
            _add_carries[(self.rows, self.n_blocks - 1)](y, carries, self.cols, self.n_blocks, y.stride(0),
                                                         BLOCK=self.block)
        return y


def kernel(x):
    return ScanPlan(x).run(x.contiguous())
