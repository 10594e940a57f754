"""gemm_splitk: exact semantics (float64), the PyTorch baseline, and the seeded input maker."""

from __future__ import annotations

import math

import torch

# "normal" is the catalog's: A ~ N(0,1), B ~ N(0,1)/sqrt(K), so C ~ N(0,1).
# "int_valued" draws A and B from {-2, ..., 2}: every product and partial sum is exact in fp32 (|C| <= 4K <
#   2^24 at K = 65536), so a skipped, doubled or misaligned K slice, or a split added twice, is an error of >= 1.
# "cancelling" is a weight-gradient-like reduction whose halves cancel: A = [A1, A1] and B = [B1, -B1 + D] with
#   B1 ~ 16 N(0,1)/sqrt(K) and D ~ N(0,1)/sqrt(K). Partial sums over the first half reach ~11 while C = A1.D + ...
#   stays ~N(0, 1/2), so the partials must be kept in fp32: rounding them to bf16 (bf16 atomics, bf16 split
#   partials, a bf16 running accumulator) costs ~2^-9 * 11 = 0.02 per partial, beyond the 1e-2 + 1e-2|C| bound,
#   while fp32 partials are off by ~1e-6.
DISTRIBUTIONS = ("normal", "int_valued", "cancelling")


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    M, K = shapes["A"]
    N = shapes["B"][0]
    if dist == "int_valued":
        A = torch.randint(-2, 3, (M, K), generator=generator, device=device).float()
        B = torch.randint(-2, 3, (N, K), generator=generator, device=device).float()
    else:
        A = torch.randn(M, K, generator=generator, device=device)
        B = torch.randn(N, K, generator=generator, device=device) / math.sqrt(K)
        if dist == "cancelling":
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
    """cuBLAS (which picks its own split-K / GEMV kernels for skinny shapes)."""
    return A @ B.T


# ------------------------------------------------------------------------------------- baseline candidates
# torch.backends.cuda.preferred_blas_library("cublas" | "cublaslt") picks the library behind torch.matmul (torch
# 2.13 docs and signature read here); the setting is global, so each candidate restores the previous one. Both
# pick their own split-K / GEMV kernels for skinny shapes.


def _with_blas(library, fn, *args):
    prev = torch.backends.cuda.preferred_blas_library()
    torch.backends.cuda.preferred_blas_library(library)
    try:
        return fn(*args)
    finally:
        torch.backends.cuda.preferred_blas_library(prev)


def baseline_cublas(A, B):
    """cuBLAS (cublasGemmEx) through torch.matmul with the B^T view."""
    return _with_blas("cublas", torch.matmul, A, B.t())


def baseline_cublaslt(A, B):
    """cuBLASLt (cublasLtMatmul) through torch.matmul."""
    return _with_blas("cublaslt", torch.matmul, A, B.t())
