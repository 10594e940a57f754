"""A suite on disk: ``tasks/<id>/{task.yaml,reference.py}``, ``rubrics/<id>.yaml``, ``references/<id>/*.py``.

Loading never imports the task's Python files: the grading side must work without torch. Files are parsed
(YAML) and validated; Python files are only checked syntactically by :mod:`d2kgrade.validate`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from d2kgrade.errors import Problem, SpecError, UserError
from d2kgrade.io import load_model
from d2kgrade.schema import TASK_ID_RE, Rubric, Task

REFERENCE_LANGUAGES = ("triton", "cuda")


@dataclass(frozen=True)
class Suite:
    """A suite rooted at ``root``."""

    root: Path

    def __post_init__(self) -> None:
        if not (self.root / "tasks").is_dir():
            raise UserError(f"{self.root}: not a suite (no tasks/ folder); pass --suite DIR or set D2KGRADE_SUITE")

    @cached_property
    def task_ids(self) -> list[str]:
        """Ids of the task folders, sorted (folders without task.yaml are ignored).

        A ``task.yaml`` that is there but unreadable (a FIFO, a link to itself) keeps its task in the list, so
        loading it fails with a message naming the file instead of the task vanishing silently.
        """
        return sorted(p.name for p in (self.root / "tasks").iterdir()
                      if p.is_dir() and os.path.lexists(p / "task.yaml"))

    def task_dir(self, task_id: str) -> Path:
        """Folder of a task."""
        return self.root / "tasks" / task_id

    def task_path(self, task_id: str) -> Path:
        """``tasks/<id>/task.yaml``."""
        return self.task_dir(task_id) / "task.yaml"

    def reference_py(self, task_id: str) -> Path:
        """``tasks/<id>/reference.py``: exact semantics, baseline and input maker."""
        return self.task_dir(task_id) / "reference.py"

    def rubric_path(self, task_id: str) -> Path:
        """``rubrics/<id>.yaml``."""
        return self.root / "rubrics" / f"{task_id}.yaml"

    def reference_kernels(self, task_id: str) -> dict[str, Path]:
        """Expert reference kernels that exist, by language (``triton``, ``cuda``); an unreadable one (a FIFO, a
        broken link) is listed too, and validation says what is wrong with it."""
        folder = self.root / "references" / task_id
        return {lang: folder / f"{lang}.py" for lang in REFERENCE_LANGUAGES if os.path.lexists(folder / f"{lang}.py")}

    def check_id(self, task_id: str) -> str:
        """Return ``task_id`` if the suite has it, else raise UserError listing the known ids."""
        if task_id not in self.task_ids:
            if not TASK_ID_RE.match(task_id):
                raise UserError(f"{task_id!r} is not a task id (expected snake_case, e.g. 'softmax')")
            raise UserError(f"unknown task {task_id!r}; known tasks: {', '.join(self.task_ids) or '(none)'}")
        return task_id

    def load_task(self, task_id: str) -> Task:
        """Load and validate a task. Raises SpecError (bad file) or UserError (unknown id)."""
        path = self.task_path(self.check_id(task_id))
        task = load_model(Task, path)
        if task.id != task_id:
            raise SpecError([Problem(str(path), "id", f"is {task.id!r} but the folder is {task_id!r}")])
        return task

    def load_rubric(self, task_id: str) -> Rubric:
        """Load and validate a task's rubric."""
        path = self.rubric_path(self.check_id(task_id))
        rubric = load_model(Rubric, path)
        if rubric.task != task_id:
            raise SpecError([Problem(str(path), "task", f"is {rubric.task!r} but the file is for {task_id!r}")])
        return rubric

    def resolve_ids(self, ids: list[str] | None) -> list[str]:
        """``None``, ``[]`` or ``['all']`` mean every task; otherwise check each id."""
        if not ids or ids == ["all"]:
            return list(self.task_ids)
        return [self.check_id(i) for i in ids]


def load_rubric_file(path: Path) -> Rubric:
    """Load a rubric from an explicit path (``judge --rubric FILE``)."""
    return load_model(Rubric, path)
