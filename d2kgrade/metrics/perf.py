"""Per-episode speed and the Performance Score.

Speed of an episode's final submission: the geometric mean, over its timed workloads, of ``speedup_eager``
(eager median / submission median) and of ``speedup_compiled``. Only workloads with status ``passed`` and a
finite positive speedup count; the per-run ``hidden`` workload is a correctness check and never counts.

Performance Score of one episode (d2kgrade's definition, thresholds in :class:`ScoreConfig`):

- 0: no correct submission;
- 1: correct, geomean speedup over eager <= ``eager_threshold`` (1.0: not faster than eager);
- 2: correct and faster than eager;
- 3: correct and at least ``reference_fraction`` (0.9) of the expert reference's speed, where the ratio is the
  geometric mean over the workloads both timed of ``speedup_eager(agent) / speedup_eager(reference)`` (eager is
  timed in the same run as each kernel, so the ratio cancels most machine-to-machine drift).

The score is the highest level whose condition holds. A correct episode with no timed workload (a CPU run) has
no Performance Score (NaN, reported); a task without a correct reference run cannot reach level 3 (reported).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from d2kgrade.metrics.tables import HIDDEN_WORKLOAD


class ScoreConfig(BaseModel):
    """Everything that changes a scored number; recorded in every score result."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    eager_threshold: float = Field(default=1.0, gt=0)
    """Performance Score 2 needs a geomean speedup over eager strictly above this."""
    reference_fraction: float = Field(default=0.9, gt=0)
    """Performance Score 3 needs at least this fraction of the expert reference's speed."""
    fast_p: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)
    """Thresholds p of fast_p (fraction of tasks correct AND geomean speedup over eager > p)."""
    resamples: int = Field(default=2000, ge=0)
    """Bootstrap resamples of tasks for confidence intervals (0: no intervals)."""
    seed: int = 0
    """Seed of the bootstrap."""
    ci: float = Field(default=0.95, gt=0, lt=1)
    """Confidence level of the percentile intervals."""
    rater: str = "combined"
    """Which rater's code grades give the implementation score (static, llm, combined, human)."""
    proposal_rater: str | None = None
    """Which rater's design-note grades give the proposed rates; None: same as ``rater``, or ``llm`` when the
    runs hold no proposal grade by that rater."""
    seed_agg: str = "mean"
    """How several seeds of one (model, arm, task) become one task value: ``mean`` (expected single attempt)
    or ``best`` (best of the seeds, pass@k style)."""

    @field_validator("seed_agg")
    @classmethod
    def _agg(cls, v: str) -> str:
        if v not in ("mean", "best"):
            raise ValueError(f"expected mean or best, got {v!r}")
        return v

    @field_validator("rater")
    @classmethod
    def _rater(cls, v: str) -> str:
        if v not in ("static", "llm", "combined", "human"):
            raise ValueError(f"expected static, llm, combined or human, got {v!r}")
        return v


def fast_name(p: float) -> str:
    """Metric name of fast_p (``fast_1``, ``fast_1.5``)."""
    return f"fast_{p:g}"


def _log(x: pd.Series) -> pd.Series:
    """log of finite positive values, NaN elsewhere (NaN is skipped by group means)."""
    x = x.astype(float)
    ok = np.isfinite(x) & (x > 0)
    return pd.Series(np.where(ok, np.log(np.where(ok, x, 1.0)), np.nan), index=x.index)


def timed_workloads(workloads: pd.DataFrame) -> pd.DataFrame:
    """Rows that count for speed: passed, not hidden, finite positive speedup over eager."""
    w = workloads
    keep = (w["workload"] != HIDDEN_WORKLOAD) & (w["status"] == "passed") & np.isfinite(w["speedup_eager"]) & (
        w["speedup_eager"] > 0)
    return w[keep]


def reference_speeds(episodes: pd.DataFrame, workloads: pd.DataFrame) -> pd.DataFrame:
    """Median ``speedup_eager`` of correct reference episodes per (task, workload)."""
    ref = episodes[(episodes["agent"] == "reference") & episodes["correct"]]
    w = timed_workloads(workloads).merge(ref[["key", "task"]], on="key")
    if w.empty:
        return pd.DataFrame({"task": pd.Series(dtype=object), "workload": pd.Series(dtype=object),
                             "ref_speedup": pd.Series(dtype=float)})
    return (w.groupby(["task", "workload"], as_index=False)["speedup_eager"].median()
            .rename(columns={"speedup_eager": "ref_speedup"}))


def episode_performance(episodes: pd.DataFrame, workloads: pd.DataFrame, refs: pd.DataFrame,
                        cfg: ScoreConfig) -> pd.DataFrame:
    """One row per episode key: speedup_eager, speedup_compiled, roofline, n_timed, ref_ratio, perf_score and
    fast_p columns."""
    tw = timed_workloads(workloads)
    tw = tw.assign(log_e=_log(tw["speedup_eager"]), log_c=_log(tw["speedup_compiled"]),
                   roof=tw["roofline_fraction"].where(np.isfinite(tw["roofline_fraction"].astype(float))))
    g = tw.groupby("key")
    speed = pd.DataFrame({"speedup_eager": np.exp(g["log_e"].mean()), "speedup_compiled": np.exp(g["log_c"].mean()),
                          "roofline": g["roof"].mean(), "n_timed": g.size()})
    with_task = tw.merge(episodes[["key", "task"]], on="key").merge(refs, on=["task", "workload"])
    with_task = with_task.assign(log_r=with_task["log_e"] - _log(with_task["ref_speedup"]))
    ratio = np.exp(with_task.groupby("key")["log_r"].mean()).rename("ref_ratio")
    out = episodes[["key", "correct", "task"]].set_index("key").join(speed).join(ratio)
    out["n_timed"] = out["n_timed"].fillna(0).astype(int)
    correct = out["correct"].astype(bool)
    timed = np.isfinite(out["speedup_eager"])
    for col in ("speedup_eager", "speedup_compiled", "roofline", "ref_ratio"):
        out.loc[~correct, col] = math.nan  # a wrong kernel's speed means nothing
    level = pd.Series(math.nan, index=out.index)
    level[~correct] = 0.0
    level[correct & timed] = 1.0
    level[correct & timed & (out["speedup_eager"] > cfg.eager_threshold)] = 2.0
    level[correct & timed & (out["ref_ratio"] >= cfg.reference_fraction)] = 3.0
    out["perf_score"] = level
    for p in cfg.fast_p:
        col = pd.Series(0.0, index=out.index)
        if p <= 0:
            col[correct] = 1.0  # any measured speedup is > 0; untimed correct kernels count too
        else:
            col[correct & ~timed] = math.nan
            col[correct & timed & (out["speedup_eager"] > p)] = 1.0
        out[fast_name(p)] = col
    out["has_reference"] = out["task"].isin(set(refs["task"]))
    return out.drop(columns=["task"]).reset_index()
