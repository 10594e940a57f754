"""CSR SpMV with an even split of the nonzeros and a carry-out fix-up pass (no atomics).

1. ``_chunk_rows_kernel``: for every chunk k (nonzeros [k*CHUNK, (k+1)*CHUNK)) a binary search of row_ptr gives
   the row holding its first nonzero.
2. ``_chunk_kernel``: one program per chunk. values and col_idx are streamed as one contiguous window
   (evict_first; the window start is a multiple of CHUNK, so 16-byte vectors), x is gathered with evict_last.
   Each nonzero's row comes from a vectorized binary search between the chunk's first and last rows; a segmented
   inclusive scan (tl.associative_scan over (value, row-start flag)) sums the products row by row in fp32. Rows
   that end inside the chunk and started in it are stored directly; the chunk's first row, if it started earlier,
   and its last row, if it continues, are written as carry-outs (row, partial) to a [2 * n_chunks] buffer.
3. ``_fixup_kernel``: carries are ordered by chunk, so equal rows are adjacent; the program at the first carry of
   a row sums the run of carries with that row and stores y[row] once (rows whose whole extent is split get no
   direct store).
"""
import torch
import triton
import triton.language as tl

CHUNK = 2048


@triton.jit
def _search_row(row_ptr, target, lo, hi, STEPS: tl.constexpr):
    """Largest r in [lo, hi) with row_ptr[r] <= target (element-wise)."""
    for _ in tl.static_range(STEPS):
        mid = (lo + hi) // 2
        ok = tl.load(row_ptr + mid) <= target
        lo = tl.where(ok & (mid > lo), mid, lo)
        hi = tl.where(ok, hi, mid)
    return lo


@triton.jit
def _chunk_rows_kernel(row_ptr, first_row, M, n_chunks, CHUNK: tl.constexpr, BLOCK: tl.constexpr,
                       STEPS: tl.constexpr):
    k = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    km = k < n_chunks
    lo = tl.zeros([BLOCK], dtype=tl.int32)
    hi = lo + M
    r = _search_row(row_ptr, k * CHUNK, lo, hi, STEPS)
    tl.store(first_row + k, r, mask=km)


@triton.jit
def _seg_add(v1, f1, v2, f2):
    return tl.where(f2, v2, v1 + v2), f1 | f2


@triton.jit
def _chunk_kernel(row_ptr, col_idx, values, x, y, first_row, carry_row, carry_val, nnz, n_chunks,
                  CHUNK: tl.constexpr, STEPS: tl.constexpr):
    k = tl.program_id(0)
    start = k * CHUNK
    offs = tl.max_contiguous(tl.multiple_of(start + tl.arange(0, CHUNK), CHUNK), CHUNK)
    m = offs < nnz
    vals = tl.load(values + offs, mask=m, other=0.0, eviction_policy="evict_first")
    cols = tl.load(col_idx + offs, mask=m, other=0, eviction_policy="evict_first")
    prod = vals * tl.load(x + cols, mask=m, other=0.0, eviction_policy="evict_last")
    r0 = tl.load(first_row + k)
    r1 = tl.load(first_row + tl.minimum(k + 1, n_chunks - 1))
    r_last = tl.where(k + 1 < n_chunks, r1, r0 + CHUNK)
    lo = tl.zeros([CHUNK], dtype=tl.int32) + r0
    hi = lo * 0 + r_last + 1
    rows = _search_row(row_ptr, offs, lo, hi, STEPS)
    rs = tl.load(row_ptr + rows, mask=m, other=0)
    re = tl.load(row_ptr + rows + 1, mask=m, other=0)
    head = (offs == rs) | (offs == start)
    sums, _ = tl.associative_scan((prod, head), axis=0, combine_fn=_seg_add)
    tail = m & ((offs == re - 1) | (offs == start + CHUNK - 1) | (offs == nnz - 1))
    whole = tail & (rs >= start) & (offs == re - 1)
    tl.store(y + rows, sums, mask=whole)
    # carry-outs: the chunk's first row if it started before the chunk, its last row if it goes on past it
    first_part = tl.sum(tl.where(m & (rows == r0) & (offs < re) , prod, 0.0), axis=0)
    last_row = tl.max(tl.where(m, rows, 0), axis=0)
    last_part = tl.sum(tl.where(m & (rows == last_row), prod, 0.0), axis=0)
    r0_start = tl.load(row_ptr + r0)
    last_end = tl.load(row_ptr + last_row + 1)
    tl.store(carry_row + 2 * k, tl.where(r0_start < start, r0, -1))
    tl.store(carry_val + 2 * k, first_part)
    tl.store(carry_row + 2 * k + 1, tl.where((last_end > start + CHUNK) & (last_row != r0), last_row, -1))
    tl.store(carry_val + 2 * k + 1, last_part)


@triton.jit
def _fixup_kernel(carry_row, carry_val, row_ptr, y, n_carry, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    row = tl.load(carry_row + i)
    prev = tl.load(carry_row + i - 1, mask=i > 0, other=-1)
    if (row >= 0) & (row != prev):
        total = tl.load(carry_val + i)
        j = i + 1
        same = 1
        while same != 0:
            nxt = tl.load(carry_row + j, mask=j < n_carry, other=-2)
            same = (nxt == row) | (nxt == -1)
            if nxt == row:
                total += tl.load(carry_val + j)
            j += 1
        tl.store(y + row, total)


def kernel(row_ptr, col_idx, values, x):
    M = row_ptr.numel() - 1
    nnz = values.numel()
    y = torch.zeros(M, dtype=torch.float32, device=values.device)
    if nnz == 0:
        return y
    n_chunks = triton.cdiv(nnz, CHUNK)
    steps = max(1, int(M).bit_length() + 1)
    first_row = torch.empty(n_chunks, dtype=torch.int32, device=values.device)
    _chunk_rows_kernel[(triton.cdiv(n_chunks, 1024),)](row_ptr, first_row, M, n_chunks, CHUNK=CHUNK, BLOCK=1024,
                                                      STEPS=steps)
    carry_row = torch.empty(2 * n_chunks, dtype=torch.int32, device=values.device)
    carry_val = torch.empty(2 * n_chunks, dtype=torch.float32, device=values.device)
    _chunk_kernel[(n_chunks,)](row_ptr, col_idx, values, x, y, first_row, carry_row, carry_val, nnz, n_chunks,
                               CHUNK=CHUNK, STEPS=steps, num_warps=8)
    _fixup_kernel[(2 * n_chunks,)](carry_row, carry_val, row_ptr, y, 2 * n_chunks, BLOCK=1)
    return y
