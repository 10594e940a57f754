"""``d2kgrade tasks list | show | validate``."""

from __future__ import annotations

from pathlib import Path

import typer

from d2kgrade.cli._common import JsonOption, SuiteOption, err_console, open_suite, print_error, print_json, print_table
from d2kgrade.errors import UserError

tasks_app = typer.Typer(help="List, show and validate the suite's tasks.", no_args_is_help=True)


@tasks_app.command("list")
def list_tasks(suite: Path = SuiteOption, as_json: bool = JsonOption) -> None:
    """One line per task: id, category, bound, workloads, guidance items per level."""
    from rich.table import Table

    from d2kgrade.schema import LEVELS

    s = open_suite(suite)
    rows = []
    for tid in s.task_ids:
        t = s.load_task(tid)
        per_level = {lv: sum(1 for g in t.active_guidance() if g.level == lv) for lv in LEVELS}
        rows.append({"id": t.id, "title": t.title, "category": t.category, "bound": t.bound,
                     "workloads": [w.name for w in t.workloads], "guidance": per_level})
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"{len(rows)} tasks in {s.root}")
    for col in ("id", "category", "bound", "workloads", "L1", "L2", "L3"):
        table.add_column(col, justify="right" if col in LEVELS else "left")
    for r in rows:
        table.add_row(r["id"], r["category"], r["bound"], ", ".join(r["workloads"]),
                      *(str(r["guidance"][lv]) for lv in LEVELS))
    print_table(table)


@tasks_app.command("show")
def show(
    task_id: str = typer.Argument(..., help="Task id."),
    guidance: str = typer.Option("none", "--guidance", help="Arm: none | L1 | L1-L2 | all."),
    suite: Path = SuiteOption,
    as_json: bool = JsonOption,
) -> None:
    """Exactly what an agent is shown in the given guidance arm."""
    from d2kgrade.schema import GUIDANCE_ARMS, render_task

    if guidance not in GUIDANCE_ARMS:
        raise UserError(f"--guidance must be one of {', '.join(GUIDANCE_ARMS)}, got {guidance!r}")
    task = open_suite(suite).load_task(task_id)
    text = render_task(task, guidance)
    if as_json:
        print_json({"task": task.id, "guidance": guidance, "prompt": text,
                    "baselines": [c.model_dump(mode="json") for c in task.baseline_candidates()]})
    else:
        typer.echo(text)


@tasks_app.command("validate")
def validate(
    task_ids: list[str] = typer.Argument(None, help="Task ids (default: all)."),
    suite: Path = SuiteOption,
    as_json: bool = JsonOption,
) -> None:
    """Check tasks, rubrics and references; one line per problem, exit code 1 if any."""
    from d2kgrade.validate import validate_suite

    s = open_suite(suite)
    results = validate_suite(s, task_ids)
    n_bad = sum(1 for p in results.values() if p)
    if as_json:
        print_json({tid: [{"file": p.file, "where": p.where, "message": p.message} for p in probs]
                    for tid, probs in results.items()})
    else:
        for tid, probs in results.items():
            for p in probs:
                print_error(p)
        mark = "[green]ok[/green]" if not n_bad else f"[red]{n_bad} of {len(results)} tasks invalid[/red]"
        err_console.print(f"validated {len(results)} tasks in {s.root}: {mark}")
    if n_bad:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")
