"""The score result format and the metric registry (names, columns, how they average, how they print)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from d2kgrade.errors import UserError
from d2kgrade.metrics.perf import ScoreConfig, fast_name
from d2kgrade.schema import LEVELS

SCORE_RESULT_VERSION = 1


@dataclass(frozen=True)
class Metric:
    """One reported metric: the task-table column it averages and how."""

    name: str
    """Key in results (``correctness``, ``fast_1.5``...)."""
    column: str
    """Column of the per-task table."""
    kind: Literal["mean", "geomean"]
    """Arithmetic mean over tasks, or geometric mean (speedups)."""
    label: str
    """Human label."""
    fmt: Literal["pct", "num", "x", "score"]
    """How to print: percent of 1, plain number, a speedup ``1.23x``, a 0-100 score."""
    paired_on_correct: bool = False
    short: str = ""
    """Short label for narrow tables (the name when empty)."""
    """Speed metrics: in a guided/unguided comparison only tasks correct in both arms count."""


def metric_registry(cfg: ScoreConfig) -> list[Metric]:
    """Every metric ``d2kgrade score`` reports, in display order."""
    out = [
        Metric("correctness", "correct", "mean", "Correct", "pct", short="correct"),
        Metric("perf_score", "perf_score", "mean", "Performance Score (0-3)", "num", short="perf"),
        Metric("geomean_speedup_eager", "speedup_eager", "geomean", "Geomean speedup vs eager", "x", True,
               short="vs eager"),
        Metric("geomean_speedup_compiled", "speedup_compiled", "geomean", "Geomean speedup vs torch.compile",
               "x", True, short="vs compile"),
        *(Metric(fast_name(p), fast_name(p), "mean", f"fast_{p:g}", "pct") for p in cfg.fast_p),
        Metric("roofline_fraction", "roofline", "mean", "Fraction of roofline", "pct", True, short="roofline"),
        Metric("impl_score", "impl_score", "mean", "Implementation score (0-100)", "score", short="impl"),
        *(Metric(f"impl_{lv}", f"impl_{lv}", "mean", f"Implementation {lv} (% of level)", "score")
          for lv in LEVELS),
    ]
    for rate, label in (("proposed", "Proposed"), ("implemented", "Implemented"),
                        ("impl_without_proposed", "Implemented, not proposed"),
                        ("proposed_not_implemented", "Proposed, not implemented")):
        out += [Metric(f"{rate}_{lv}", f"{rate}_{lv}", "mean", f"{label} {lv}", "pct") for lv in LEVELS]
    return out


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Estimate(Record):
    """A metric of one arm, with a bootstrap interval over tasks."""

    value: float | None
    """Point estimate (None: undefined, e.g. no correct task)."""
    ci_low: float | None = None
    """Lower end of the percentile interval."""
    ci_high: float | None = None
    """Upper end."""
    n: int = 0
    """Model-task pairs that carry a value."""


class Delta(Record):
    """One metric in a paired comparison: both arms on the same tasks, and the difference."""

    baseline: float | None
    """The unguided arm's value on the paired tasks."""
    treatment: float | None
    """The guided arm's value on the same tasks."""
    delta: float | None
    """treatment - baseline."""
    ci_low: float | None = None
    """Lower end of the paired bootstrap interval of the delta."""
    ci_high: float | None = None
    """Upper end."""
    n: int = 0
    """Model-task pairs that enter (for speed metrics: correct in both arms)."""


class ArmSummary(Record):
    """Every metric of one model (or ``all``, pooled) in one arm, over the tasks it ran."""

    model: str
    """Model name, or ``all`` for model-task pairs pooled over models."""
    arm: str
    """Arm: ``unguided``, ``guided`` (all guidance), ``guided-L1``, ``guided-L1-L2`` or ``propose``."""
    n_tasks: int
    """Tasks with at least one episode."""
    n_episodes: int
    """Episodes."""
    metrics: dict[str, Estimate]
    """By metric name."""


class Comparison(Record):
    """A guided arm against the unguided arm of the same model, paired on tasks."""

    model: str
    """Model name or ``all``."""
    baseline: str
    """Always ``unguided``."""
    treatment: str
    """The guided arm."""
    n_pairs: int
    """Model-task pairs run in both arms."""
    metrics: dict[str, Delta]
    """By metric name."""


class TaskRow(Record):
    """One (model, arm, task): seeds aggregated."""

    model: str
    """Model."""
    arm: str
    """Arm."""
    task: str
    """Task id."""
    n_seeds: int
    """Episodes (seeds) aggregated."""
    values: dict[str, float | None]
    """Task-table columns (correct, perf_score, speedup_eager, ...)."""


class PropertyRow(Record):
    """How often one property was proposed and implemented, per model and arm."""

    model: str
    """Model."""
    arm: str
    """Arm."""
    task: str
    """Task id."""
    property_id: str
    """Property (guidance) id."""
    level: str
    """Its level."""
    proposed: float | None
    """Share of the episodes' design notes that proposed it."""
    implemented: float | None
    """Share of the episodes' kernels that implemented it."""
    n: int
    """Episodes graded."""


class StatusCount(Record):
    """How many episodes of one model and arm ended with one status (scored or not)."""

    model: str
    """Model."""
    arm: str
    """Arm (as in :class:`ArmSummary`)."""
    status: str
    """Episode status (``finished``, ``no_submission``, ``budget_exhausted``, ``api_failed``, ``failed``; empty for
    plain tables without one)."""
    n: int
    """Episodes."""
    scored: bool
    """False for statuses left out of every metric (``api_failed``, ``failed``: not outcomes of the agent)."""


class ScoreResult(Record):
    """The output of ``d2kgrade score``."""

    schema_version: Literal[1] = SCORE_RESULT_VERSION
    """Version of this format."""
    config: ScoreConfig
    """Settings that produced these numbers."""
    runs: list[str]
    """Run directories (or files) scored."""
    proposal_rater: str | None
    """Rater whose design-note grades gave the proposed rates (None: no proposal grades)."""
    arms: list[ArmSummary]
    """Per model and arm."""
    comparisons: list[Comparison]
    """Guided minus unguided, per model (and pooled)."""
    tasks: list[TaskRow]
    """Per model, arm and task."""
    properties: list[PropertyRow]
    """Per model, arm and property."""
    reference_speedup: dict[str, float]
    """Geomean speedup over eager of the expert reference, per task (where a reference run was given)."""
    warnings: list[str]
    """Things a reader of these numbers must know (untimed episodes, missing references or grades, episodes left
    out, or why there is nothing to score)."""
    episode_statuses: list[StatusCount] = []
    """Every agent episode's status, counted per model and arm, the unscored ones included. ``arms`` is empty when
    no episode could be scored (an empty run, or every episode failed on the API); these counts say why."""


class NothingToScore(UserError):
    """No agent episode has an outcome to score (an empty run, only references, every episode failed on the API).

    The message is one sentence saying why; :attr:`result` is the (armless) result with the episode statuses, for
    a report that says what is missing.
    """

    def __init__(self, message: str, result: ScoreResult) -> None:
        super().__init__(message)
        self.result = result
