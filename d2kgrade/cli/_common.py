"""Shared CLI plumbing: consoles, the --suite and --json options, JSON output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from d2kgrade.config import load_settings
from d2kgrade.suite import Suite

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

SuiteOption = typer.Option(
    None, "--suite", help="Suite root (holds tasks/, rubrics/, references/). Env: D2KGRADE_SUITE.",
    show_default=False,
)
JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON instead of a table.")


def open_suite(suite: Path | None) -> Suite:
    """The suite chosen by flag, environment, config file or default."""
    return Suite(load_settings(suite=suite).suite)


def print_json(data: Any) -> None:
    """Print JSON to stdout, unstyled (safe for piping)."""
    typer.echo(json.dumps(data, indent=2, default=str))
