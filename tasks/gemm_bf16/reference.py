"""gemm_bf16: exact semantics (float64), the PyTorch baseline, and the seeded input maker."""

from __future__ import annotations

import math

import torch

# "normal" is the catalog's: A ~ N(0,1), B ~ N(0,1)/sqrt(K), so C ~ N(0,1).
# "int_valued" draws A and B from {-2, ..., 2}: every product and partial sum is exact in fp32, so a skipped,
# doubled or misaligned K tile is an error of >= 1, far outside the tolerance, not noise.
# "row_col_scaled" scales row i of A by 2^U(-4, 4) and row j of B by 2^U(-4, 4): C is no longer
# exchangeable across rows and columns, so a transposed or mis-tiled output, or a constant one, fails.
# "cancelling" makes the second half of K undo the first: A = [A1, A1], B = [16 B1, -16 B1 + D] with A1, B1, D as
#   in "normal". The running K sum climbs to ~11 at K/2 while C = A1.D stays ~N(0, 1/2), so an accumulator kept in
#   the 16-bit input dtype (tl.dot(..., out_dtype=fp16) across K tiles, a bf16 running sum) rounds at 2^-7..2^-5
#   of ~11 and misses the 1e-2 + 1e-2|C| bound (5e-3 for fp16), while fp32 accumulation is off by ~1e-6.
DISTRIBUTIONS = ("normal", "int_valued", "row_col_scaled", "cancelling")


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    M, K = shapes["A"]
    N = shapes["B"][0]
    if dist == "int_valued":
        A = torch.randint(-2, 3, (M, K), generator=generator, device=device).float()
        B = torch.randint(-2, 3, (N, K), generator=generator, device=device).float()
    else:
        A = torch.randn(M, K, generator=generator, device=device)
        B = torch.randn(N, K, generator=generator, device=device) / math.sqrt(K)
        if dist == "row_col_scaled":
            A = A * 2.0 ** (torch.rand(M, 1, generator=generator, device=device) * 8.0 - 4.0)
            B = B * 2.0 ** (torch.rand(N, 1, generator=generator, device=device) * 8.0 - 4.0)
        elif dist == "cancelling":
            h = K // 2
            A[:, h:2 * h] = A[:, :h]
            B[:, :h] *= 16.0
            B[:, h:2 * h] -= B[:, :h]
        elif dist != "normal":
            raise ValueError(f"unknown distribution {dist!r}")
    return A.to(dtypes["A"]), B.to(dtypes["B"])


def reference(A, B):
    return (A.double() @ B.double().T).to(A.dtype)


def baseline(A, B):
    return torch.nn.functional.linear(A, B)


# ------------------------------------------------------------------------------------- baseline candidates
# torch.backends.cuda.preferred_blas_library("cublas" | "cublaslt") picks the library behind torch.matmul/F.linear
# (torch 2.13 docs and signature read here); the setting is global, so each candidate restores the previous one.


def _with_blas(library, fn, *args):
    prev = torch.backends.cuda.preferred_blas_library()
    torch.backends.cuda.preferred_blas_library(library)
    try:
        return fn(*args)
    finally:
        torch.backends.cuda.preferred_blas_library(prev)


def baseline_cublas(A, B):
    """cuBLAS (cublasGemmEx) through torch.matmul with the B^T view (no copy: a TN GEMM)."""
    return _with_blas("cublas", torch.matmul, A, B.t())


def baseline_cublaslt(A, B):
    """cuBLASLt (cublasLtMatmul with its heuristic algorithm) through torch.matmul."""
    return _with_blas("cublaslt", torch.matmul, A, B.t())
