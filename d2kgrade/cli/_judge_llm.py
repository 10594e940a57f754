"""``d2kgrade judge --judge llm|combined``: the LLM judge's half of the judge command (options, progress, tables).

Kept apart from :mod:`d2kgrade.cli.judge` (which owns the command and ``--judge static``) so the two halves can
change independently; the command calls :func:`run_llm_judge` for ``llm`` and ``combined``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from d2kgrade.cli._common import console, err_console, open_suite, print_json
from d2kgrade.errors import UserError
from d2kgrade.schema import Rubric, Task

_MARK = {"present": "[green]present[/green]", "absent": "[red]absent[/red]", "unknown": "[yellow]unknown[/yellow]"}


def expand_files(files: list[Path]) -> list[Path]:
    """Files as given; a directory stands for its kernel files (``.py``, ``.cu``, ``.cuh``), sorted, without the
    helper modules of a multi-file submission (graded through the file that imports them), as the static judge."""
    if not files:
        return []
    from d2kgrade.static.grade import collect_files

    return collect_files(files)


def _verdict(side: dict[str, Any] | None) -> str:
    if side is None:
        return "-"
    text = _MARK.get(side["verdict"], side["verdict"]) + f" {side['confidence']:.2f}"
    if side.get("unstable"):
        text += " [magenta]split[/magenta]"
    if side.get("agreement") == "disagree":
        text += " [magenta]disagree[/magenta]"
    return text


def _evidence(side: dict[str, Any] | None) -> str:
    """The first evidence of the verdict shown (the combined one, else the judge's), never the loser's."""
    if side and side.get("evidence"):
        e = side["evidence"][0]
        first = e["code"].strip().splitlines()[0][:60] if e["code"].strip() else ""
        return f"{e['start_line']}-{e['end_line']}: {first}"
    return ""


def render(result: dict[str, Any]) -> None:
    """One table per file: each property's static, judge and combined verdicts, and the first evidence."""
    scores = result["scores"]
    head = "  ".join(f"{k} {v:.1f}" for k, v in scores.items() if v is not None)
    table = Table(title=f"{result['file']} ({result['kind']}, task {result['task']}): {head}", title_justify="left")
    for col in ("property", "level", "static", "judge", "combined", "evidence"):
        table.add_column(col, overflow="fold")
    for p in result["properties"]:
        table.add_row(p["id"].split(".", 1)[1], p["level"], _verdict(p["static"]), _verdict(p["judge"]),
                      _verdict(p["combined"]), _evidence(p["combined"] if p["combined"] is not None else p["judge"]))
    console.print(table)
    if result["error"]:
        console.print(f"[yellow]not judged:[/yellow] {result['error']}")


def _usage_line(u: Any) -> str:
    cost = f", ${u.cost_usd:.4f}" if u.cost_usd is not None else ""
    return (f"judge: {u.calls} requests, {u.cache_hits} cache hits, {u.retries} retries, {u.reasks} re-asks, "
            f"{u.failures} failed, {u.tokens_in} tokens in / {u.tokens_out} out{cost}")


def run_llm_judge(*, judge: str, rubric: Rubric | None, task: Task | None, files: list[Path],
                  proposals: list[Path], model: str | None, base_url: str | None, samples: int,
                  cache: Path | None, no_cache: bool, concurrency: int, price_table: Path | None, out: Path | None,
                  as_json: bool, gating: bool, batch_level: bool, timeout: float, run_dir: Path | None,
                  suite: Path | None) -> None:
    """The body of ``d2kgrade judge --judge llm|combined`` once options are parsed: judge, then render.

    ``rubric`` and ``task`` come from ``--rubric``/``--task`` (None with ``--run``, where each episode's task
    picks its rubric).
    """
    from d2kgrade.judge.cache import JudgeCache
    from d2kgrade.judge.settings import JudgeConfig, default_cache_path, resolve_api_key, resolve_base_url
    from d2kgrade.judge.usage import load_price_table

    if judge not in ("llm", "combined"):
        raise UserError(f"--judge must be static, llm or combined, got {judge!r}")
    if run_dir is not None and (files or proposals or out is not None):
        raise UserError("--run judges a whole run into RUN_DIR/grades.jsonl: give no files, --proposal or --out")
    if run_dir is None and not files and not proposals:
        raise UserError("nothing to judge: give kernel files, --proposal NOTE.md, or --run RUN_DIR")
    model = model or os.environ.get("D2KGRADE_JUDGE_MODEL")
    if not model:
        raise UserError(f"--judge {judge} needs --model NAME (or D2KGRADE_JUDGE_MODEL)")
    for p in proposals:
        if not p.is_file():
            raise UserError(f"{p}: no such design note")
    code_files = expand_files(files)
    config = JudgeConfig(model=model, api_key=resolve_api_key(), base_url=resolve_base_url(base_url),
                         samples=samples, concurrency=concurrency, timeout=timeout,
                         batch="level" if batch_level else "property")
    prices = load_price_table(price_table) if price_table else None
    judge_cache = None if no_cache else JudgeCache(cache or default_cache_path())
    mode: Any = judge
    progress = Progress(TextColumn("judging"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=err_console, transient=True, disable=not err_console.is_terminal)
    with progress:
        bar = progress.add_task("judge", total=None)

        def advance(done: int, total: int) -> None:
            progress.update(bar, completed=done, total=total)

        if run_dir is not None:
            from d2kgrade.judge.episodes import judge_run_dir

            report = judge_run_dir(run_dir, open_suite(suite), config, mode=mode, gating=gating, cache=judge_cache,
                                   prices=prices, progress=advance)
        else:
            from d2kgrade.judge.run import JudgeItem, judge_files

            if rubric is None:
                raise UserError("pass --task ID or --rubric FILE to pick the rubric")
            items = [JudgeItem(f) for f in code_files] + [JudgeItem(p, kind="proposal") for p in proposals]
            run = judge_files(rubric, items, config, mode=mode, task=task, gating=gating, cache=judge_cache,
                              prices=prices, out=out, progress=advance)
    if run_dir is not None:
        if as_json:
            print_json({"grades": str(report.out), "judged": report.judged, "skipped": report.skipped,
                        "missing": report.missing, "scores": report.scores, "usage": report.usage.model_dump()})
        else:
            err_console.print(f"{report.out}: {report.judged} files judged, {report.skipped} already graded, "
                              f"{report.missing} missing (graded absent)")
            err_console.print(_usage_line(report.usage))
        return
    if as_json:
        print_json(run.to_json())
    else:
        for r in run.results:
            render(r.to_json())
        err_console.print(_usage_line(run.usage))
