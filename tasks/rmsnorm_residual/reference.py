"""rmsnorm_residual: exact semantics (float64), the PyTorch baseline, and the seeded input maker."""

from __future__ import annotations

import torch

EPS = 1e-6

# "normal" is the catalog's: x and residual are x_scale*N(0,1) (x_scale from the workload, 1 by default; the
# fp16_outliers workload sets 300 so that h*h overflows fp16), w ~ 1 + 0.2*N(0,1).
# "row_scaled" multiplies each row of x and residual by 10^U(-3, 0.5): a kernel that normalizes with a statistic
# of the wrong row, drops eps (it matters on the 1e-3-scaled rows, where mean(h^2) ~ eps) or forgets the
# per-row scale fails, and so does a constant or echoed output.
# "outlier_channels" adds values of +-max(40 sigma, 320) to a few fixed columns, as LLM activations have: 320^2 =
# 102400 is past fp16's 65504, so squares (or a sum of squares) kept in fp16 overflow to inf and y collapses to 0,
# and in bf16 the outliers swamp the small channels' squares. (At 40 sigma alone the smoke row's sum of squares
# was ~12,700: no fp16 overflow.)
DISTRIBUTIONS = ("normal", "row_scaled", "outlier_channels")


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    M, N = shapes["x"]
    scale = float(params.get("x_scale", 1.0))
    x = torch.randn(M, N, generator=generator, device=device) * scale
    residual = torch.randn(M, N, generator=generator, device=device) * scale
    w = 1.0 + 0.2 * torch.randn(N, generator=generator, device=device)
    if dist == "row_scaled":
        row = 10.0 ** (torch.rand(M, 1, generator=generator, device=device) * 3.5 - 3.0)
        x, residual = x * row, residual * row
    elif dist == "outlier_channels":
        cols = torch.randperm(N, generator=generator, device=device)[: max(1, N // 100)]
        # Keep |h| inside the storage dtype's range: fp16 tops out at 65504.
        big = min(max(40.0 * scale, 320.0), 15000.0)
        x[:, cols] += big * torch.sign(torch.randn(M, len(cols), generator=generator, device=device))
    elif dist != "normal":
        raise ValueError(f"unknown distribution {dist!r}")
    dt = dtypes["x"]
    return x.to(dt), residual.to(dt), w.to(dtypes["w"])


def reference(x, residual, w):
    h = x.double() + residual.double()
    rstd = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    y = h * rstd * w.double()
    return y.to(x.dtype), h.to(x.dtype)


def baseline(x, residual, w):
    h = x.float() + residual.float()
    y = torch.nn.functional.rms_norm(h, (h.shape[-1],), w.float(), eps=EPS)
    return y.to(x.dtype), h.to(x.dtype)
