"""``d2kgrade judge``: grade kernel files against a task's rubric (static analysis, the LLM judge, or both).

The static path is :func:`judge_static`, which the ``llm``/``combined`` judges can call for the static half.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from d2kgrade.cli._common import JsonOption, SuiteOption, console, open_suite, print_json
from d2kgrade.errors import UserError

if TYPE_CHECKING:  # the grade and rubric models (pydantic, ~0.25 s) are imported by the command that needs them
    from rich.text import Text

    from d2kgrade.grades import FileGrade
    from d2kgrade.schema import Rubric, Task

JUDGES = ("static", "llm", "combined")
_VERDICT_STYLE = {"present": "green", "absent": "red", "unknown": "yellow"}


def resolve_rubric(rubric: Path | None, task_id: str | None, suite: Path | None,
                   need_task: bool = False) -> tuple[Rubric, Task | None]:
    """The rubric (from ``--rubric`` or ``--task``) and, when available or needed, its task."""
    if (rubric is None) == (task_id is None):
        raise UserError("pass exactly one of --rubric FILE or --task ID")
    if task_id is not None:
        s = open_suite(suite)
        return s.load_rubric(task_id), s.load_task(task_id)
    assert rubric is not None
    if not rubric.is_file():
        raise UserError(f"{rubric}: no such rubric file")
    from d2kgrade.suite import load_rubric_file

    r = load_rubric_file(rubric)
    task = None
    try:
        s = open_suite(suite)
        if r.task in s.task_ids:
            task = s.load_task(r.task)
    except UserError:
        if need_task:
            raise
    if need_task and task is None:
        raise UserError(f"--gating needs task {r.task!r} (its dependencies); pass --suite DIR holding it")
    return r, task


def judge_static(rubric: Rubric, files: list[Path], *, task: Task | None = None, gating: bool = False) -> list[FileGrade]:
    """The static judge over files and directories."""
    from d2kgrade.static.grade import grade_files

    return grade_files(rubric, files, task=task, gating=gating)


def _evidence_text(pg) -> Text:  # noqa: ANN001
    from rich.text import Text

    t = Text()
    for ev in pg.evidence[:3]:
        where = f"{Path(ev.file).name}:{ev.start_line}" + (f"-{ev.end_line}" if ev.end_line != ev.start_line else "")
        t.append(where, style="cyan")
        first = next((ln.strip() for ln in ev.code.splitlines() if ln.strip()), "")
        t.append(f"  {first[:70]}" + ("..." if len(first) > 70 else "") + "\n")
    t.append(pg.reason, style="dim")
    return t


def render_grade(fg: FileGrade) -> None:
    """One file's grade as a rich table (property, verdict, confidence, evidence with code and the reason), then
    the score and per-level totals."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{fg.file}  [{fg.rater}, task {fg.task} v{fg.rubric_version}]", title_justify="left",
                  show_lines=True)
    table.add_column("property", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("conf", justify="right", no_wrap=True)
    table.add_column("evidence (file:lines  code) and reason", overflow="fold", ratio=1)
    prefix = fg.task + "."
    for pg in fg.properties:
        name = pg.property_id[len(prefix):] if pg.property_id.startswith(prefix) else pg.property_id
        table.add_row(name, Text(pg.verdict, style=_VERDICT_STYLE.get(pg.verdict, "")), f"{pg.confidence:.2f}",
                      _evidence_text(pg))
    console.print(table)
    if fg.error:
        console.print(f"[yellow]not analysed:[/yellow] {fg.error}", soft_wrap=True)
    levels = "  ".join(f"{ls.level} {ls.points:.1f}/{ls.max_points:.1f} ({ls.n_present}/{ls.n_total})"
                       for ls in fg.levels if ls.n_total)
    console.print(f"score [bold]{fg.score:.1f}[/bold]/100   {levels}   unknown: {fg.n_unknown}\n")


def judge(
    files: list[Path] = typer.Argument(None, help="Kernel files, or directories (every *.py, *.cu, *.cuh under them).",
                                       show_default=False),
    rubric: Path = typer.Option(None, "--rubric", help="Rubric file (rubrics/<id>.yaml).", show_default=False),
    task_id: str = typer.Option(None, "--task", help="Task id: use the suite's rubric for it.", show_default=False),
    judge_kind: str = typer.Option("static", "--judge", help="Which rater: static | llm | combined."),
    as_json: bool = JsonOption,
    suite: Path = SuiteOption,
    gating: bool = typer.Option(False, "--gating", help="Count a property only when what it depends on is present."),
    # --judge llm | combined (d2kgrade.cli._judge_llm, docs/scoring.md)
    model: str = typer.Option(None, "--model", help="Judge model (llm/combined). Env: D2KGRADE_JUDGE_MODEL.",
                              show_default=False),
    base_url: str = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint. Env: D2KGRADE_BASE_URL, "
                                 "OPENAI_BASE_URL. Key: D2KGRADE_API_KEY or OPENAI_API_KEY.", show_default=False),
    samples: int = typer.Option(3, "--samples", help="Judge samples per property, majority-voted."),
    proposal: list[Path] = typer.Option(None, "--proposal", help="Design note(s) to grade for what they commit to.",
                                        show_default=False),
    cache: Path = typer.Option(None, "--cache", help="Judge answer cache, SQLite (default "
                               "~/.cache/d2kgrade/judge.sqlite).", show_default=False),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the judge cache."),
    concurrency: int = typer.Option(4, "--concurrency", help="Judge requests in flight."),
    price_table: Path = typer.Option(None, "--price-table", help="YAML/JSON: model -> {input, output} $ per 1M "
                                     "tokens; adds the cost to the report.", show_default=False),
    out: Path = typer.Option(None, "--out", help="Append each file's grades (static, llm, combined) to this JSONL "
                             "file as soon as it is judged.", show_default=False),
    batch_level: bool = typer.Option(False, "--batch-level", help="One judge request per level, not per property."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds per judge request before it is retried."),
    run_dir: Path = typer.Option(None, "--run", help="Judge every episode's kernel and design note of a run into "
                                 "RUN_DIR/grades.jsonl.", show_default=False),
) -> None:
    """Grade kernels: per property the verdict, confidence and evidence, then the 0-100 score per file."""
    if judge_kind not in JUDGES:
        raise UserError(f"--judge must be one of {', '.join(JUDGES)}, got {judge_kind!r}")
    if judge_kind != "static":
        from d2kgrade.cli._judge_llm import run_llm_judge

        r, task = (None, None) if run_dir is not None else resolve_rubric(rubric, task_id, suite, need_task=gating)
        run_llm_judge(judge=judge_kind, rubric=r, task=task, files=files or [], proposals=proposal or [],
                      model=model, base_url=base_url, samples=samples, cache=cache, no_cache=no_cache,
                      concurrency=concurrency, price_table=price_table, out=out, as_json=as_json, gating=gating,
                      batch_level=batch_level, timeout=timeout, run_dir=run_dir, suite=suite)
        return
    if proposal or run_dir is not None:
        raise UserError("--proposal and --run need --judge llm or combined (static analysis reads code only)")
    if not files:
        raise UserError("give kernel files or directories to grade")
    r, task = resolve_rubric(rubric, task_id, suite, need_task=gating)
    grades = judge_static(r, files, task=task, gating=gating)
    if as_json:
        print_json([g.model_dump(mode="json") for g in grades])
        return
    for g in grades:
        render_grade(g)


def register(app: typer.Typer) -> None:
    app.command("judge")(judge)
