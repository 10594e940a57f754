"""spmv_csr: the merge-path reference against reference.py (CPU: Triton interpreter) on hand-built and generated
matrices, the catalog's trap (empty rows plus one very long row) shown to catch naive variants, and the sparsity
patterns the input maker builds for the catalog workloads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from d2kgrade.suite import Suite
from runner.compare import compare_tensor
from runner.loading import load_module

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
TASK = SUITE.load_task("spmv_csr")
REF = load_module(SUITE.reference_py("spmv_csr"), prefix="d2k_test_ref")
SP = load_module(SUITE.reference_kernels("spmv_csr")["triton"], prefix="d2k_test_kernel")
INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRETING else "cuda"
TOL = TASK.tolerance_for("fp32")


def _csr(lengths: list[int], N: int, seed: int = 0):
    """A CSR matrix with the given row lengths, sorted random columns, values and x ~ U(-1, 1)."""
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    lens = torch.tensor(lengths, dtype=torch.int64, device=DEVICE)
    cols = REF._sorted_random_columns(lens, N, gen, DEVICE) if sum(lengths) else lens.new_zeros(0)
    row_ptr = torch.zeros(len(lengths) + 1, dtype=torch.int64, device=DEVICE)
    torch.cumsum(lens, 0, out=row_ptr[1:])
    values = torch.rand(sum(lengths), generator=gen, device=DEVICE) * 2 - 1
    x = torch.rand(N, generator=gen, device=DEVICE) * 2 - 1
    return row_ptr.to(torch.int32), cols.to(torch.int32), values, x


# 4 empty rows first, one 333-nnz row, short rows of 0-9, a run of empty rows, 3 trailing empty rows.
TRAP = [0, 0, 0, 0, 333] + [(7 * i) % 10 for i in range(25)] + [0] * 6 + [5, 1, 0, 0, 0]


def _ok(y, expected) -> bool:
    return compare_tensor("y", y, expected, TOL).ok


@pytest.mark.parametrize("block", [16, 64, None], ids=["window-12", "window-60", "default"])
def test_empty_rows_and_a_long_row_match_reference(block):
    """window-12: the 333-nnz row spans ~28 programs (carry-outs and the fix-up); default: one program."""
    row_ptr, col_idx, values, x = _csr(TRAP, 50)
    expected = REF.reference(row_ptr, col_idx, values, x)
    y = SP.spmv_csr(row_ptr, col_idx, values, x, _block=block)
    assert _ok(y, expected)
    empty = (row_ptr[1:] == row_ptr[:-1])
    assert torch.equal(y[empty], torch.zeros_like(y[empty]))


@triton.jit
def _naive_row_per_program_kernel(row_ptr, col_idx, values, x, y, BLOCK: tl.constexpr):
    """The trap's first victim: one program per row that reads at most BLOCK nonzeros of it."""
    row = tl.program_id(0)
    start = tl.load(row_ptr + row)
    end = tl.load(row_ptr + row + 1)
    e = start + tl.arange(0, BLOCK)
    m = e < end
    v = tl.load(values + e, mask=m, other=0.0)
    xv = tl.load(x + tl.load(col_idx + e, mask=m, other=0), mask=m, other=0.0)
    tl.store(y + row, tl.sum(v * xv, axis=0))


def _merge_path_without_fixup(row_ptr, col_idx, values, x, block):
    """The trap's second victim: merge path whose carry-outs are dropped (rows split across programs lose the
    parts before their last program)."""
    M, nnz = row_ptr.numel() - 1, col_idx.numel()
    items = block - 4
    n_parts = triton.cdiv(M + nnz, items)
    part_row = torch.empty(n_parts + 1, dtype=torch.int32, device=x.device)
    part_nnz = torch.empty_like(part_row)
    carry = torch.empty(n_parts, dtype=torch.float32, device=x.device)
    y = torch.empty(M, dtype=torch.float32, device=x.device)
    SP._spmv_partition_kernel[(triton.cdiv(n_parts + 1, 64),)](row_ptr, part_row, part_nnz, M, nnz, n_parts + 1,
                                                                 ITEMS=items, BLOCK_D=64, K=16, ITERS=4)
    SP._spmv_merge_kernel[(n_parts,)](row_ptr, col_idx, values, x, y, part_row, part_nnz, carry, M,
                                      BLOCK=block, VEC_ALIGNED=nnz % 4 == 0)
    return y


def test_the_trap_fails_naive_variants():
    row_ptr, col_idx, values, x = _csr(TRAP, 50, seed=1)
    expected = REF.reference(row_ptr, col_idx, values, x)
    assert _ok(SP.spmv_csr(row_ptr, col_idx, values, x, _block=64), expected)
    y = torch.empty(len(TRAP), dtype=torch.float32, device=DEVICE)
    _naive_row_per_program_kernel[(len(TRAP),)](row_ptr, col_idx, values, x, y, BLOCK=64)
    assert not _ok(y, expected)
    assert not _ok(_merge_path_without_fixup(row_ptr, col_idx, values, x, 64), expected)


def test_partition_search_matches_a_sequential_merge():
    """The K-ary search puts every diagonal where a sequential walk of the merge path does."""
    row_ptr, col_idx, values, x = _csr(TRAP, 50, seed=2)
    M, nnz, items = len(TRAP), int(row_ptr[-1]), 12
    ends = row_ptr[1:].tolist()
    walk, i, j = [(0, 0)], 0, 0
    while i + j < M + nnz:  # consume a row end when the row's nonzeros are all consumed, else a nonzero
        if i < M and (j >= nnz or ends[i] <= j):
            i += 1
        else:
            j += 1
        walk.append((i, j))
    n_diag = triton.cdiv(M + nnz, items) + 1
    part_row = torch.empty(n_diag, dtype=torch.int32, device=DEVICE)
    part_nnz = torch.empty_like(part_row)
    SP._spmv_partition_kernel[(triton.cdiv(n_diag, 64),)](row_ptr, part_row, part_nnz, M, nnz, n_diag,
                                                          ITEMS=items, BLOCK_D=64, K=16, ITERS=4)
    want = [walk[min(k * items, M + nnz)] for k in range(n_diag)]
    assert list(zip(part_row.tolist(), part_nnz.tolist())) == want


def test_a_cancelling_row_beside_large_rows_keeps_its_precision():
    """A row's sum is a difference of two window prefixes: after a row of sum ~3e5 (fp32 spacing 2^-5 there), a
    row that cancels to ~1.23 must still be within the 1e-2 atol (round 13 on the H200: an fp32 scan lost 0.011 on
    the scaled_rows draws). Both rows sit in one window; a mid-size row follows so the prefix does not end there."""
    row_ptr = torch.tensor([0, 2, 6, 9], dtype=torch.int32, device=DEVICE)
    col_idx = torch.tensor([0, 1, 0, 1, 2, 3, 0, 2, 3], dtype=torch.int32, device=DEVICE)
    values = torch.tensor([299_999.7, 17.3, 1000.123, -998.9, 0.011, 0.000567, 5.5, -2.25, 7.0],
                          dtype=torch.float32, device=DEVICE)
    x = torch.ones(4, dtype=torch.float32, device=DEVICE)
    expected = REF.reference(row_ptr, col_idx, values, x)
    for block in (16, None):
        y = SP.spmv_csr(row_ptr, col_idx, values, x, _block=block)
        assert _ok(y, expected), (block, y.tolist(), expected.tolist())
        assert abs(float(y[1]) - float(expected[1])) < 1e-3


def test_no_nonzeros_at_all():
    row_ptr, col_idx, values, x = _csr([0] * 9, 5)
    assert torch.equal(SP.spmv_csr(row_ptr, col_idx, values, x), torch.zeros(9, device=DEVICE))


@pytest.mark.parametrize("pattern,M,N,nnz", [
    ("27-point stencil on a 6x5x3 grid", 90, 90, 16 * 13 * 7),
    ("4 per row, random columns", 37, 29, 148),
])
def test_generated_patterns_match_reference(pattern, M, N, nnz):
    """Structure from the input maker (nnz % 4 != 0 for the stencil: the scalar-load path; == 0: vector path)."""
    gen = torch.Generator(device=DEVICE).manual_seed(3)
    inputs = REF.make_inputs({"dist": pattern}, {"y": (M,), "x": (N,), "col_idx": (nnz,)},
                             {"values": torch.float32, "x": torch.float32}, generator=gen, device=DEVICE,
                             dist="positive_values")
    assert _ok(SP.spmv_csr(*inputs, _block=128), REF.reference(*inputs))


def test_catalog_patterns_have_the_catalog_structure():
    """Every workload's dist string parses; the stencil and power-law formulas give the catalog's counts
    (power law: sum 130,248,002, largest 1,048,576, smallest 7 before the remainder)."""
    for w in TASK.workloads:
        pattern = str(w.params["dist"])
        assert any(rx.match(pattern) for rx in (REF._PER_ROW, REF._POWER_LAW, REF._STENCIL)), pattern
    nx, ny, nz = (int(g) for g in REF._STENCIL.match(str(TASK.workload("stencil_27pt").params["dist"])).groups())
    assert (3 * nx - 2) * (3 * ny - 2) * (3 * nz - 2) == TASK.workload("stencil_27pt").params["nnz"]
    lens, _ = REF._stencil(6, 5, 3, "cpu")
    assert int(lens.sum()) == 16 * 13 * 7 and int(lens.max()) == 27 and int(lens.min()) == 8
    power = TASK.workload("power_law_rows").params
    rank = torch.arange(1, power["M"] + 1, dtype=torch.float64)
    by_rank = torch.floor(2.0**20 * rank**-0.78).to(torch.int64)  # what _power_law_lengths computes
    assert int(by_rank.sum()) == 130_248_002 and int(by_rank[0]) == 1_048_576 and int(by_rank[-1]) == 7
    assert int((by_rank >= 4096).sum()) == 1223 and power["nnz"] - int(by_rank.sum()) == 3_969_726


def test_power_law_rows_get_rank_lengths_in_random_order_plus_the_remainder():
    M, top, alpha = 1000, 12, 0.78
    by_rank = torch.floor(2.0**top * torch.arange(1, M + 1, dtype=torch.float64) ** -alpha).to(torch.int64)
    nnz = int(by_rank.sum()) + 300
    lengths = REF._power_law_lengths(M, nnz, top, alpha, torch.Generator().manual_seed(0), "cpu")
    extra = lengths.sort(descending=True).values - by_rank
    assert int(lengths.sum()) == nnz and bool(((extra == 0) | (extra == 1)).all())
    assert not torch.equal(lengths, lengths.sort(descending=True).values), "rows are not in random order"
    with pytest.raises(ValueError):
        REF._power_law_lengths(M, int(by_rank.sum()) + M + 1, top, alpha, torch.Generator(), "cpu")
