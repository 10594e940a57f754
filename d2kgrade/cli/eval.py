"""``d2kgrade eval TASK SUBMISSION.py``: evaluate one submission in the sandbox (the runner does the work)."""

from __future__ import annotations

from pathlib import Path

import typer

from d2kgrade.cli._common import (JsonOption, SuiteOption, console, err_console, open_suite, print_json, print_table,
                                  require_extra)
from d2kgrade.config import load_settings
from d2kgrade.errors import UserError


def _fmt_ms(x: float | None) -> str:
    return "-" if x is None else (f"{x * 1e3:.1f} us" if x < 1 else f"{x:.3f} ms")


def _fmt_x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def eval_command(
    task_id: str = typer.Argument(..., help="Task id."),
    submission: Path = typer.Argument(..., help="Python file defining kernel(...)."),
    device: str = typer.Option(None, "--device", help="cuda, cuda:N or cpu (default: cuda when present)."),
    workloads: list[str] = typer.Option(["all"], "--workloads", "-w",
                                        help="all | smoke | NAME (repeat or comma-separate for several)."),
    seed: int = typer.Option(None, "--seed", help="Fix the per-run seed (default: a fresh secret one)."),
    timeout: float = typer.Option(None, "--timeout", help="Wall limit in seconds (default 300 cpu / 1200 cuda)."),
    no_hidden: bool = typer.Option(False, "--no-hidden", help="Skip the per-run hidden workload."),
    no_timing: bool = typer.Option(False, "--no-timing", help="Correctness only."),
    suite: Path = SuiteOption,
    as_json: bool = JsonOption,
) -> None:
    """Run SUBMISSION on TASK: correctness on every workload (hidden one included), timing against eager and
    torch.compile, roofline fraction. Exit 0 whatever the kernel did; 1 for your own mistakes and task faults."""
    from rich.markup import escape
    from rich.table import Table

    from d2kgrade.errors import MissingDependencyError
    from d2kgrade.io import regular_file_problem
    from d2kgrade.validate import check_task_evaluable

    require_extra(("torch", "triton"), "gpu")
    try:
        from runner.evaluate import evaluate
    except ImportError as exc:
        raise MissingDependencyError(exc.name or "torch", "gpu") from None

    problem = regular_file_problem(submission)
    if problem:
        raise UserError(f"{submission}: {problem}")
    root = load_settings(suite=suite).suite
    if seed is not None and seed < 0:
        raise UserError("--seed must be >= 0")
    check_task_evaluable(open_suite(suite), task_id)
    result = evaluate(task_id, submission, suite_root=root, device=device, workloads=workloads, seed=seed,
                      timeout_s=timeout, hidden=not no_hidden, timing=not no_timing)
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    color = "green" if result.status == "passed" else "red"
    table = Table(title=f"{result.task}: [{color}]{result.status}[/{color}]  ({result.wall_s:.1f} s)")
    for col in ("workload", "status", "trials", "max rel err", "time", "eager", "compile", "vs eager",
                "vs compile", "roofline"):
        table.add_column(col, justify="left" if col in ("workload", "status") else "right")
    for w in result.workloads:
        rel = max((e.max_rel_err for e in w.errors), default=None)
        roof = "-" if w.roofline_fraction is None else f"{100 * w.roofline_fraction:.0f}%"
        table.add_row(w.name, w.status, str(w.trials),
                      "-" if rel is None else f"{rel:.2e}",
                      _fmt_ms(w.time.median_ms if w.time else None), _fmt_ms(w.eager.median_ms if w.eager else None),
                      _fmt_ms(w.compiled.median_ms if w.compiled else None), _fmt_x(w.speedup_eager),
                      _fmt_x(w.speedup_compiled), roof)
    print_table(table)
    for f in result.flags:
        err_console.print(f"[{'red' if f.severity == 'reject' else 'yellow'}]{f.code}[/]: {escape(f.message)}",
                          highlight=False, soft_wrap=True)
    env = result.environment
    console.print(f"{result.message}\n[dim]{env.device}"
                  + (f" {env.gpu} driver {env.driver}" if env.gpu else "")
                  + f", torch {env.torch}, triton {env.triton}, seed hash {result.seed_hash}[/dim]",
                  highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
