# task: softmax
# expect: passed
# style: a launcher class holding the host-side choices; @triton.autotune over a module-level configs list keyed
# style: on the row width; @triton.heuristics derives the column tile; a constexpr mode (whole row in one tile vs.
# style: an online-normalizer loop over tiles) picked on the host; reshape glue to 2-D and back
# needs: interp_compat
"""Softmax over the last dim: each program normalizes ROWS rows. ONE_TILE rows are read once (max, exp, sum and
store from registers); longer rows take two sweeps, a running max with a rescaled sum, then exp(x - m) / s."""

import torch
import triton
import triton.language as tl

SOFTMAX_CONFIGS = [
    triton.Config({"ROWS": 1}, num_warps=4),
    triton.Config({"ROWS": 2}, num_warps=4),
    triton.Config({"ROWS": 4}, num_warps=8),
]

MAX_ONE_TILE = 4096


def _column_tile(args):
    n_cols = args["n_cols"]
    return triton.next_power_of_2(n_cols) if args["ONE_TILE"] else min(1024, triton.next_power_of_2(n_cols))


@triton.autotune(configs=SOFTMAX_CONFIGS, key=["n_cols", "ONE_TILE"])
@triton.heuristics({"BLOCK": _column_tile})
@triton.jit
def _softmax_fwd_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_xm, stride_ym,
                        ROWS: tl.constexpr, BLOCK: tl.constexpr, ONE_TILE: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    x_rows = x_ptr + rows.to(tl.int64)[:, None] * stride_xm
    y_rows = y_ptr + rows.to(tl.int64)[:, None] * stride_ym
    if ONE_TILE:
        cols = tl.arange(0, BLOCK)
        mask = row_ok[:, None] & (cols[None, :] < n_cols)
        x = tl.load(x_rows + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=1)[:, None])
        y = e / tl.sum(e, axis=1)[:, None]
        tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        m = tl.full([ROWS], -float("inf"), tl.float32)
        s = tl.zeros([ROWS], tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = row_ok[:, None] & (cols[None, :] < n_cols)
            x = tl.load(x_rows + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=1))
            s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[:, None]), axis=1)
            m = m_new
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = row_ok[:, None] & (cols[None, :] < n_cols)
            x = tl.load(x_rows + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
            y = tl.exp(x - m[:, None]) / s[:, None]
            tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


class SoftmaxLauncher:
    """Checks, allocates and launches; the tile mode is a host decision on the row width."""

    def __init__(self, max_one_tile: int = MAX_ONE_TILE) -> None:
        self.max_one_tile = max_one_tile

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dim() >= 1 and x.stride(-1) == 1, "the last dim must be contiguous"
        x2 = x.reshape(-1, x.shape[-1])
        n_rows, n_cols = x2.shape
        y = torch.empty_like(x2)
        grid = lambda meta: (triton.cdiv(n_rows, meta["ROWS"]),)
        _softmax_fwd_kernel[grid](x2, y, n_rows, n_cols, x2.stride(0), y.stride(0),
                                  ONE_TILE=n_cols <= self.max_one_tile)
        return y.reshape(x.shape)


_softmax = SoftmaxLauncher()


def kernel(x):
    return _softmax(x)
