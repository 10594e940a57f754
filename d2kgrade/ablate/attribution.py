"""Per task and arm: which implemented properties carried the speed, and which missing ones cost the most.

Reads the records of ``d2kgrade ablate --run`` (:mod:`d2kgrade.ablate.results`). For one (task, arm):

- **carried**: properties the agents' kernels have (``present``) whose removal was timed, with the median slowdown
  over the episodes that timed it and in how many of them it was ``load_bearing``;
- **missing**: properties the kernels lack (``not_present``) that the expert reference's ablation prices
  (``estimated_from_reference``), by how many episodes lack it, with the reference's slowdown: the expected cost
  of the gap, largest first.

The report and the viewer render these; the module only computes (pydantic records in, dataclasses out, no
pandas, no torch).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from statistics import median

from d2kgrade.ablate.results import AblationRecord
from d2kgrade.ablate.stats import Ratio, load_bearing


@dataclass(frozen=True)
class PropertyEffect:
    """One property's figure within a (task, arm)."""

    property: str
    """Guidance id."""
    level: str
    """L1, L2 or L3."""
    slowdown: float
    """Median over the episodes of the slowdown when removed (carried), or the reference's (missing)."""
    ci_low: float | None
    """Lower end of the interval: the median of the episodes' ``ci_low`` (carried), the reference's (missing)."""
    ci_high: float | None
    """Upper end, the same way."""
    episodes: int
    """Episodes behind it: that timed its removal (carried), that lack it (missing)."""
    load_bearing: int
    """Of those, how many were ``load_bearing`` (carried); for missing, 1 when the reference's figure clears its
    noise (:func:`d2kgrade.ablate.stats.load_bearing`), else 0."""


@dataclass(frozen=True)
class TaskArm:
    """What the ablations say about one task under one arm."""

    task: str
    arm: str
    episodes: int
    """Episodes of this task and arm that have at least one record."""
    carried: list[PropertyEffect]
    """Implemented properties, load-bearing in most episodes first, then by slowdown."""
    missing: list[PropertyEffect]
    """Lacking properties priced by the reference, by expected cost (slowdown x share of episodes lacking it)."""


def _mid(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return median(vals) if vals else None


def attribute(records: Iterable[AblationRecord]) -> list[TaskArm]:
    """The (task, arm) groups of a run's ablation records, sorted by task then arm.

    Records of the expert reference (arm ``reference``) form their own group, whose ``carried`` list is the
    reference's own figures.
    """
    groups: dict[tuple[str, str], list[AblationRecord]] = {}
    for r in records:
        groups.setdefault((r.task, r.arm or "?"), []).append(r)
    out = []
    for (task, arm), recs in sorted(groups.items()):
        n_eps = len({r.episode for r in recs})
        by_prop: dict[str, list[AblationRecord]] = {}
        for r in recs:
            by_prop.setdefault(r.property, []).append(r)
        carried, missing = [], []
        for pid, rs in by_prop.items():
            timed = [r for r in rs if r.present and r.slowdown is not None
                     and r.status in ("load_bearing", "not_load_bearing")]
            if timed:
                carried.append(PropertyEffect(pid, rs[0].level, median(r.slowdown for r in timed),  # type: ignore
                                              _mid([r.ci_low for r in timed]), _mid([r.ci_high for r in timed]),
                                              len(timed), sum(r.status == "load_bearing" for r in timed)))
            priced = [r for r in rs if r.status == "not_present" and r.estimated_from_reference
                      and r.slowdown is not None]
            if priced:
                ref = priced[0]  # every estimate of a task copies the same reference record
                bearing = ref.ci_low is not None and ref.ci_high is not None and ref.noise_pct is not None and \
                    load_bearing(Ratio(ref.slowdown, ref.ci_low, ref.ci_high), ref.noise_pct)  # type: ignore[arg-type]
                missing.append(PropertyEffect(pid, ref.level, ref.slowdown, ref.ci_low, ref.ci_high,  # type: ignore
                                              len(priced), int(bearing)))
        carried.sort(key=lambda e: (-e.load_bearing / e.episodes, -e.slowdown, e.property))
        missing.sort(key=lambda e: (-(e.slowdown - 1.0) * e.episodes / n_eps, e.property))
        out.append(TaskArm(task, arm, n_eps, carried, missing))
    return out


__all__ = ["PropertyEffect", "TaskArm", "attribute"]
