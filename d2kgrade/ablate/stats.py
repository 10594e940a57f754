"""Slowdown of an ablated variant against the original, from interleaved timing rounds, with a bootstrap interval.

A round times every variant once (one evaluation each, so one median per workload). Rounds share the drift of the
machine (clocks, temperature, other tenants), so the bootstrap resamples *rounds*, keeping each round's figures
together: per resample, ``ratio_w = median(variant_w) / median(original_w)`` over the drawn rounds, and the
slowdown is the geometric mean of ``ratio_w`` over the workloads. The interval is the 2.5-97.5 percentile range.
The noise is the same statistic for the original against its own second copy in each round; its half-width, in
percent, is the bar a slowdown's lower end must clear to count as load-bearing.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median

Series = Mapping[str, Sequence[float | None]]
"""Workload name -> one median time (ms) per round; None where that round has no figure."""


@dataclass(frozen=True)
class Ratio:
    """A ratio of medians with its bootstrap interval."""

    value: float
    low: float
    high: float

    @property
    def half_width_pct(self) -> float:
        """How far the interval reaches from 1, in percent (the noise bar)."""
        return 100.0 * max(self.high - 1.0, 1.0 - self.low, 0.0)


def _pairs(num: Sequence[float | None], den: Sequence[float | None]) -> list[int]:
    return [i for i, (a, b) in enumerate(zip(num, den)) if a is not None and b is not None and a > 0 and b > 0]


def _ratio(num: Sequence[float | None], den: Sequence[float | None], idx: Sequence[int]) -> float:
    return median(num[i] for i in idx) / median(den[i] for i in idx)  # type: ignore[type-var, operator]


def ratio_of_medians(num: Series, den: Series, *, resamples: int = 2000, seed: int = 0,
                     level: float = 0.95) -> tuple[Ratio | None, dict[str, Ratio]]:
    """Geomean over workloads of median(num) / median(den), and the per-workload ratios, with bootstrap intervals.

    Workloads with fewer than two rounds that have both figures are left out; None when none is left.
    """
    rng = random.Random(seed)
    work = {w: _pairs(num[w], den[w]) for w in num if w in den}
    work = {w: idx for w, idx in work.items() if len(idx) >= 2}
    members = {w: set(idx) for w, idx in work.items()}
    if not work:
        return None, {}
    rounds = sorted({i for idx in work.values() for i in idx})
    per_w: dict[str, list[float]] = {w: [] for w in work}
    geo: list[float] = []
    for _ in range(resamples):
        draw = [rng.choice(rounds) for _ in rounds]
        logs = []
        for w, idx in work.items():
            mine = [i for i in draw if i in members[w]] or idx  # a draw that misses every round of w keeps them all
            r = _ratio(num[w], den[w], mine)
            per_w[w].append(r)
            logs.append(math.log(r))
        geo.append(math.exp(sum(logs) / len(logs)))
    lo_q, hi_q = (1 - level) / 2, 1 - (1 - level) / 2

    def interval(point: float, samples: list[float]) -> Ratio:
        s = sorted(samples)
        return Ratio(point, s[int(lo_q * (len(s) - 1))], s[math.ceil(hi_q * (len(s) - 1))])

    points = {w: _ratio(num[w], den[w], idx) for w, idx in work.items()}
    overall = math.exp(sum(math.log(v) for v in points.values()) / len(points))
    return interval(overall, geo), {w: interval(points[w], per_w[w]) for w in work}


def load_bearing(slowdown: Ratio, noise_pct: float) -> bool:
    """The slowdown's interval lies above the measured noise: its lower end exceeds ``1 + noise``."""
    return slowdown.low > 1.0 + noise_pct / 100.0
