"""CSR-adaptive SpMV in Triton, bins built on the device.

- ``_bin_rows_kernel`` reads row_ptr once and appends every row to one of three lists (slots claimed with
  tl.atomic_add on per-bin counters): short (<= 8 nnz), medium (9-4096), long (> 4096).
- short rows: ``_short_rows_kernel``, [ROWS, 8] tiles (8 lanes per row, 32 rows per program).
- medium rows: ``_medium_row_kernel``, one program per row, BLOCK-wide contiguous windows (autotuned).
- long rows: ``_long_chunk_kernel``, every long row cut into CHUNK-nnz pieces over a 2-D grid (row, piece); the
  piece base is the row start rounded down to 4 plus piece * CHUNK, so windows are 16-byte aligned and the lanes
  before the row start are masked; one tl.atomic_add of the piece's sum into y.
values and col_idx are streamed with cache_modifier=".cs" (read once); x gathers use evict_last.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

MEDIUM_CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((256, 2), (512, 4), (1024, 4))]


@triton.jit
def _bin_rows_kernel(row_ptr, lists, counters, M, BLOCK: tl.constexpr):
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rm = r < M
    n = tl.load(row_ptr + r + 1, mask=rm, other=0) - tl.load(row_ptr + r, mask=rm, other=0)
    b = tl.where(n <= 8, 0, tl.where(n <= 4096, 1, 2))
    slot = tl.atomic_add(counters + b, 1, mask=rm)
    tl.store(lists + b * M + slot, r, mask=rm)


@triton.jit
def _short_rows_kernel(row_ptr, col_idx, values, x, y, rows_ptr, count_ptr, ROWS: tl.constexpr, LANES: tl.constexpr):
    n_rows = tl.load(count_ptr)
    s = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    sm = s < n_rows
    row = tl.load(rows_ptr + s, mask=sm, other=0)
    lo = tl.load(row_ptr + row, mask=sm, other=0)
    hi = tl.load(row_ptr + row + 1, mask=sm, other=0)
    idx = lo[:, None] + tl.arange(0, LANES)[None, :]
    m = sm[:, None] & (idx < hi[:, None])
    v = tl.load(values + idx, mask=m, other=0.0, cache_modifier=".cs")
    c = tl.load(col_idx + idx, mask=m, other=0, cache_modifier=".cs")
    xv = tl.load(x + c, mask=m, other=0.0, eviction_policy="evict_last")
    tl.store(y + row, tl.sum(v * xv, axis=1), mask=sm)


@triton.autotune(configs=MEDIUM_CONFIGS, key=["M"])
@triton.jit
def _medium_row_kernel(row_ptr, col_idx, values, x, y, rows_ptr, count_ptr, M, BLOCK: tl.constexpr):
    s = tl.program_id(0)
    if s < tl.load(count_ptr):
        row = tl.load(rows_ptr + s)
        lo = tl.load(row_ptr + row)
        hi = tl.load(row_ptr + row + 1)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for k in range(lo, hi, BLOCK):
            idx = k + tl.arange(0, BLOCK)
            m = idx < hi
            v = tl.load(values + idx, mask=m, other=0.0, cache_modifier=".cs")
            c = tl.load(col_idx + idx, mask=m, other=0, cache_modifier=".cs")
            acc += v * tl.load(x + c, mask=m, other=0.0, eviction_policy="evict_last")
        tl.store(y + row, tl.sum(acc, axis=0))


@triton.jit
def _long_chunk_kernel(row_ptr, col_idx, values, x, y, rows_ptr, count_ptr, CHUNK: tl.constexpr):
    s = tl.program_id(0)
    piece = tl.program_id(1)
    if s < tl.load(count_ptr):
        row = tl.load(rows_ptr + s)
        lo = tl.load(row_ptr + row)
        hi = tl.load(row_ptr + row + 1)
        base = (lo // 4) * 4 + piece * CHUNK
        if base < hi:
            idx = tl.max_contiguous(tl.multiple_of(base + tl.arange(0, CHUNK), 4), 4)
            m = (idx >= lo) & (idx < hi)
            v = tl.load(values + idx, mask=m, other=0.0, cache_modifier=".cs")
            c = tl.load(col_idx + idx, mask=m, other=0, cache_modifier=".cs")
            part = tl.sum(v * tl.load(x + c, mask=m, other=0.0, eviction_policy="evict_last"), axis=0)
            tl.atomic_add(y + row, part)


class CsrAdaptiveSpmv:
    SHORT_ROWS = 32
    CHUNK = 4096

    def __call__(self, row_ptr, col_idx, values, x):
        M = row_ptr.numel() - 1
        dev = values.device
        y = torch.zeros(M, dtype=torch.float32, device=dev)
        lists = torch.empty(3 * M, dtype=torch.int32, device=dev)
        counters = torch.zeros(3, dtype=torch.int32, device=dev)
        _bin_rows_kernel[(triton.cdiv(M, 1024),)](row_ptr, lists, counters, M, BLOCK=1024)
        longest = int((row_ptr[1:] - row_ptr[:-1]).max())
        _short_rows_kernel[(triton.cdiv(M, self.SHORT_ROWS),)](row_ptr, col_idx, values, x, y, lists, counters,
                                                               ROWS=self.SHORT_ROWS, LANES=8, num_warps=4)
        _medium_row_kernel[(M,)](row_ptr, col_idx, values, x, y, lists[M:], counters[1:], M)
        if longest > 4096:
            pieces = triton.cdiv(longest + 3, self.CHUNK)
            _long_chunk_kernel[(M, pieces)](row_ptr, col_idx, values, x, y, lists[2 * M:], counters[2:],
                                            CHUNK=self.CHUNK, num_warps=8)
        return y


kernel = CsrAdaptiveSpmv()
