"""softmax: exact semantics (float64), the PyTorch baseline, and the seeded input maker."""

from __future__ import annotations

import torch

# "normal" is the catalog's N(0,1). "shifted" scales by 6 and adds a per-row offset in [-200, 200]: fp32 exp
# overflows above 88.7 and underflows to 0 below -103.9, so without the max subtraction a third of the rows
# (offset above ~70: a 1000-wide row of 6*N(0,1) peaks ~19 above its offset) give inf/inf and a fifth (offset
# below ~-123) give 0/0; rows whose largest exp is subnormal lose their relative precision. (The first version
# drew offsets in [-60, 60]: the largest value over 16,800 smoke rows was 86.2, so it never overflowed.)
# Echoed or zeroed outputs fail too.
# "peaked" puts one large logit per row (a near one-hot output), which a constant 1/N output fails.
DISTRIBUTIONS = ("normal", "shifted", "peaked")


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    M, N = shapes["x"]
    x = torch.randn(M, N, generator=generator, device=device, dtype=torch.float32)
    if dist == "shifted":
        offset = torch.rand(M, 1, generator=generator, device=device) * 400.0 - 200.0
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


# ------------------------------------------------------------------------------------- baseline candidates
# Read in Liger-Kernel's liger_kernel/transformers/functional.py (liger_softmax(x) -> LigerSoftmaxFunction: a row
# softmax over the last dim, output in x's dtype, added in 2025 releases). Not run here: no GPU, no Liger.


def baseline_liger(x):
    """Liger-Kernel's Triton softmax over the last dimension."""
    from liger_kernel.transformers.functional import liger_softmax

    return liger_softmax(x)
