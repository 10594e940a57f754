"""The error hierarchy: one base class, a few subclasses, caught once by the CLI.

Outcomes of a kernel (it failed to compile, crashed, was wrong) are *values* in result records, never
exceptions. Exceptions are for the program's own faults and for a user's mistakes: those raised as
:class:`D2KError` subclasses are printed by the CLI as one clear line with exit code 1, no traceback.
"""

from __future__ import annotations

import importlib.util
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


def require_extra(modules: tuple[str, ...], extra: str) -> None:
    """Raise :class:`MissingDependencyError` (one line: what to install) if one of ``modules`` is not installed.

    Looks the modules up without importing them (importing torch costs seconds).
    """
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a broken install, or sys.modules[name] = None
            found = False
        if not found:
            raise MissingDependencyError(name, extra)


class RunStoreError(UserError):
    """A run directory cannot be used as it is: its store is empty, garbled or foreign, or another process is
    writing it. Raised before anything is written."""


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


class Terminated(BaseException):
    """The process got SIGTERM or SIGHUP: unwinds like KeyboardInterrupt (cleanup runs), never caught as an error.

    A BaseException, so ``except Exception`` handlers let it through, as they do KeyboardInterrupt.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum
