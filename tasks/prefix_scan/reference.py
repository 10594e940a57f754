"""prefix_scan: exact semantics (float64 for float inputs, int64 for int inputs), the PyTorch baseline, and the
seeded input maker."""

from __future__ import annotations

import torch

# "normal" is the catalog's: fp32 from U(0, 1), int32 from {0, ..., 7}; the running sums grow linearly, so a
#   dropped or doubled tile, a carry added twice or a wrong look-back prefix is a large error.
# "signed_ints" draws integers from {-7, ..., 7} (as fp32 or int32): the running sums are a random walk that
#   crosses zero, every partial sum of any association order is an integer below 2^24 in magnitude for
#   N <= 2.3M (so an honest fp32 scan is exact and only the order-free answer passes), and |sum| <= 7 * 2^28
#   fits int32 at giant_1d_int32. A constant or zero output, or an output that only grows, fails.
# "large_ints" draws integers uniform in [0, (2^31 - 1) // N] (715,827 at the smoke's N = 3000, 7 at
#   giant_1d_int32), so every running sum fits int32 but climbs to ~2^30: a scan that accumulates int32 keys in fp32
#   (exact only below 2^24) rounds them, which the exact int32 comparison catches; an integer scan is exact, and
#   as fp32 inputs the honest scan stays within its 1e-4 relative tolerance.
DISTRIBUTIONS = ("normal", "signed_ints", "large_ints")


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    B, N = shapes["x"]
    dtype = dtypes["x"]
    if dist == "normal":
        if dtype.is_floating_point:
            x = torch.rand(B, N, generator=generator, device=device)
        else:
            x = torch.randint(0, 8, (B, N), generator=generator, device=device)
    elif dist == "signed_ints":
        x = torch.randint(-7, 8, (B, N), generator=generator, device=device)
    elif dist == "large_ints":
        x = torch.randint(0, (2**31 - 1) // max(N, 1) + 1, (B, N), generator=generator, device=device)
    else:
        raise ValueError(f"unknown distribution {dist!r}")
    return (x.to(dtype),)


def reference(x):
    wide = torch.float64 if x.is_floating_point() else torch.int64
    return torch.cumsum(x.to(wide), dim=-1).to(x.dtype)


def baseline(x):
    return torch.cumsum(x, dim=-1, dtype=x.dtype)
