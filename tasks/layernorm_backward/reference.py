"""layernorm_backward: exact semantics (float64), the PyTorch baseline, and the seeded input maker."""

from __future__ import annotations

import torch

EPS = 1e-5

# "normal" is the catalog's dy, x, w ~ N(0,1) in bf16, with mean/rstd of x computed in fp64 and stored as fp32.
# "shifted" gives x per-row offsets (up to 30 std, as far as bf16 keeps the signal) and scales (0.1-10), so rstd
# varies by 100x across rows and x - mean needs the fp32 mean; w ~ 1 + 0.2 N(0,1) as in a trained model.
# "outliers" gives x a few channels 20-60x larger (LLM hidden states) and dy rows of different magnitudes, so
# xhat and dy*xhat have a heavy tail; dx is then far from dy, so echoing dy or writing constants fails.
# "cancelling" pairs row i of the first half with row M/2 + i: the same x, and dy = 8 d_i there against
#   -8 d_i + 0.25 e_i (d, e ~ N(0,1)). dw and db are sums of the small remainders (|db| ~ 0.25 sqrt(M/2)), while
#   any partial sum over a subset of rows is ~8 sqrt(rows): partials kept in bf16 (a [G, N] bf16 partial buffer,
#   bf16 atomics on dw/db) round at 2^-9 of ~40 and miss the 1e-2 + 1e-3|dw| bound by several times; fp32
#   partials are off by ~1e-5.
DISTRIBUTIONS = ("normal", "shifted", "outliers", "cancelling")


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    M, N = shapes["x"]
    f32 = dict(generator=generator, device=device, dtype=torch.float32)
    dy = torch.randn(M, N, **f32)
    x = torch.randn(M, N, **f32)
    w = torch.randn(N, **f32)
    if dist == "shifted":
        scale = 10.0 ** (torch.rand(M, 1, **f32) * 2.0 - 1.0)
        x = scale * (x + 30.0 * (torch.rand(M, 1, **f32) * 2.0 - 1.0))
        w = 1.0 + 0.2 * w
    elif dist == "outliers":
        cols = torch.randperm(N, generator=generator, device=device)[: max(1, N // 128)]
        x[:, cols] *= 20.0 + 40.0 * torch.rand(cols.numel(), **f32)
        dy = dy * 10.0 ** (torch.rand(M, 1, **f32) - 0.5)
    elif dist == "cancelling":
        h = M // 2
        x[h:2 * h] = x[:h]
        dy[:h] *= 8.0
        dy[h:2 * h] = 0.25 * dy[h:2 * h] - dy[:h]
    elif dist != "normal":
        raise ValueError(f"unknown distribution {dist!r}")
    x = x.to(dtypes["x"])
    xd = x.double()
    mean = xd.mean(-1)
    rstd = torch.rsqrt(xd.var(-1, unbiased=False) + EPS)
    return dy.to(dtypes["dy"]), x, w.to(dtypes["w"]), mean.to(dtypes["mean"]), rstd.to(dtypes["rstd"])


def reference(dy, x, w, mean, rstd):
    rs = rstd.double()[:, None]
    xhat = (x.double() - mean.double()[:, None]) * rs
    g = dy.double() * w.double()
    dx = rs * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
    dw = (dy.double() * xhat).sum(0)
    db = dy.double().sum(0)
    return dx.to(x.dtype), dw.float(), db.float()


def baseline(dy, x, w, mean, rstd):
    # The ATen kernel autograd runs for F.layer_norm (dx, dw, db in one call). It returns dw and db in w's dtype
    # (bf16 here: PyTorch offers no bf16-input, fp32-gradient layer norm on CUDA), widened afterwards.
    N = x.shape[-1]
    dx, dw, db = torch.ops.aten.native_layer_norm_backward(
        dy, x, [N], mean.view(-1, 1), rstd.view(-1, 1), w, w, [True, True, True])
    return dx, dw.float(), db.float()


# ------------------------------------------------------------------------------------- baseline candidates
# Read in Liger-Kernel's liger_kernel/ops/layer_norm.py: layer_norm_backward(dY, X, W, B, Mean, RSTD) returns
# (DX, DW, DB); DW and DB are summed from [SMs, N] partials and cast to W's and B's dtypes, so passing fp32 W and
# B gives fp32 parameter gradients (recent releases keep the partials in fp32; older ones in X's dtype).


def baseline_liger(dy, x, w, mean, rstd):
    """Liger-Kernel's LayerNorm backward (persistent row groups, [SMs, N] partials) from the saved statistics."""
    from liger_kernel.ops.layer_norm import layer_norm_backward

    w32 = w.float()
    dx, dw, db = layer_norm_backward(dy, x, w32, torch.zeros_like(w32), mean, rstd)
    return dx.to(x.dtype), dw.float(), db.float()
