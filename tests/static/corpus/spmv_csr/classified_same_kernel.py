"""Partial SpMV: rows are classified by length on the host (short / medium / long), but every class is run by
the same one-program-per-row kernel with the same 512-wide chunks. Inside a row, loads start at the row start
rounded down to 4 elements (tl.multiple_of hint, mask over whole 4-element groups, lanes outside the row zeroed
after the load), values/col_idx evict_first and x evict_last; tl.sum and one store per row."""
import torch
import triton
import triton.language as tl


@triton.jit
def spmv_row_list(rows_ptr, n_rows, row_ptr, col_idx, values, x, y, nnz, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    row = tl.load(rows_ptr + i)
    start = tl.load(row_ptr + row)
    end = tl.load(row_ptr + row + 1)
    base = (start // 4) * 4
    stop = tl.minimum(((end + 3) // 4) * 4, nnz)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for k in range(base, stop, BLOCK):
        offs = tl.multiple_of(k, 4) + tl.arange(0, BLOCK)
        group_ok = offs < stop
        v = tl.load(values + offs, mask=group_ok, other=0.0, eviction_policy="evict_first")
        c = tl.load(col_idx + offs, mask=group_ok, other=0, eviction_policy="evict_first")
        inside = (offs >= start) & (offs < end)
        v = tl.where(inside, v, 0.0)
        c = tl.where(inside, c, 0)
        acc += v * tl.load(x + c, mask=inside, other=0.0, eviction_policy="evict_last")
    tl.store(y + row, tl.sum(acc, axis=0))


def kernel(row_ptr, col_idx, values, x):
    M = row_ptr.numel() - 1
    y = torch.empty(M, dtype=torch.float32, device=x.device)
    lengths = row_ptr[1:] - row_ptr[:-1]
    classes = [torch.nonzero(lengths <= 8).flatten(),
               torch.nonzero((lengths > 8) & (lengths <= 1024)).flatten(),
               torch.nonzero(lengths > 1024).flatten()]
    for rows in classes:
        if rows.numel():
            spmv_row_list[(rows.numel(),)](rows, rows.numel(), row_ptr, col_idx, values, x, y, values.numel(),
                                           BLOCK=512)
    return y
