"""spmv_csr: exact semantics (float64), the PyTorch baseline, and the seeded CSR maker.

y = A x for A [M, N] in CSR form (row_ptr int32 [M+1], col_idx int32 [nnz], values fp32 [nnz]), x fp32 [N].
The sparsity pattern comes from the workload's ``dist`` parameter (parsed by ``make_pattern``); the input
distribution (``DISTRIBUTIONS``) only draws values and x.
"""

from __future__ import annotations

import re

import torch

# "uniform" is the catalog's values, x ~ U(-1, 1). "positive_values" draws values ~ U(0, 1) (x still U(-1, 1)):
# a different draw of the same structure, so a kernel that is right on one seed only by luck is seen twice.
# Zeros, ones and echoing x fail on both: |y| is ~ sqrt(row length)/3.
# "scaled_rows" multiplies each row's values by s = 2^U(6, 14), capped at max(1, 2^17 / row length): |y| is then
# far above the 1e-2 atol, so the 1e-4 relative tolerance decides. Products of operands rounded to tf32 (tl.dot's
# default input precision) or bf16 are off by ~2^-11 relative and fail. The cap keeps an honest fp32 sequential
# row sum inside the atol whatever |y| is (its error is at most ~eps * n * rms(v x) = 6e-8 * 2^17 * 0.33 = 2.6e-3
# for an n-entry row; rows that cancel to a small y are judged by the atol alone), so the 1M-entry row of
# power_law_rows keeps the catalog's scale.
DISTRIBUTIONS = ("uniform", "positive_values", "scaled_rows")

_PER_ROW = re.compile(r"^(\d+) per row, random columns$")
_POWER_LAW = re.compile(r"^power-law row lengths floor\(2\^(\d+) \* rank\^-([0-9.]+)\)")
_STENCIL = re.compile(r"^27-point stencil on a (\d+)x(\d+)x(\d+) grid$")


def _sorted_random_columns(lengths: torch.Tensor, N: int, generator, device) -> torch.Tensor:
    """Columns drawn uniformly with replacement, sorted within each row (one sort of row*N + col keys)."""
    M = lengths.numel()
    nnz = int(lengths.sum())
    cols = torch.randint(0, N, (nnz,), generator=generator, device=device, dtype=torch.int64)
    if bool((lengths == lengths[0]).all()):
        return cols.view(M, -1).sort(dim=1).values.reshape(-1)
    rows = torch.repeat_interleave(torch.arange(M, device=device), lengths)
    keys = torch.sort(rows * N + cols).values  # rows stay grouped in order: row r's keys lie in [r*N, (r+1)*N)
    return keys - rows * N


def _power_law_lengths(M: int, nnz: int, log2_top: int, alpha: float, generator, device) -> torch.Tensor:
    """floor(2^log2_top * rank^-alpha) for ranks 1..M, given to the rows in random order, then one extra nnz each
    for nnz - sum randomly chosen rows. The lengths are computed in float64 on the CPU, so they are the same on
    every device (sum 130,248,002 for the catalog's workload)."""
    rank = torch.arange(1, M + 1, dtype=torch.float64)
    by_rank = torch.floor(2.0 ** log2_top * rank ** (-alpha)).to(torch.int64).to(device)
    rest = nnz - int(by_rank.sum())
    if not 0 <= rest <= M:
        raise ValueError(f"power-law lengths sum to {int(by_rank.sum())}; nnz = {nnz} leaves {rest} (need 0..{M})")
    lengths = torch.empty(M, dtype=torch.int64, device=device)
    lengths[torch.randperm(M, generator=generator, device=device)] = by_rank
    lengths[torch.randperm(M, generator=generator, device=device)[:rest]] += 1
    return lengths


def _stencil(nx: int, ny: int, nz: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """27-point stencil on an nx*ny*nz grid (x fastest): row i couples to every in-grid neighbour i + dz*nx*ny +
    dy*nx + dx, |d*| <= 1. Offsets are visited in increasing linear order, so columns come out sorted."""
    M = nx * ny * nz
    idx = torch.arange(M, device=device, dtype=torch.int32)
    x, y, z = idx % nx, (idx // nx) % ny, idx // (nx * ny)
    cols, keep = [], []
    for dz in (-1, 0, 1):
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                cols.append(idx + (dz * nx * ny + dy * nx + dx))
                keep.append((x + dx >= 0) & (x + dx < nx) & (y + dy >= 0) & (y + dy < ny)
                            & (z + dz >= 0) & (z + dz < nz))
    keep_t = torch.stack(keep, dim=1)
    lengths = keep_t.sum(dim=1, dtype=torch.int64)
    return lengths, torch.stack(cols, dim=1)[keep_t].to(torch.int64)


def make_pattern(pattern: str, M: int, N: int, nnz: int, *, generator, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Row lengths (int64 [M]) and sorted column indices (int64 [nnz]) for a workload's ``dist`` string."""
    if m := _PER_ROW.match(pattern):
        lengths = torch.full((M,), int(m.group(1)), dtype=torch.int64, device=device)
        cols = _sorted_random_columns(lengths, N, generator, device)
    elif m := _POWER_LAW.match(pattern):
        lengths = _power_law_lengths(M, nnz, int(m.group(1)), float(m.group(2)), generator, device)
        cols = _sorted_random_columns(lengths, N, generator, device)
    elif m := _STENCIL.match(pattern):
        nx, ny, nz = (int(g) for g in m.groups())
        if nx * ny * nz != M or M != N:
            raise ValueError(f"a {nx}x{ny}x{nz} stencil is {nx * ny * nz} x {nx * ny * nz}, the workload says {M} x {N}")
        lengths, cols = _stencil(nx, ny, nz, device)
    else:
        raise ValueError(f"unknown sparsity pattern {pattern!r}")
    if int(lengths.sum()) != nnz:
        raise ValueError(f"pattern {pattern!r} has {int(lengths.sum())} nonzeros, the workload says nnz = {nnz}")
    return lengths, cols


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    M, N, nnz = shapes["y"][0], shapes["x"][0], shapes["col_idx"][0]
    lengths, cols = make_pattern(str(params["dist"]), M, N, nnz, generator=generator, device=device)
    row_ptr = torch.zeros(M + 1, dtype=torch.int64, device=device)
    torch.cumsum(lengths, dim=0, out=row_ptr[1:])
    if dist == "uniform":
        values = torch.rand(nnz, generator=generator, device=device) * 2.0 - 1.0
    elif dist == "positive_values":
        values = torch.rand(nnz, generator=generator, device=device)
    elif dist == "scaled_rows":
        scale = torch.minimum(2.0 ** (6.0 + 8.0 * torch.rand(M, generator=generator, device=device)),
                              (2.0 ** 17 / lengths.clamp_min(1)).clamp_min(1.0))
        values = (torch.rand(nnz, generator=generator, device=device) * 2.0 - 1.0) \
            * torch.repeat_interleave(scale, lengths, output_size=nnz)
    else:
        raise ValueError(f"unknown distribution {dist!r}")
    x = torch.rand(N, generator=generator, device=device) * 2.0 - 1.0
    return row_ptr.to(torch.int32), cols.to(torch.int32), values.to(dtypes["values"]), x.to(dtypes["x"])


def reference(row_ptr, col_idx, values, x):
    """float64 y = A x through index_add_ over each nonzero's row, cast to fp32."""
    M = row_ptr.numel() - 1
    lengths = (row_ptr[1:] - row_ptr[:-1]).to(torch.int64)
    rows = torch.repeat_interleave(torch.arange(M, device=row_ptr.device), lengths)
    y = torch.zeros(M, dtype=torch.float64, device=row_ptr.device)
    y.index_add_(0, rows, values.double() * x.double()[col_idx.to(torch.int64)])
    return y.float()


def baseline(row_ptr, col_idx, values, x):
    """torch.sparse CSR matvec: cuSPARSE SpMV on CUDA. sparse_csr_tensor wraps the three input tensors as they
    are (int32 indices, no copy; check_invariants=False skips the O(nnz) validation), so the timed call is the
    SpMV plus cuSPARSE's descriptor and workspace setup."""
    A = torch.sparse_csr_tensor(row_ptr, col_idx, values, size=(row_ptr.numel() - 1, x.numel()),
                                check_invariants=False)
    return A @ x

