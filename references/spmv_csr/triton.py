"""Expert Triton reference for ``spmv_csr``: y = A x for CSR A, with merge-path (rows + nnz balanced) partitioning.

Guidance implemented (tasks/spmv_csr/task.yaml): L1.nnz-balanced-partition, L1.bandwidth-model,
L2.adaptive-row-mapping, L2.coalesced-lane-mapping, L2.split-long-rows, L3.cache-hints, L3.vector-loads,
L3.fp32-accum-shuffle.

Work is split along the merge path of the row ends row_ptr[1:] and the nonzero indices 0..nnz-1 (Merrill &
Garland): every program owns ITEMS consecutive path items, rows and nonzeros together, so a 1M-nnz row is spread
over ~500 programs and a run of empty rows costs what it has (one store each). No row binning, no host sync, no
data-dependent grid: three launches whose sizes follow from M and nnz.

1. ``_spmv_partition_kernel``: for each program boundary (diagonal d = k * ITEMS) a vectorized K-ary search of
   row_ptr finds the split (row r, nonzero e = d - r). K = 16 probes per step load in parallel, so the dependent
   chain is ~log16(M) = 6 L2 round trips instead of ~23 for a binary search.
2. ``_spmv_merge_kernel``, one program per partition [(r0, e0), (r1, e1)):
   - nonzeros e0..e1-1: one contiguous window; values and col_idx stream with ``evict_first`` (used once) as
     16-byte vectors (the window starts at e0 rounded down to 4 and its mask covers whole 4-element groups; the
     lanes outside [e0, e1) are zeroed after the load), x is gathered with ``evict_last`` so it stays in L2.
     Consecutive lanes read consecutive nonzeros, whatever the row lengths.
   - the fp32 products are accumulated by an inclusive scan (tl.cumsum) over the window; row r's sum is the
     difference of the scan at its last and before its first element (tl.gather from registers). The scan runs
     in fp64: a prefix carries the magnitude of every earlier row of the window, so in fp32 a row that cancels to a
     small sum next to rows of large values lost the difference's low bits (round 13 on the H200: the
     ``scaled_rows`` draws, rows scaled by up to 2^14 beside each other, put 1-2266 elements per workload 0.011
     off, over the 1e-2 atol; an honest fp32 sum of each row alone stays under 0.004).
   - rows r0..r1-1 end inside the window: each gets one plain store (an empty row stores 0). Row r0 may have
     started in earlier programs; their parts arrive as carries.
   - row r1 continues past the window: its partial sum is this program's carry-out.
3. ``_spmv_fixup_kernel`` adds every carry-out to its row with one atomic (a row split over P programs receives
   P-1 atomics). It runs after the stores, so no zero-initialization of y is needed.

Per nonzero the kernel moves 8 bytes of values + col_idx plus an x gather (an L2 hit while x fits in L2); per
row 4 bytes of row_ptr (read twice, the second from L1) and 4 bytes of y.

How the catalog's guidance maps: nnz-balanced partition = merge path with a carry-out fix-up; long rows are split
by construction (a row longer than ITEMS spans several programs, each adding one partial); short rows are packed
many per program (a 2044-item window holds ~400 rows of 4), so the length classes of CSR-adaptive need no
separate bins; accumulation in registers with a scan (fp64, see 2.), one store per row and one atomic per split piece.

Roofline floors on H200 (bytes = 8*nnz + 4*(M+1) + 4*M + 4*N at the measured copy bandwidth):

==================  ===================================  ======  ==================================================
workload            M / nnz / pattern                    floor   H200: time, fraction of floor, x best peer
==================  ===================================  ======  ==================================================
uniform_32_per_row  4.19M rows, 134M nnz, 32 per row     270 us  1.02 ms, 0.27, 0.97x compile
power_law_rows      4.19M rows, 134M nnz, power law      270 us  1.01 ms, 0.27, 0.96x compile
stencil_27pt        8.39M rows, 224M nnz, 27-pt stencil  454 us  1.11 ms, 0.42, 0.58x eager
low_degree_graph    16.8M rows, 67M nnz, 4 per row       177 us  1.09 ms, 0.17, 0.99x compile
==================  ===================================  ======  ==================================================

Floors use the rates measured on the H200 (copy 4.17 TB/s, bf16 754 TFLOP/s, fp8 1284 TFLOP/s;
benchmarks/data/references_h200.json, 2026-11-30).
Below the best baseline (torch.sparse_csr_tensor @ x): uniform_32_per_row (0.98x of torch.compile's 989 us),
power_law_rows (0.98x of eager's 969 us), stencil_27pt (0.79x of torch.compile's 646 us).

The table is the fp32 scan's (references_h200.json, 2026-11-30), which failed the scaled_rows draws. With the fp64
scan (benchmarks/data/runs/round14/full_round.json, 2026-12-03, every draw passed): uniform_32_per_row 1.02 ms,
power_law_rows 1.01 ms, low_degree_graph 1.09 ms (within 2% of the fp32 scan, or faster), but stencil_27pt 1.12 ms
(0.41 of its floor; 37% slower than 815 us, 0.58x of eager's 645 us): its gathers hit L1, so the scan's doubled
shuffles show. A segmented fp32 scan (reset at row starts) should keep the precision at the fp32 cost; not
measured yet.

low_degree_graph's 64 MB x does not fit in L2, so its random gathers cost a 32-byte sector each from HBM:
~2.1 GB more than the floor counts.
"""

from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl

_BLOCK_GPU = 2048       # window per program: 2044 path items, 8 warps, 8 elements per thread per tensor
_BLOCK_INTERP = 256     # the interpreter pays per operation, not per element
_SEARCH_K = 16          # probes per K-ary search step
_SEARCH_BLOCK = 64      # diagonals per partition program


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


# ------------------------------------------------------------------------------------------------ kernels


@triton.jit
def _spmv_partition_kernel(
    row_ptr, part_row, part_nnz,
    M, nnz, n_diag,
    ITEMS: tl.constexpr, BLOCK_D: tl.constexpr, K: tl.constexpr, ITERS: tl.constexpr,
):
    """Merge-path splits of BLOCK_D diagonals: for d = k * ITEMS, the row r such that rows < r end at or
    before nonzero d - r and row r does not (part_row[k] = r, part_nnz[k] = d - r).

    Reads ITERS * K row_ptr entries per diagonal (L2 hits after the first steps), writes 8 bytes per diagonal.
    """
    k = tl.program_id(0) * BLOCK_D + tl.arange(0, BLOCK_D)
    k_ok = k < n_diag
    d = tl.minimum(k.to(tl.int64) * ITEMS, M + nnz)
    # The split row lies in [lo, hi]; pred(x) = row_ptr[x + 1] <= d - x - 1 is true below it, false from it on.
    lo = tl.maximum(d - nnz, 0)
    hi = tl.minimum(d, M)
    t = tl.arange(1, K + 1)
    for _ in tl.static_range(ITERS):
        step = (hi - lo + K - 1) // K
        probe = lo[:, None] + t[None, :] * step[:, None] - 1          # [BLOCK_D, K], K probes in parallel
        valid = (probe < hi[:, None]) & (step > 0)[:, None] & k_ok[:, None]
        end = tl.load(row_ptr + probe + 1, mask=valid, other=0).to(tl.int64)
        n_true = tl.sum((valid & (end <= d[:, None] - probe - 1)).to(tl.int64), axis=1)
        hi = tl.where(n_true < K, tl.minimum(hi, lo + (n_true + 1) * step - 1), hi)
        lo = lo + n_true * step
    tl.store(part_row + k, lo.to(tl.int32), mask=k_ok)
    tl.store(part_nnz + k, (d - lo).to(tl.int32), mask=k_ok)


@triton.jit
def _spmv_merge_kernel(
    row_ptr, col_idx, values, x, y, part_row, part_nnz, carry,
    M,
    BLOCK: tl.constexpr, VEC_ALIGNED: tl.constexpr,
):
    """One merge-path partition: nonzeros [e0, e1) and the rows r0..r1-1 that end in it.

    Reads 8 bytes per nonzero (+ an x gather) and 4 bytes per row (row_ptr), writes 4 bytes per row (y) and
    4 bytes of carry.
    """
    pid = tl.program_id(0)
    r0 = tl.load(part_row + pid)
    e0 = tl.load(part_nnz + pid)
    r1 = tl.load(part_row + pid + 1)
    e1 = tl.load(part_nnz + pid + 1)
    offs = tl.arange(0, BLOCK)

    # Nonzero window, aligned to 4 elements so values/col_idx load as 16-byte vectors.
    base = tl.multiple_of((e0 // 4) * 4, 4)
    e = base + offs
    if VEC_ALIGNED:  # nnz % 4 == 0: whole 4-groups up to e1 rounded up stay in bounds
        ld_mask = e < tl.multiple_of(((e1 + 3) // 4) * 4, 4)
    else:
        ld_mask = e < e1
    vals = tl.load(values + e, mask=ld_mask, other=0.0, eviction_policy="evict_first")
    cols = tl.load(col_idx + e, mask=ld_mask, other=0, eviction_policy="evict_first")
    in_part = (e >= e0) & (e < e1)
    xv = tl.load(x + cols, mask=in_part, other=0.0, eviction_policy="evict_last")
    prod = tl.where(in_part, vals * xv, 0.0)
    # Inclusive prefix over the window, in fp64: a row's sum is a difference of two prefixes, which carry the
    # magnitude of every earlier row in the window, not the row's own (see the module docstring).
    csum = tl.cumsum(prod.to(tl.float64), axis=0)

    # Rows that end here: sum = csum[last] - csum[first - 1], counting only elements at or after e0.
    rows = r0 + offs
    r_ok = rows < r1
    start = tl.load(row_ptr + rows, mask=r_ok, other=0)
    end = tl.load(row_ptr + rows + 1, mask=r_ok, other=0)
    first = tl.maximum(start, e0) - base
    last = end - base - 1
    upto_last = tl.gather(csum, tl.minimum(tl.maximum(last, 0), BLOCK - 1), axis=0)
    before_first = tl.gather(csum, tl.minimum(tl.maximum(first - 1, 0), BLOCK - 1), axis=0)
    y_row = tl.where(last >= first, upto_last - tl.where(first > 0, before_first, 0.0), 0.0)
    tl.store(y + rows, y_row.to(tl.float32), mask=r_ok)

    # Carry-out: row r1's elements in this window (those at or after row_ptr[r1]; row_ptr[M] = nnz if r1 = M).
    r1_start = tl.load(row_ptr + r1)
    tl.store(carry + pid, tl.sum(tl.where(e >= r1_start, prod, 0.0), axis=0))


@triton.jit
def _spmv_fixup_kernel(
    y, part_row, carry,
    M, n_parts,
    BLOCK: tl.constexpr,
):
    """Adds each partition's carry-out to its row (one fp32 atomic each; rows split across programs only)."""
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = p < n_parts
    row = tl.load(part_row + p + 1, mask=ok, other=0)
    c = tl.load(carry + p, mask=ok, other=0.0)
    tl.atomic_add(y + row, c, mask=ok & (row < M) & (c != 0.0), sem="relaxed")


# ------------------------------------------------------------------------------------------------ launcher


def spmv_csr(row_ptr: torch.Tensor, col_idx: torch.Tensor, values: torch.Tensor, x: torch.Tensor, *,
             _block: int | None = None) -> torch.Tensor:
    """y = A x for A in CSR form (int32 indices, fp32 values), x fp32.

    ``_block`` overrides the window (a power of two >= 8; a program owns ``_block - 4`` path items); tests use
    small windows to split rows across many programs on small matrices.
    """
    if row_ptr.dtype != torch.int32 or col_idx.dtype != torch.int32:
        raise TypeError("row_ptr and col_idx must be int32")
    if values.dtype != torch.float32 or x.dtype != torch.float32:
        raise TypeError("values and x must be fp32")
    row_ptr, col_idx, values, x = (t.contiguous() for t in (row_ptr, col_idx, values, x))
    M = row_ptr.numel() - 1
    nnz = col_idx.numel()
    if values.numel() != nnz or M < 0:
        raise ValueError("col_idx and values must have nnz entries; row_ptr must have M + 1")
    if M + nnz >= 2**31:
        raise ValueError("M + nnz must stay below 2^31 (int32 merge-path coordinates)")
    y = torch.empty(M, dtype=torch.float32, device=x.device)
    if M == 0:
        return y
    block = _block or (_BLOCK_INTERP if _interpreting() else _BLOCK_GPU)
    if block < 8 or block & (block - 1):
        raise ValueError(f"block must be a power of two >= 8, got {block}")
    items = block - 4  # a window aligned down to 4 still covers the partition's nonzeros
    n_parts = triton.cdiv(M + nnz, items)
    part_row = torch.empty(n_parts + 1, dtype=torch.int32, device=x.device)
    part_nnz = torch.empty(n_parts + 1, dtype=torch.int32, device=x.device)
    carry = torch.empty(n_parts, dtype=torch.float32, device=x.device)
    iters = max(1, math.ceil(math.log(M + 1) / math.log(_SEARCH_K)) + 1)
    _spmv_partition_kernel[(triton.cdiv(n_parts + 1, _SEARCH_BLOCK),)](
        row_ptr, part_row, part_nnz, M, nnz, n_parts + 1,
        ITEMS=items, BLOCK_D=_SEARCH_BLOCK, K=_SEARCH_K, ITERS=iters, num_warps=4)
    _spmv_merge_kernel[(n_parts,)](
        row_ptr, col_idx, values, x, y, part_row, part_nnz, carry, M,
        BLOCK=block, VEC_ALIGNED=nnz % 4 == 0, num_warps=8 if block >= 2048 else 4)
    _spmv_fixup_kernel[(triton.cdiv(n_parts, 1024),)](y, part_row, carry, M, n_parts, BLOCK=1024, num_warps=4)
    return y


def kernel(row_ptr: torch.Tensor, col_idx: torch.Tensor, values: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Submission entry point: ``y``."""
    return spmv_csr(row_ptr, col_idx, values, x)
