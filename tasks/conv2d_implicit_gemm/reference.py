"""conv2d_implicit_gemm: exact semantics (float64), the PyTorch baseline, and the seeded input maker.

y[n, p, q, k] = sum_{r, s, c} x[n, p*stride + r - pad, q*stride + s - pad, c] * w[k, r, s, c], zero padding, NHWC
activations, KRSC filters, NPQK output.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# "normal" is the catalog's: x ~ N(0,1), w ~ N(0,1)/sqrt(R*S*C), so y ~ N(0,1). A halo shifted by one pixel (a
#   padding or stride off by one) reads different pixels and is an O(1) error everywhere.
# "positive" draws x = 1 + |N(0,1)| and w = (N(0,1) + 1)/sqrt(R*S*C): every tap adds a positive ~1.8/sqrt(R*S*C)
#   on average, so a border output (fewer valid taps) is visibly smaller than an interior one. A kernel that reads
#   outside the image instead of zero-filling (wrapped or clamped indices), or drops a row/column of taps at the
#   border, is off by O(1) at the borders, where "normal" inputs could hide it in the noise.
# "cancelling" makes the second half of the channels undo the first at every tap: x[..., C/2:] repeats
#   x[..., :C/2] and w's channel halves are 16 w1 and -16 w1 + d (w1, d as in "normal"). Reduced in the guidance's
#   order ((r, s) outer, channels inner), the running sum swings by ~16 sqrt(C/2 / (R*S*C)) (~3.8 at the smoke
#   workload) within every tap while y stays ~N(0, 1/2), so a 16-bit accumulator carried across channel tiles
#   rounds at up to 2^-9 of it on every tile and misses the 1e-2 + 1e-2|y| bound (5e-3 for fp16); fp32 does not.
DISTRIBUTIONS = ("normal", "positive", "cancelling")


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    f32 = dict(generator=generator, device=device, dtype=torch.float32)
    K, R, S, C = shapes["w"]
    x = torch.randn(shapes["x"], **f32)
    w = torch.randn(shapes["w"], **f32)
    if dist == "positive":
        x = 1.0 + x.abs()
        w = w + 1.0
    elif dist == "cancelling":
        h = C // 2
        x[..., h:2 * h] = x[..., :h]
        w[..., :h] *= 16.0
        w[..., h:2 * h] -= w[..., :h]
    elif dist != "normal":
        raise ValueError(f"unknown distribution {dist!r}")
    return x.to(dtypes["x"]), (w / math.sqrt(R * S * C)).to(dtypes["w"])


_REF_IMAGES = 8  # images per float64 chunk: 8 x 128 x 128 x 512 doubles = 537 MB of input


def reference(x, w, *, stride, pad):
    """float64 F.conv2d on NCHW views, a few images at a time."""
    N, H, W_, _ = x.shape
    K, R, S, _ = w.shape
    P, Q = (H + 2 * pad - R) // stride + 1, (W_ + 2 * pad - S) // stride + 1
    wd = w.permute(0, 3, 1, 2).double()
    y = torch.empty((N, P, Q, K), dtype=x.dtype, device=x.device)
    for n0 in range(0, N, _REF_IMAGES):
        xd = x[n0:n0 + _REF_IMAGES].permute(0, 3, 1, 2).double()
        y[n0:n0 + _REF_IMAGES] = F.conv2d(xd, wd, stride=stride, padding=pad).permute(0, 2, 3, 1).to(x.dtype)
    return y


def baseline(x, w, *, stride, pad):
    """cuDNN through F.conv2d on channels_last views: x [N, H, W, C] permuted to [N, C, H, W] is already
    channels_last in memory (as is w), so no copy is made and cuDNN's NHWC implicit-GEMM kernels run; the
    channels_last output permuted back is y [N, P, Q, K], contiguous."""
    return F.conv2d(x.permute(0, 3, 1, 2), w.permute(0, 3, 1, 2), stride=stride, padding=pad).permute(0, 2, 3, 1)


# ------------------------------------------------------------------------------------- baseline candidates
# torch.backends.cudnn.flags(enabled, benchmark, ...) defaults to enabled=False (signature read in torch 2.13), so
# both switches are given. With benchmark=True cuDNN times its algorithms for each new shape on the first call and
# reuses the fastest; the eager baseline takes the heuristic choice.


def baseline_cudnn_benchmark(x, w, *, stride, pad):
    """cuDNN on the channels_last views with cudnn.benchmark on (autotuned algorithm per shape)."""
    with torch.backends.cudnn.flags(enabled=True, benchmark=True):
        return baseline(x, w, stride=stride, pad=pad)
