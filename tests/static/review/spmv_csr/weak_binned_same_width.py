"""CSR SpMV with "length bins" (short / medium / long rows), each launched over its own row list.

The rows are sorted into three lists by length on the host, but every list is processed by the same
[ROWS, 32] tile kernel: each program takes ROWS rows of its list and walks each row's nonzeros 32 at a time.
Row starts are declared 4-aligned with tl.multiple_of so the loads "vectorize"; values are kept in cache with
evict_last and x is streamed with evict_first.
"""
import torch
import triton
import triton.language as tl

ROWS = 16
WIDTH = 32


@triton.jit
def _rows_kernel(row_ptr, col_idx, values, x, y, row_list, n_rows, max_len,
                 ROWS: tl.constexpr, WIDTH: tl.constexpr):
    slot = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    sm = slot < n_rows
    row = tl.load(row_list + slot, mask=sm, other=0)
    start = tl.load(row_ptr + row, mask=sm, other=0)
    end = tl.load(row_ptr + row + 1, mask=sm, other=0)
    start = tl.multiple_of(start, 4)
    lane = tl.arange(0, WIDTH)
    acc = tl.zeros([ROWS, WIDTH], dtype=tl.float32)
    for k in range(0, max_len, WIDTH):
        idx = start[:, None] + k + lane[None, :]
        m = sm[:, None] & (idx < end[:, None])
        v = tl.load(values + idx, mask=m, other=0.0, eviction_policy="evict_last")
        c = tl.load(col_idx + idx, mask=m, other=0, eviction_policy="evict_last")
        acc += v * tl.load(x + c, mask=m, other=0.0, eviction_policy="evict_first")
    tl.store(y + row, tl.sum(acc, axis=1), mask=sm)


def kernel(row_ptr, col_idx, values, x):
    M = row_ptr.numel() - 1
    y = torch.empty(M, dtype=torch.float32, device=values.device)
    lengths = row_ptr[1:] - row_ptr[:-1]
    bins = [lengths <= 8, (lengths > 8) & (lengths <= 1024), lengths > 1024]
    for sel in bins:
        rows = torch.nonzero(sel).flatten().to(torch.int32)
        n = rows.numel()
        if n == 0:
            continue
        max_len = int(lengths[rows.long()].max())
        _rows_kernel[(triton.cdiv(n, ROWS),)](row_ptr, col_idx, values, x, y, rows, n, max_len,
                                              ROWS=ROWS, WIDTH=WIDTH, num_warps=4)
    return y
