"""How much each rater is trusted, per rubric property, from measured agreement with hand labels.

A rater's reliability on a property is its sensitivity (how often it says ``present`` when the label is present)
and specificity (``absent`` when absent). Both are estimated from confusion counts with a Beta prior centred on a
pooled value (add ``PSEUDO`` pseudo-labels), so a property measured on 5 labels is pulled toward its level's (or
the rater's) overall reliability rather than believed at 5/5 = 1.0, and clipped to ``[FLOOR, CEILING]``: no rater
is ever certain, so no single verdict is final.

Sources (``d2kgrade/judge/calibration.json``, written by ``python benchmarks/static_fusion_calibration.py``):

- static: the *first-pass* counts of the held-out corpus (``benchmarks/data/static_accuracy.json``, ``wild.first_pass``):
  how the rater did on code it was not tuned on. The in-repo corpus measures fit (every property 1.0) and is not
  used. Properties without held-out labels take their level's pooled first-pass reliability.
- judge: counts from a judge run over the labelled corpora when one is given (``--judge-grades``); until then a
  stated prior (:data:`JUDGE_PRIOR`), which is an assumption, not a measurement, and is recorded as such.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

PSEUDO = 4.0
"""Weight (in labels) of the pooled prior in each property's estimate."""
FLOOR, CEILING = 0.55, 0.97
"""Bounds of any sensitivity or specificity: a rater is never trusted as certain, nor as worse than a coin."""
JUDGE_PRIOR = (0.85, 0.85)
"""Assumed judge sensitivity/specificity until a judge run over the labelled corpora measures it."""
CALIBRATION_VERSION = 1


@dataclass(frozen=True)
class Reliability:
    """One rater on one property."""

    sensitivity: float
    """P(rater says present | label present)."""
    specificity: float
    """P(rater says absent | label absent)."""
    n: int = 0
    """Labels behind the estimate (0: a pooled or assumed value)."""
    source: str = ""
    """Where it comes from (``measured``, ``pooled L2``, ``assumed``)."""

    def likelihood_ratio(self, verdict: str) -> float:
        """P(verdict | present) / P(verdict | absent); 1 for ``unknown``."""
        if verdict == "present":
            return self.sensitivity / (1.0 - self.specificity)
        if verdict == "absent":
            return (1.0 - self.sensitivity) / self.specificity
        return 1.0


@dataclass(frozen=True)
class Calibration:
    """Per-property reliabilities of both raters (with per-level pooled entries ``*.L1``...)."""

    static: dict[str, Reliability] = field(default_factory=dict)
    judge: dict[str, Reliability] = field(default_factory=dict)
    static_default: Reliability = Reliability(0.85, 0.85, 0, "assumed")
    judge_default: Reliability = Reliability(*JUDGE_PRIOR, 0, "assumed")
    version: int = CALIBRATION_VERSION
    sources: dict[str, str] = field(default_factory=dict)

    def static_of(self, pid: str) -> Reliability:
        return self.static.get(pid) or self.static.get(_level_key(pid)) or self.static_default

    def judge_of(self, pid: str) -> Reliability:
        return self.judge.get(pid) or self.judge.get(_level_key(pid)) or self.judge_default

    def to_json(self) -> dict[str, Any]:
        def rel(r: Reliability) -> dict[str, Any]:
            return {"sensitivity": round(r.sensitivity, 4), "specificity": round(r.specificity, 4), "n": r.n,
                    "source": r.source}

        return {"version": self.version, "sources": self.sources,
                "static_default": rel(self.static_default), "judge_default": rel(self.judge_default),
                "static": {k: rel(v) for k, v in sorted(self.static.items())},
                "judge": {k: rel(v) for k, v in sorted(self.judge.items())}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibration:
        def rel(d: dict[str, Any]) -> Reliability:
            return Reliability(float(d["sensitivity"]), float(d["specificity"]), int(d.get("n", 0)),
                               str(d.get("source", "")))

        return cls(static={k: rel(v) for k, v in data.get("static", {}).items()},
                   judge={k: rel(v) for k, v in data.get("judge", {}).items()},
                   static_default=rel(data["static_default"]) if "static_default" in data else cls.static_default,
                   judge_default=rel(data["judge_default"]) if "judge_default" in data else cls.judge_default,
                   version=int(data.get("version", CALIBRATION_VERSION)), sources=dict(data.get("sources", {})))


def _level_key(pid: str) -> str:
    """``softmax.L2.row-in-registers`` -> ``*.L2`` (the pooled entry of its level)."""
    parts = pid.split(".")
    return f"*.{parts[1]}" if len(parts) >= 3 else "*"


@dataclass
class Counts:
    """Confusion counts of one rater against labels (``unknown`` verdicts are left out: they carry no vote)."""

    tp: int = 0
    fn: int = 0
    tn: int = 0
    fp: int = 0

    def tally(self, labelled_present: bool, verdict: str) -> None:
        """Count one verdict (``present``/``absent``; ``unknown`` is no vote) against its label."""
        if verdict == "unknown":
            return
        if labelled_present:
            self.tp += verdict == "present"
            self.fn += verdict == "absent"
        else:
            self.tn += verdict == "absent"
            self.fp += verdict == "present"

    def add(self, other: Counts) -> None:
        self.tp += other.tp
        self.fn += other.fn
        self.tn += other.tn
        self.fp += other.fp


def estimate(c: Counts, pool: tuple[float, float], source: str) -> Reliability:
    """Beta-smoothed sensitivity/specificity of counts ``c`` toward ``pool`` (module docstring)."""
    se = (c.tp + PSEUDO * pool[0]) / (c.tp + c.fn + PSEUDO)
    sp = (c.tn + PSEUDO * pool[1]) / (c.tn + c.fp + PSEUDO)
    clip = lambda x: min(CEILING, max(FLOOR, x))
    return Reliability(clip(se), clip(sp), c.tp + c.fn + c.tn + c.fp, source)


def calibrate_rater(counts: dict[str, Counts], default_pool: tuple[float, float], source: str
                    ) -> tuple[dict[str, Reliability], Reliability]:
    """Per-property and per-level reliabilities from per-property counts: a level's pool is its pooled counts
    (smoothed toward ``default_pool``), each property is smoothed toward its level's pool."""
    by_level: dict[str, Counts] = {}
    total = Counts()
    for pid, c in counts.items():
        by_level.setdefault(_level_key(pid), Counts()).add(c)
        total.add(c)
    overall = estimate(total, default_pool, f"pooled {source}") if counts else Reliability(
        *default_pool, 0, "assumed")
    out: dict[str, Reliability] = {}
    for lv, c in by_level.items():
        out[lv] = estimate(c, (overall.sensitivity, overall.specificity), f"pooled {lv[2:]} {source}")
    for pid, c in counts.items():
        pool = out[_level_key(pid)]
        out[pid] = estimate(c, (pool.sensitivity, pool.specificity), source)
    return out, overall


def counts_from_accuracy(data: dict[str, Any]) -> dict[str, Counts]:
    """Per-property counts from a ``static_accuracy`` entry (``{"tasks": {task: {"properties": {...}}}}``): an
    ``unknown`` on a present label is counted in ``fn`` there and is moved out here (it is no vote)."""
    out: dict[str, Counts] = {}
    for res in data.get("tasks", {}).values():
        for pid, d in res.get("properties", {}).items():
            unknown_present = sum(1 for e in d.get("errors", []) if "labelled present, graded unknown" in e)
            out[pid] = Counts(tp=d["tp"], fn=max(0, d["fn"] - unknown_present), tn=d["tn"], fp=d["fp"])
    return out


def posterior(*weighted: tuple[float, float]) -> float:
    """P(present | verdicts) from even prior odds and each rater's (likelihood ratio, weight): the log-odds are the
    weighted sum of the log likelihood ratios (weight 1 each for independent raters)."""
    log_odds = sum(w * math.log(max(r, 1e-12)) for r, w in weighted)
    return 1.0 / (1.0 + math.exp(-log_odds))


def default_path() -> Path:
    return Path(str(resources.files("d2kgrade.judge").joinpath("calibration.json")))


@cache
def load_calibration(path: str | None = None) -> Calibration:
    """The shipped calibration (or the one at ``path``); an empty calibration if the file is missing."""
    p = Path(path) if path else default_path()
    if not p.is_file():
        return Calibration()
    return Calibration.from_json(json.loads(p.read_text(encoding="utf-8")))
