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


# ------------------------------------------------------------------------------------- baseline candidates
# Read in Liger-Kernel's liger_kernel/transformers/functional.py (liger_fused_add_rms_norm(X, R, W, eps, offset,
# casting_mode, in_place) -> (Y, S) with S = X + R, fresh output buffers; in_place concerns the backward) and in
# flash-attn's flash_attn/ops/triton/layer_norm.py (rms_norm_fn(x, weight, bias, residual=..., eps=...,
# prenorm=True) -> (y, residual_out), the sum taken in fp32, residual_out in the residual's dtype). vLLM's and
# FlashInfer's fused_add_rmsnorm work in place over x and residual, which this task does not allow.


def baseline_liger(x, residual, w):
    """Liger-Kernel's fused residual add + RMSNorm, casting_mode 'gemma' (everything in fp32, one rounding)."""
    from liger_kernel.transformers.functional import liger_fused_add_rms_norm

    y, h = liger_fused_add_rms_norm(x, residual, w, EPS, 0.0, "gemma", False)
    return y, h


def baseline_flash_attn(x, residual, w):
    """flash-attn's Triton fused add + RMSNorm (prenorm=True returns the residual sum as well)."""
    from flash_attn.ops.triton.layer_norm import rms_norm_fn

    y, h = rms_norm_fn(x, w, None, residual=residual, eps=EPS, prenorm=True, residual_in_fp32=False)
    return y, h
