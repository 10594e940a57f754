"""Shared CLI plumbing: consoles that survive a pipe, the --suite and --json options, JSON output, tables.

Output that survives a pipe: on a terminal, rich fits tables to the window; piped into a file or another
program (``d2kgrade score RUN | less``, CI logs), :data:`console` and :data:`err_console` are wide
(:data:`PIPE_WIDTH` columns, ``COLUMNS`` still wins when set) and :func:`print_table` prints a table at its
natural width, so no column is squeezed out and no number ends in an ellipsis. Command modules print tables
with :func:`print_table`, JSON with :func:`print_json`, and nothing heavier than ``rich.console`` is imported
at start-up (``rich.table`` and the like inside the commands).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console, ConsoleDimensions

from d2kgrade.config import load_settings
from d2kgrade.errors import require_extra

if TYPE_CHECKING:
    from rich.console import RenderableType

    from d2kgrade.suite import Suite

PIPE_WIDTH = 10_000
"""Width of a console whose stream is not a terminal: wide enough that no table of ours is cut."""


class PipeAwareConsole(Console):
    """A rich Console that is :data:`PIPE_WIDTH` wide when its stream is not a terminal.

    Plain rich takes the width of whichever standard stream is a terminal (stderr, when stdout is piped) or 80,
    and squeezes tables to it.
    """

    @property
    def size(self) -> ConsoleDimensions:
        if self._width is None and not self.is_terminal and not os.environ.get("COLUMNS"):
            return ConsoleDimensions(PIPE_WIDTH, super().size.height)
        return super().size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


console = PipeAwareConsole(highlight=False)
err_console = PipeAwareConsole(stderr=True, highlight=False)

SuiteOption = typer.Option(
    None, "--suite", help="Suite root (holds tasks/, rubrics/, references/). Env: D2KGRADE_SUITE.",
    show_default=False,
)
JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON instead of a table.")


def open_suite(suite: Path | None) -> Suite:
    """The suite chosen by flag, environment, config file or default."""
    from d2kgrade.suite import Suite

    return Suite(load_settings(suite=suite).suite)


def print_json(data: Any) -> None:
    """Print JSON to stdout, unstyled (safe for piping)."""
    typer.echo(json.dumps(data, indent=2, default=str))


def print_table(table: RenderableType, *, out: Console | None = None) -> None:
    """Print a rich table: fitted to a terminal, at its full natural width when the stream is piped.

    Every CLI module should print its tables through this, so ``d2kgrade ... > file`` keeps every column and
    every digit.
    """
    from rich.measure import Measurement

    out = out or console
    if out.is_terminal or os.environ.get("COLUMNS"):
        out.print(table)
        return
    natural = Measurement.get(out, out.options.update(width=PIPE_WIDTH), table).maximum
    out.print(table, width=max(natural, 1))



def print_error(message: object) -> None:
    """``error: MESSAGE`` on stderr, one line; the message is printed literally (``d2kgrade[gpu]`` is not markup)."""
    from rich.markup import escape

    err_console.print(f"[red]error:[/red] {escape(str(message))}", highlight=False, soft_wrap=True)


def print_warning(message: object) -> None:
    """``warning: MESSAGE`` on stderr, printed literally."""
    from rich.markup import escape

    err_console.print(f"[yellow]warning:[/yellow] {escape(str(message))}", highlight=False, soft_wrap=True)
