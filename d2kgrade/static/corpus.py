"""Accuracy of the static rater against a hand-labelled corpus (``tests/static/corpus/<task>/labels.yaml``).

A corpus folder holds kernel variants of one task (files, or folders holding a multi-file submission whose entry
point is ``kernel.py``) and ``labels.yaml``::

    task: softmax
    variants:
      naive_three_pass.py:
        what: naive (three passes)
        labels: {softmax.L1.online-normalizer: absent, ...}   # every property of the rubric

:func:`evaluate` grades every variant with the task's rubric and counts, per property and per level, how the
static verdicts agree with the labels (``present`` is the positive class; ``unknown`` counts as a miss either way).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from d2kgrade.errors import Problem, SpecError
from d2kgrade.io import load_yaml
from d2kgrade.schema import Rubric, Task
from d2kgrade.static.grade import grade_file


@dataclass
class Tally:
    """Confusion counts of one property (or level)."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0
    unknown: int = 0
    """Variants labelled absent that were graded unknown (labelled-present unknowns count in ``fn``)."""
    errors: list[str] = field(default_factory=list)
    """``variant: expected X, got Y`` for every disagreement."""

    def add(self, expected: str, got: str, where: str) -> None:
        if expected == "present":
            if got == "present":
                self.tp += 1
            else:
                self.fn += 1  # absent or unknown: a miss
        elif got == "present":
            self.fp += 1
        elif got == "unknown":
            self.unknown += 1  # not a false positive, but not a correct answer either
        else:
            self.tn += 1
        if (expected == "present") != (got == "present") or got == "unknown":
            self.errors.append(f"{where}: labelled {expected}, graded {got}")

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.tn + self.fn + self.unknown

    @property
    def accuracy(self) -> float:
        return (self.tp + self.tn) / self.n if self.n else float("nan")

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else float("nan")

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else float("nan")

    def as_dict(self) -> dict[str, Any]:
        def r(x: float) -> float | None:
            return None if x != x else round(x, 4)

        return {"n": self.n, "tp": self.tp, "fp": self.fp, "tn": self.tn, "fn": self.fn, "unknown": self.unknown,
                "accuracy": r(self.accuracy), "precision": r(self.precision), "recall": r(self.recall),
                "errors": list(self.errors)}


ENTRY = "kernel.py"
"""The entry point of a folder variant (a multi-file submission)."""


def grade_variant(rubric: Rubric, path: Path, task: Task | None = None) -> Any:
    """The static grade of one variant: a file, or a folder graded through its entry point; with ``task``, as
    ``d2kgrade judge`` grades it (each property on the paths serving the catalog workloads it concerns)."""
    return grade_file(rubric, path / ENTRY if path.is_dir() else path, task=task)


def variant_verdicts(suite: Any, variant: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The hand labels and the static verdicts (graded with the task) of one labelled variant
    ``<corpus>/<task>/<name>``: the pair a case test compares. ``suite``: a :class:`d2kgrade.suite.Suite`.

    Raises:
        SpecError: the folder's labels do not load or do not name the variant; AssertionError: the file could not
            be analysed (a case must be gradable).
    """
    folder, name = variant.parent, variant.name
    rubric, task = suite.load_rubric(folder.name), suite.load_task(folder.name)
    labels = load_labels(folder, rubric)
    if name not in labels:
        raise SpecError([Problem(str(folder / "labels.yaml"), f"variants.{name}", "not labelled")])
    fg = grade_variant(rubric, variant, task)
    assert not fg.error, f"{variant}: {fg.error}"
    return labels[name], {g.property_id: g.verdict for g in fg.properties}


def load_labels(folder: Path, rubric: Rubric) -> dict[str, dict[str, str]]:
    """Labels of a corpus folder: variant file name -> property id -> ``present``/``absent``; checked against the
    rubric (every active property labelled, no unknown ids, files exist)."""
    path = folder / "labels.yaml"
    data = load_yaml(path)
    problems = []
    if data.get("task") != rubric.task:
        problems.append(Problem(str(path), "task", f"is {data.get('task')!r}, expected {rubric.task!r}"))
    ids = {p.id for p in rubric.properties if not p.deprecated}
    out: dict[str, dict[str, str]] = {}
    for name, entry in (data.get("variants") or {}).items():
        labels = (entry or {}).get("labels") or {}
        variant = folder / name
        if not (variant.is_file() or (variant / ENTRY).is_file()):
            problems.append(Problem(str(path), f"variants.{name}", f"no such file (or folder holding {ENTRY})"))
        missing = sorted(ids - set(labels))
        extra = sorted(set(labels) - ids)
        bad = sorted(k for k, v in labels.items() if v not in ("present", "absent"))
        if missing:
            problems.append(Problem(str(path), f"variants.{name}.labels", f"missing {missing}"))
        if extra:
            problems.append(Problem(str(path), f"variants.{name}.labels", f"not rubric properties: {extra}"))
        if bad:
            problems.append(Problem(str(path), f"variants.{name}.labels", f"labels must be present/absent: {bad}"))
        out[name] = dict(labels)
    if problems:
        raise SpecError(problems)
    return out


def evaluate(folder: Path, rubric: Rubric, task: Task | None = None) -> dict[str, Any]:
    """Grade every labelled variant of ``folder`` (with ``task``, as the CLI does) and tally agreement per
    property and per level."""
    labels = load_labels(folder, rubric)
    levels = {p.id: p.level for p in rubric.properties}
    per_prop: dict[str, Tally] = {pid: Tally() for pid in levels if pid in next(iter(labels.values()), {})}
    per_level: dict[str, Tally] = {}
    verdicts: dict[str, dict[str, str]] = {}
    for name, lab in sorted(labels.items()):
        fg = grade_variant(rubric, folder / name, task)
        got = {pg.property_id: pg.verdict for pg in fg.properties}
        verdicts[name] = got
        for pid, expected in lab.items():
            where = f"{rubric.task}/{name} {pid}"
            per_prop.setdefault(pid, Tally()).add(expected, got.get(pid, "unknown"), where)
            per_level.setdefault(levels[pid], Tally()).add(expected, got.get(pid, "unknown"), where)
    return {"task": rubric.task, "variants": len(labels), "verdicts": verdicts,
            "properties": {k: v.as_dict() for k, v in per_prop.items()},
            "levels": {k: v.as_dict() for k, v in sorted(per_level.items())}}
