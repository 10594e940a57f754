"""Grade records: per-property verdicts with evidence, and the 0-100 implementation score.

Every rater (static analysis, the LLM judge, their fusion, a person) produces :class:`PropertyGrade` records;
:func:`implementation_score` turns one rater's verdicts on one file into the rubric's 0-100 score. Agreement
studies join grades on ``(item, property_id)``.

Score rule (versioned as :data:`SCORE_RULE_VERSION`): within each level, the score is the weight-share of the
level's properties that are present; the level contributes ``level_weights[level]`` times that share. A level
with no gradable property gives its points pro rata to the others. ``unknown`` verdicts count as absent in the
score and are reported separately (``n_unknown``), so a score never silently rests on guesses. With
``gating=True`` a property counts only if every property it depends on is present too.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from d2kgrade.schema import LEVELS, Level, Rubric, Task

Verdict = Literal["present", "absent", "unknown"]
RaterKind = Literal["static", "llm", "combined", "human"]
SCORE_RULE_VERSION = 1


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Evidence(Record):
    """A span of the graded file that supports a verdict."""

    file: str
    """Path of the file."""
    start_line: int
    """First line (1-based)."""
    end_line: int
    """Last line (inclusive)."""
    code: str
    """The code at those lines (verbatim, possibly trimmed)."""
    note: str = ""
    """What this span shows."""


class PropertyGrade(Record):
    """One rater's verdict on one design property of one file (or design note)."""

    property_id: str
    """Guidance/property id."""
    level: Level
    """Its level."""
    verdict: Verdict
    """present / absent / unknown (the rater could not tell: unparseable file, split vote, no checks...)."""
    confidence: float = 1.0
    """0-1: how sure the rater is."""
    rater: RaterKind
    """Who decided."""
    evidence: list[Evidence] = []
    """Spans that support the verdict."""
    reason: str = ""
    """Why, in words."""
    details: dict[str, object] = {}
    """Rater-specific data (check results, votes, the judge's raw verdicts...)."""


class LevelScore(Record):
    """Score of one level."""

    level: Level
    """L1, L2 or L3."""
    points: float
    """Points earned in this level."""
    max_points: float
    """Points this level is worth (after redistribution of empty levels)."""
    n_present: int
    """Properties present."""
    n_total: int
    """Gradable properties."""


class FileGrade(Record):
    """All of one rater's verdicts on one file, and the resulting score."""

    schema_version: Literal[1] = 1
    """Version of this format."""
    file: str
    """Graded file (or design note)."""
    item: str = ""
    """Id of the graded item where there is one (the episode id for a run's kernels and design notes)."""
    task: str
    """Task id of the rubric."""
    rubric_version: int
    """Rubric version used."""
    rater: RaterKind
    """Who graded."""
    kind: Literal["code", "proposal"] = "code"
    """A kernel, or a design note graded for what it proposes."""
    properties: list[PropertyGrade]
    """One grade per rubric property."""
    score: float
    """0-100 implementation score."""
    levels: list[LevelScore]
    """Per-level breakdown."""
    n_unknown: int = 0
    """Properties whose verdict is unknown (counted as absent in the score)."""
    score_rule_version: int = SCORE_RULE_VERSION
    """Version of the score rule."""
    gating: bool = False
    """Dependency gating applied."""
    error: str = ""
    """Why the file could not be graded (parse failure...), where it could not."""
    fusion_rule_version: int | None = None
    """Version of the static + judge fusion rule (``docs/scoring.md``); set on combined grades only."""
    rater_info: dict[str, object] = {}
    """What produced the grade, for reproducing it: for the LLM judge the model, base URL, prompt template
    hash, samples and decoding settings; for combined grades the fusion weights."""


def implementation_score(rubric: Rubric, grades: list[PropertyGrade], *, task: Task | None = None,
                         gating: bool = False) -> tuple[float, list[LevelScore]]:
    """The 0-100 score of ``grades`` under ``rubric`` (see the module docstring for the rule).

    Args:
        rubric: the rubric (weights, level points).
        grades: one grade per property; properties without a grade count as absent.
        task: needed for ``gating`` (the dependency graph lives in the task's guidance).
        gating: count a property only when all it depends on is present.
    """
    by_id = {g.property_id: g for g in grades}
    present = {pid for pid, g in by_id.items() if g.verdict == "present"}
    if gating:
        if task is None:
            raise ValueError("gating needs the task (its guidance holds the dependencies)")
        deps = {g.id: g.depends_on for g in task.guidance}
        changed = True
        while changed:  # a property whose dependency is absent is itself absent, transitively
            changed = False
            for pid in list(present):
                if any(d not in present for d in deps.get(pid, [])):
                    present.discard(pid)
                    changed = True
    props = [p for p in rubric.properties if not p.deprecated]
    active_levels = [lv for lv in LEVELS if any(p.level == lv for p in props)]
    total_pts = sum(rubric.level_weights[lv] for lv in active_levels) or 1.0
    levels: list[LevelScore] = []
    score = 0.0
    for lv in LEVELS:
        in_level = [p for p in props if p.level == lv]
        max_pts = 100.0 * rubric.level_weights[lv] / total_pts if in_level else 0.0
        wsum = sum(p.weight for p in in_level)
        got = sum(p.weight for p in in_level if p.id in present)
        pts = max_pts * got / wsum if wsum else 0.0
        score += pts
        levels.append(LevelScore(level=lv, points=pts, max_points=max_pts,
                                 n_present=sum(1 for p in in_level if p.id in present), n_total=len(in_level)))
    return score, levels


def file_grade(rubric: Rubric, file: str, rater: RaterKind, grades: list[PropertyGrade], *,
               kind: Literal["code", "proposal"] = "code", task: Task | None = None, gating: bool = False,
               error: str = "", item: str = "") -> FileGrade:
    """Bundle grades into a :class:`FileGrade` with its score."""
    score, levels = implementation_score(rubric, grades, task=task, gating=gating)
    return FileGrade(file=file, item=item, task=rubric.task, rubric_version=rubric.version, rater=rater, kind=kind,
                     properties=grades, score=score, levels=levels,
                     n_unknown=sum(1 for g in grades if g.verdict == "unknown"), gating=gating, error=error)
