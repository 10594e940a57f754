"""histogram: exact semantics (bincount), the PyTorch baseline, and the seeded key maker.

counts[v] = #{i : x[i] == v} for x [N] int32 in [0, NB). The workload's ``dist`` parameter gives the key
distribution (``uniform``, or ``P% of keys = v, rest uniform``); the input distribution (``DISTRIBUTIONS``) picks
the catalog's draw or a second, harder one over the same bins.
"""

from __future__ import annotations

import re

import torch

# "catalog" draws keys as the workload's dist says. "hot_tail_runs" sends a quarter of the keys to the last bin
# NB-1 (the edge of every mask) on top of the catalog's draw and sorts the keys within runs of 1024, so whole
# warps see one key at a time (maximal contention on every bin, not only the hot one). Zero, constant and
# echoed outputs fail both: the counts sum to N and are far from uniform.
DISTRIBUTIONS = ("catalog", "hot_tail_runs")

_HOT = re.compile(r"^(\d+(?:\.\d+)?)% of keys = (\d+), rest uniform$")
_RUN = 1024


def draw_keys(dist: str, N: int, NB: int, *, generator, device) -> torch.Tensor:
    """Keys for a workload's ``dist`` string, int32 [N], made on ``device`` (1 GB for the catalog's N)."""
    x = torch.randint(0, NB, (N,), generator=generator, device=device, dtype=torch.int32)
    if dist == "uniform":
        return x
    if m := _HOT.match(dist):
        pct, hot = float(m.group(1)), int(m.group(2))
        if not 0 <= hot < NB:
            raise ValueError(f"hot key {hot} is outside [0, {NB})")
        u = torch.rand(N, generator=generator, device=device)
        return x.masked_fill_(u < pct / 100.0, hot)
    raise ValueError(f"unknown key distribution {dist!r}")


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    (N,) = shapes["x"]
    NB = int(params["NB"])
    x = draw_keys(str(params["dist"]), N, NB, generator=generator, device=device)
    if dist == "hot_tail_runs":
        u = torch.rand(N, generator=generator, device=device)
        x.masked_fill_(u < 0.25, NB - 1)
        full = N - N % _RUN
        x[:full] = x[:full].view(-1, _RUN).sort(dim=1).values.view(-1)
    elif dist != "catalog":
        raise ValueError(f"unknown distribution {dist!r}")
    return (x.to(dtypes["x"]),)


def reference(x, *, NB):
    return torch.bincount(x.to(torch.int64), minlength=NB).to(torch.int32)


def baseline(x, *, NB):
    """torch.bincount on the int32 keys (CUDA: shared-memory privatized atomics for small NB, global atomics
    otherwise), cast back to int32."""
    return torch.bincount(x, minlength=NB).to(torch.int32)
