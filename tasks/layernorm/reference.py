"""layernorm: exact semantics (float64), the PyTorch baseline, and the seeded input maker."""

from __future__ import annotations

import torch
import torch.nn.functional as F

EPS = 1e-5

# "normal" is the catalog's x = x_offset + N(0,1) (x_offset = 0 unless the workload sets it), with trained-looking
# affine parameters w ~ 1 + 0.2 N(0,1) and b ~ 0.2 N(0,1).
# "shifted" gives every row its own scale (0.1 to 10) and an offset of up to 1000 standard deviations in fp32
# (30 in bf16, whose 8-bit mantissa would otherwise erase the signal), so E[x^2] - E[x]^2 cancels even on the smoke
# workload and rstd varies across rows.
# "outliers" adds the LLM hidden-state pattern: a few fixed channels 20-60x larger than the rest, which dominate
# the variance; y is then far from the input, so echoing x or writing constants fails.
DISTRIBUTIONS = ("normal", "shifted", "outliers")


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    M, N = shapes["x"]
    f32 = dict(generator=generator, device=device, dtype=torch.float32)
    x = torch.randn(M, N, **f32)
    w = 1.0 + 0.2 * torch.randn(N, **f32)
    b = 0.2 * torch.randn(N, **f32)
    if dist == "shifted":
        ratio = 1000.0 if dtypes["x"] == torch.float32 else 30.0
        scale = 10.0 ** (torch.rand(M, 1, **f32) * 2.0 - 1.0)
        x = scale * (x + ratio * (torch.rand(M, 1, **f32) * 2.0 - 1.0))
    elif dist == "outliers":
        cols = torch.randperm(N, generator=generator, device=device)[: max(1, N // 128)]
        x[:, cols] *= 20.0 + 40.0 * torch.rand(cols.numel(), **f32)
    elif dist != "normal":
        raise ValueError(f"unknown distribution {dist!r}")
    x = x + float(params.get("x_offset", 0))
    return x.to(dtypes["x"]), w.to(dtypes["w"]), b.to(dtypes["b"])


def reference(x, w, b):
    N = x.shape[-1]
    xd = x.double()
    y = F.layer_norm(xd, (N,), w.double(), b.double(), EPS)
    mean = xd.mean(-1)
    rstd = torch.rsqrt(xd.var(-1, unbiased=False) + EPS)
    return y.to(x.dtype), mean.float(), rstd.float()


def baseline(x, w, b):
    # One fused ATen kernel that also returns the saved statistics (fp32 for bf16 inputs), as autograd uses it.
    y, mean, rstd = torch.native_layer_norm(x, (x.shape[-1],), w, b, EPS)
    return y, mean.view(-1).float(), rstd.view(-1).float()


# ------------------------------------------------------------------------------------- baseline candidates
# Read in Liger-Kernel's liger_kernel/ops/layer_norm.py: layer_norm_forward(X, W, B, eps) returns (Y, X, Mean,
# RSTD, BLOCK_SIZE, num_warps), with Mean and RSTD allocated in X's dtype (so bf16 statistics for bf16 rows; the
# fp32 statistics tolerance may reject them). The autograd function returns Y only, hence the ops-level call.


def baseline_liger(x, w, b):
    """Liger-Kernel's Triton LayerNorm forward (one row per program), with its saved mean and rstd."""
    from liger_kernel.ops.layer_norm import layer_norm_forward

    y, _, mean, rstd, _, _ = layer_norm_forward(x, w, b, EPS)
    return y, mean.view(-1).float(), rstd.view(-1).float()
