"""transpose: exact semantics, the PyTorch baseline, and the seeded input maker.

A transpose moves bits, so the comparison is exact (tolerance 0) and float64 adds nothing: the reference is the
catalog's X.t().contiguous() itself.
"""

from __future__ import annotations

import torch

# "normal": X ~ N(0,1) (the catalog's), every value distinct with high probability, so a misplaced element fails.
# "specials": 1% of the entries replaced by values that arithmetic or a narrower dtype would alter: +-inf, NaN,
# subnormals, -0.0 and magnitudes beyond fp16's range. A kernel that copies through fp16/bf16, or that computes
# (x * 1, x + 0) on the way, changes some of them.
DISTRIBUTIONS = ("normal", "specials")


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    M, N = shapes["X"]
    f32 = dict(generator=generator, device=device, dtype=torch.float32)
    x = torch.randn(M, N, **f32)
    if dist == "specials":
        tiny = torch.finfo(dtypes["X"]).tiny
        pool = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0, tiny / 4, -tiny / 8, 7.0e4, -3.0e5,
                             1.0e30], device=device)
        hit = torch.rand(M, N, **f32) < 0.01
        pick = torch.randint(0, pool.numel(), (M, N), generator=generator, device=device)
        x = torch.where(hit, pool[pick], x)
    elif dist != "normal":
        raise ValueError(f"unknown distribution {dist!r}")
    return (x.to(dtypes["X"]),)


def reference(X):
    return X.t().contiguous()


def baseline(X):
    return X.t().contiguous()
