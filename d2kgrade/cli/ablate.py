"""``d2kgrade ablate TASK FILE`` / ``d2kgrade ablate --run RUN_DIR``: which design properties carry the speed.

The work is :mod:`d2kgrade.ablate.driver`; the evaluator (torch, triton) is imported inside the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from d2kgrade.cli._common import JsonOption, SuiteOption, console, err_console, open_suite, print_json, print_table
from d2kgrade.errors import UserError

if TYPE_CHECKING:
    from d2kgrade.ablate.results import AblationRecord
    from d2kgrade.suite import Suite


def _fmt(r: AblationRecord) -> tuple[str, str, str]:
    sd, lo, hi, noise = (getattr(r, k) for k in ("slowdown", "ci_low", "ci_high", "noise_pct"))
    slow = "-" if sd is None else f"{sd:.3f}x" + ("*" if r.estimated_from_reference else "")
    ci = "-" if lo is None else f"[{lo:.3f}, {hi:.3f}]"
    return slow, ci, "-" if noise is None else f"{noise:.2f}%"


def _render(records: list[AblationRecord], title: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    colors = {"load_bearing": "green", "not_load_bearing": "white", "broke_correctness": "red",
              "no_transform": "dim", "untimed": "yellow", "not_present": "dim"}
    table = Table(title=title)
    for col in ("episode", "property", "transform", "status", "slowdown", "95% CI", "noise", "message"):
        table.add_column(col, justify="right" if col in ("slowdown", "95% CI", "noise") else "left")
    for r in records:
        slow, ci, noise = _fmt(r)
        c = colors.get(r.status, "white")
        table.add_row(escape(r.episode), r.property.split(".", 1)[1], r.transform or "-", f"[{c}]{r.status}[/{c}]",
                      slow, ci, noise, escape(r.message[:100]))
    print_table(table)
    if any(r.estimated_from_reference for r in records):
        console.print("[dim]* estimated from the expert reference's ablation (the kernel lacks the property)[/dim]")


def _coverage(the_suite: Suite, as_json: bool) -> None:
    import dataclasses

    from rich.markup import escape

    from d2kgrade.ablate.coverage import counts, coverage

    rows = coverage(the_suite)
    if as_json:
        print_json({"counts": counts(rows), "properties": [dataclasses.asdict(r) for r in rows]})
        return
    for r in rows:
        what = "+".join(r.transforms) if r.transforms else f"none ({r.category}): {r.reason}"
        console.print(f"{r.property}: {escape(what)}", soft_wrap=True, highlight=False)
    console.print(", ".join(f"{k} {v}" for k, v in counts(rows).items()), highlight=False)


def ablate_command(
    task_id: str = typer.Argument(None, help="Task id (with FILE)."),
    submission: Path = typer.Argument(None, help="Kernel file defining kernel(...) (with TASK)."),
    run_dir: Path = typer.Option(None, "--run", help="A run directory: ablate every episode's final kernel and "
                                                     "each task's reference into RUN_DIR/ablations.jsonl."),
    properties: list[str] = typer.Option(None, "--properties", "-p",
                                         help="Only these properties (ids, or ids without the task prefix)."),
    device: str = typer.Option(None, "--device", help="cuda or cpu (default: cuda when present). CPU: "
                                                      "correctness only."),
    reps: int = typer.Option(5, "--reps", min=2, help="Interleaved timing rounds on cuda."),
    workloads: list[str] = typer.Option(["all"], "--workloads", "-w", help="Workloads to time (all | NAME...)."),
    seed: int = typer.Option(None, "--seed", help="Fix the evaluation seed."),
    timeout: float = typer.Option(None, "--timeout", help="Wall limit of each evaluation, in seconds."),
    out: Path = typer.Option(None, "--out", help="Also append the records to this JSONL file (TASK FILE mode)."),
    keep: Path = typer.Option(None, "--keep", help="Keep the ablated variants in this folder."),
    no_references: bool = typer.Option(False, "--no-references", help="--run: skip the expert references (no "
                                                                     "estimates for missing properties)."),
    list_transforms: bool = typer.Option(False, "--list", help="List the transforms and exit."),
    show_coverage: bool = typer.Option(False, "--coverage", help="List every rubric property's ablation (its "
                                                                 "transforms, or why it has none) and exit."),
    suite: Path = SuiteOption,
    as_json: bool = JsonOption,
) -> None:
    """Remove each design property the static rater finds in a kernel (a libcst codemod per property), check
    the variant still passes the evaluator, and on cuda time the original and every variant in interleaved
    rounds: slowdown when removed, 95% bootstrap interval, load-bearing when above the measured noise."""
    if show_coverage:
        _coverage(open_suite(suite), as_json)
        return
    if list_transforms:
        from d2kgrade.ablate.registry import describe

        rows = describe()
        if as_json:
            print_json(rows)
            return
        from rich.markup import escape

        for row in rows:
            args = ", ".join(f"{k}={v!r}" for k, v in row["args"].items())
            console.print(f"[bold]{row['transform']}[/bold] ({row['family']}; {escape(args or 'no args')}): "
                          f"{escape(row['doc'])}", soft_wrap=True)
        return
    from d2kgrade.ablate.driver import AblateConfig, Subject, ablate_kernel, ablate_run
    from d2kgrade.ablate.results import REFERENCE_PREFIX, append_record

    the_suite = open_suite(suite)
    if seed is not None and seed < 0:
        raise UserError("--seed must be >= 0")
    config = AblateConfig(device=device, rounds=reps, workloads=workloads if workloads != ["all"] else "all",
                          seed=seed, timeout_s=timeout, suite_root=the_suite.root)

    def progress(msg: str) -> None:
        if not as_json:
            err_console.print(f"[dim]{msg}[/dim]", highlight=False, soft_wrap=True)

    if run_dir is not None:
        if task_id or submission:
            raise UserError("give either TASK FILE or --run RUN_DIR, not both")
        records = ablate_run(run_dir, the_suite, config, references=not no_references, progress=progress,
                             properties=properties or None)
        title = f"{run_dir}: {len(records)} ablation records"
    else:
        if not task_id or submission is None:
            raise UserError("give TASK FILE (a task id and a kernel file) or --run RUN_DIR")
        if task_id not in the_suite.task_ids:
            raise UserError(f"unknown task {task_id!r}; see `d2kgrade tasks list`")
        ref = the_suite.reference_kernels(task_id).get("triton")
        episode = REFERENCE_PREFIX + task_id if ref and ref.resolve() == submission.resolve() else str(submission)
        subject = Subject(task_id, submission, episode, arm="reference" if episode.startswith(REFERENCE_PREFIX)
                          else None)
        records = ablate_kernel(subject, the_suite, config, properties=properties or None, work_dir=keep,
                                progress=progress)
        if out is not None:
            for r in records:
                append_record(out, r)
        title = f"{task_id}: {submission}"
    if as_json:
        print_json([r.model_dump(mode="json") for r in records])
        return
    _render(records, title)


def register(app: typer.Typer) -> None:
    app.command("ablate")(ablate_command)
