"""softmax: exact semantics (float64), the PyTorch baseline, and the seeded input maker."""

from __future__ import annotations

import torch

# "normal" is the catalog's N(0,1). "shifted" adds a per-row offset in [-60, 60] and a 6x scale, so a kernel
# that skips the max subtraction overflows in fp32/bf16 and one that echoes or zeroes its input fails.
# "peaked" puts one large logit per row (a near one-hot output), which a constant 1/N output fails.
DISTRIBUTIONS = ("normal", "shifted", "peaked")


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    M, N = shapes["x"]
    x = torch.randn(M, N, generator=generator, device=device, dtype=torch.float32)
    if dist == "shifted":
        offset = torch.rand(M, 1, generator=generator, device=device) * 120.0 - 60.0
        x = x * 6.0 + offset
    elif dist == "peaked":
        hot = torch.randint(0, N, (M, 1), generator=generator, device=device)
        x.scatter_(1, hot, 12.0)
    elif dist != "normal":
        raise ValueError(f"unknown distribution {dist!r}")
    return (x.to(dtypes["x"]),)


def reference(x):
    return torch.softmax(x.double(), dim=-1).to(x.dtype)


def baseline(x):
    return torch.softmax(x, dim=-1)
