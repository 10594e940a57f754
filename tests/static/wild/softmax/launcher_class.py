"""Softmax as a library ships it: a launcher class that caches per-shape settings and picks a path by row length
(the whole row in registers, num_warps from an if-chain of literals in a helper; or an online two-sweep over
tiles with evict_last on the first sweep), and a module-level ``kernel`` bound to an instance of the class."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
MAX_FUSED_BLOCK = 16384


def _num_warps(block: int) -> int:
    if block >= 16384:
        return 16
    if block >= 4096:
        return 8
    return 4


@triton.jit
def _softmax_fused_row(x_ptr, y_ptr, stride_x, stride_y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    z = (x - tl.max(x, axis=0)) * LOG2E
    num = tl.exp2(z)
    inv = 1.0 / tl.sum(num, axis=0)
    tl.store(y_ptr + row * stride_y + cols, (num * inv).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_two_sweep(x_ptr, y_ptr, stride_x, stride_y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    m = -float("inf")
    d = 0.0
    for start in tl.range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"),
                    eviction_policy="evict_last").to(tl.float32) * LOG2E
        m_new = tl.maximum(m, tl.max(x, axis=0))
        d = d * tl.exp2(m - m_new) + tl.sum(tl.exp2(x - m_new), axis=0)
        m = m_new
    inv = 1.0 / d
    for start in tl.range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"),
                    eviction_policy="evict_first").to(tl.float32) * LOG2E
        tl.store(y_row + cols, (tl.exp2(x - m) * inv).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


class TritonSoftmax:
    """Row softmax over the last dimension; settings cached per row length."""

    def __init__(self, tile: int = 4096) -> None:
        self.tile = tile
        self._settings: dict[int, tuple[int, int]] = {}

    def _config(self, n_cols: int) -> tuple[int, int]:
        if n_cols not in self._settings:
            block = triton.next_power_of_2(n_cols)
            self._settings[n_cols] = (block, _num_warps(block))
        return self._settings[n_cols]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        n_rows, n_cols = x2.shape
        y = torch.empty_like(x2)
        block, warps = self._config(n_cols)
        if block <= MAX_FUSED_BLOCK:
            _softmax_fused_row[(n_rows,)](x2, y, x2.stride(0), y.stride(0), n_cols, BLOCK=block, num_warps=warps)
        else:
            _softmax_two_sweep[(n_rows,)](x2, y, x2.stride(0), y.stride(0), n_cols, BLOCK=self.tile, num_warps=8)
        return y.view_as(x)


kernel = TritonSoftmax()
