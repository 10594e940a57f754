"""gemm_bf16: exact semantics (float64), the PyTorch baseline, and the seeded input maker."""

from __future__ import annotations

import math

import torch

# "normal" is the catalog's: A ~ N(0,1), B ~ N(0,1)/sqrt(K), so C ~ N(0,1).
# "int_valued" draws A and B from {-2, ..., 2}: every product and partial sum is exact in fp32, so a skipped,
# doubled or misaligned K tile is an error of >= 1, far outside the tolerance, not noise.
# "row_col_scaled" scales row i of A by 2^U(-4, 4) and row j of B by 2^U(-4, 4): C is no longer
# exchangeable across rows and columns, so a transposed or mis-tiled output, or a constant one, fails.
DISTRIBUTIONS = ("normal", "int_valued", "row_col_scaled")


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
        elif dist != "normal":
            raise ValueError(f"unknown distribution {dist!r}")
    return A.to(dtypes["A"]), B.to(dtypes["B"])


def reference(A, B):
    return (A.double() @ B.double().T).to(A.dtype)


def baseline(A, B):
    return torch.nn.functional.linear(A, B)
