"""The error hierarchy: one base class, a few subclasses, caught once by the CLI.

Outcomes of a kernel (it failed to compile, crashed, was wrong) are *values* in result records, never
exceptions. Exceptions are for the program's own faults and for a user's mistakes: those raised as
:class:`D2KError` subclasses are printed by the CLI as one clear line with exit code 1, no traceback.
"""

from __future__ import annotations

from dataclasses import dataclass


class D2KError(Exception):
    """Base class of every error d2kgrade raises on purpose."""


class UserError(D2KError):
    """A user's mistake: a missing file, an unknown task id, a bad option value."""


class MissingDependencyError(UserError):
    """An optional dependency is not installed; the message names the extra that brings it."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(
            f"this needs the Python module '{module}', which is not installed; "
            f"install it with: pip install 'd2kgrade[{extra}]'"
        )
        self.module = module
        self.extra = extra


@dataclass(frozen=True)
class Problem:
    """One problem found in one file: where it is, and what was expected there."""

    file: str
    """Path of the file the problem is in."""
    where: str
    """Dotted field path inside the file (``workloads.2.params.M``), or '' for the file as a whole."""
    message: str
    """What is wrong and what was expected."""

    def __str__(self) -> str:
        loc = f"{self.file}: {self.where}" if self.where else self.file
        return f"{loc}: {self.message}"


class SpecError(UserError):
    """A task, rubric or other spec file is invalid. Carries every problem found, one line each."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))
