"""gemm_bias_act: exact semantics (float64), the PyTorch baseline, and the seeded input maker.

Y = gelu_tanh(X @ W^T + b): the product, the bias and the tanh-GELU in float64, rounded once to the output dtype.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# "normal" is the catalog's: X ~ N(0,1), W ~ N(0,1)/sqrt(K), b ~ N(0,1), so the pre-activation u ~ N(0, 2).
# "int_valued" draws X, W and b from {-2, ..., 2}: u is an exact integer in fp32 (|u| <= 4K + 2), so a skipped,
#   doubled or misaligned K tile, or a bias added to the wrong column, is an error of >= 1, not noise; the large
#   |u| also exercises both tails of GELU (y = u and y = -0).
# "wide_range" scales row i of X by 2^U(-3, 5): u spans about +-100, where a tanh built from exp(2z) overflows
#   (inf/inf = NaN) and an exp(-t) without care becomes inf; y must still be u (or 0) there. Rows of different
#   scale also make the output non-exchangeable across rows, so a transposed or constant output fails.
DISTRIBUTIONS = ("normal", "int_valued", "wide_range")


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    M, K = shapes["X"]
    N = shapes["W"][0]
    if dist == "int_valued":
        X = torch.randint(-2, 3, (M, K), generator=generator, device=device).float()
        W = torch.randint(-2, 3, (N, K), generator=generator, device=device).float()
        b = torch.randint(-2, 3, (N,), generator=generator, device=device).float()
    else:
        X = torch.randn(M, K, generator=generator, device=device)
        W = torch.randn(N, K, generator=generator, device=device) / math.sqrt(K)
        b = torch.randn(N, generator=generator, device=device)
        if dist == "wide_range":
            X = X * 2.0 ** (torch.rand(M, 1, generator=generator, device=device) * 8.0 - 3.0)
        elif dist != "normal":
            raise ValueError(f"unknown distribution {dist!r}")
    return X.to(dtypes["X"]), W.to(dtypes["W"]), b.to(dtypes["b"])


def reference(X, W, b):
    u = X.double() @ W.double().T + b.double()
    return F.gelu(u, approximate="tanh").to(X.dtype)


def baseline(X, W, b):
    """cuBLASLt with its bias + GELU(tanh) epilogue where torch exposes it (one kernel, no pre-activation in HBM);
    otherwise F.linear (bias fused into the GEMM) followed by F.gelu."""
    if X.is_cuda and hasattr(torch, "_addmm_activation"):
        return torch._addmm_activation(b, X, W.t(), use_gelu=True)
    return F.gelu(F.linear(X, W, b), approximate="tanh")


# ------------------------------------------------------------------------------------- baseline candidates
# torch._addmm_activation(bias, X, W^T, use_gelu=True) runs cuBLASLt with its bias + GELU epilogue
# (CUBLASLT_EPILOGUE_GELU_BIAS, the tanh approximation) on CUDA (schema read in torch 2.13); F.linear with a bias
# uses cuBLASLt's bias epilogue and leaves GELU to a separate kernel.


def baseline_cublaslt_epilogue(X, W, b):
    """cuBLASLt with the bias + GELU(tanh) epilogue fused into the GEMM: one kernel."""
    return torch._addmm_activation(b, X, W.t(), use_gelu=True)


def baseline_cublas_unfused(X, W, b):
    """cuBLAS(Lt) GEMM with the bias epilogue (F.linear), then F.gelu(tanh): the pre-activation goes through HBM."""
    return F.gelu(F.linear(X, W, b), approximate="tanh")
