"""``d2kgrade run``: paired guided / unguided agent episodes (or the expert references, or a replay) into RUN_DIR.

The runner (which imports torch when it evaluates) is imported inside the command, so ``import d2kgrade.cli``
stays light.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from pathlib import Path
from typing import Any

import typer

from d2kgrade.cli._common import (SuiteOption, console, err_console, open_suite, print_error, print_json, print_table,
                                  print_warning)
from d2kgrade.errors import Terminated, UserError


def _split(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def summarize(run_dir: Path) -> list[dict[str, Any]]:
    """One row per (model, arm, guidance) of the run: episodes, statuses, correct, turns, tokens, cost."""
    from d2kgrade.runstore import load_run

    eps = load_run(run_dir)["episodes"]
    rows: list[dict[str, Any]] = []
    if eps.empty:
        return rows
    for (model, arm, guidance), g in eps.groupby(["model", "arm", "guidance"], dropna=False, sort=True):
        cost = float(g["cost_usd"].sum(min_count=1))
        rows.append({"model": model, "arm": arm, "guidance": guidance, "episodes": len(g),
                     "statuses": {k: int(v) for k, v in g["status"].value_counts().items()},
                     "correct": int(g["correct"].sum()), "mean_turns": round(float(g["turns"].mean()), 1),
                     "tokens": int(g["tokens_in"].sum() + g["tokens_out"].sum()),
                     "cost_usd": None if math.isnan(cost) else round(cost, 4)})
    return rows


def _print_summary(run_dir: Path, agent: str) -> list[dict[str, Any]]:
    from rich.table import Table

    from d2kgrade.runstore import load_run

    eps = load_run(run_dir)["episodes"]
    rows = summarize(run_dir)
    if agent == "reference":
        table = Table(title=f"expert kernels ({run_dir})")
        table.add_column("episode", no_wrap=True)
        table.add_column("final status", no_wrap=True)
        table.add_column("why not passed")
        for r in eps.sort_values("episode_id").to_dict("records"):
            status = f"[green]{r['final_status']}[/green]" if r["correct"] else f"[red]{r['final_status']}[/red]"
            table.add_row(r["episode_id"], status, "" if r["correct"] else str(r["message"] or "")[:300])
        print_table(table)
        console.print(f"{int(eps['correct'].sum())} of {len(eps)} expert kernels passed")
        return rows
    table = Table(title=f"run {run_dir}: {len(eps)} episodes")
    for col in ("model", "arm", "guidance", "episodes", "correct", "statuses", "mean turns", "tokens", "cost $"):
        table.add_column(col, no_wrap=col not in ("model", "statuses"))
    for r in rows:
        table.add_row(str(r["model"]), r["arm"], r["guidance"], str(r["episodes"]), str(r["correct"]),
                      ", ".join(f"{k} {v}" for k, v in r["statuses"].items()), str(r["mean_turns"]),
                      str(r["tokens"]), "-" if r["cost_usd"] is None else f"{r['cost_usd']}")
    print_table(table)
    return rows


class _Display:
    """A rich progress display: one bar for the run, one line per episode in flight (its turns)."""

    def __init__(self, progress: Any, max_turns: int) -> None:
        self.progress = progress
        self.max_turns = max_turns
        self.overall: Any = None
        self.lines: dict[str, Any] = {}
        self.lock = threading.Lock()

    def __call__(self, kind: str, eid: str, info: dict[str, Any]) -> None:
        from rich.markup import escape

        with self.lock:
            p = self.progress
            if kind == "plan":
                self.overall = p.add_task("episodes", total=info["total"], completed=info["done"])
            elif kind == "start":
                self.lines[eid] = p.add_task(f"  {eid}", total=self.max_turns)
            elif kind == "turn" and eid in self.lines:
                p.update(self.lines[eid], completed=info["turn"])
            elif kind in ("end", "cancelled"):
                if eid in self.lines:
                    p.remove_task(self.lines.pop(eid))
                if kind == "end" and self.overall is not None:
                    p.advance(self.overall)
                    status = info.get("status")
                    if status in ("failed", "api_failed"):
                        p.console.print(f"[red]{status}[/red] {eid}: {escape(str(info.get('message'))[:160])}",
                                        highlight=False, soft_wrap=True)


def run_command(
    out: Path = typer.Option(..., "--out", help="Run directory (created; rerun the same command to resume)."),
    model: str = typer.Option(None, "--model", help="Model name for the chat API (implies --agent llm)."),
    base_url: str = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint, e.g. http://host:8000/v1."),
    tasks: list[str] = typer.Option(None, "--tasks", help="'all' or task ids (comma-separated or repeated)."),
    arms: str = typer.Option(None, "--arms", help="paired | unguided | guided | propose (comma-separated)."),
    guidance: str = typer.Option(None, "--guidance", help="Levels in the guided arm: L1 | L1-L2 | all."),
    seeds: int = typer.Option(None, "--seeds", help="Episodes per task and arm (seeds 0..N-1)."),
    max_turns: int = typer.Option(None, "--max-turns", help="Model calls per episode (default 350)."),
    max_wall: float = typer.Option(None, "--max-wall", help="Wall-clock budget per episode, minutes."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Token budget per episode (prompt + completion)."),
    executor: str = typer.Option(None, "--executor", help="local | ray."),
    address: str = typer.Option(None, "--address", help="Ray cluster address (with --executor ray)."),
    gpus: str = typer.Option(None, "--gpus", help="GPU indices to evaluate on, e.g. 0,1,2 (default: all)."),
    agent: str = typer.Option(None, "--agent", help="llm | reference | replay."),
    from_run: Path = typer.Option(None, "--from", help="Run directory to replay (with --agent replay)."),
    config_file: Path = typer.Option(None, "--config", help="TOML file of settings; flags override it."),
    device: str = typer.Option(None, "--device", help="cpu | cuda (default: cuda when a GPU is visible)."),
    concurrency: int = typer.Option(None, "--concurrency", help="Episodes in flight (default 8)."),
    tool_mode: str = typer.Option(None, "--tool-mode", help="auto | native | text (text: fenced tool blocks)."),
    temperature: float = typer.Option(None, "--temperature", help="Sampling temperature sent with every request "
                                                                  "(default: the server's)."),
    top_p: float = typer.Option(None, "--top-p", help="Nucleus sampling top_p sent with every request."),
    sampling_seed: int = typer.Option(None, "--seed", help="Sampling seed sent with every request, plus the "
                                                           "episode's seed index (best effort on most servers)."),
    suite: Path = SuiteOption,
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Run agent episodes (paired guided / unguided by default) and record them in RUN_DIR; resumable."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from d2kgrade.io import remove_own_tempdirs
    from runner.agent.config import resolve_config
    from runner.run import run

    if agent is None and model is not None:
        agent = "llm"
    gpu_list = None
    if gpus:
        try:
            gpu_list = [int(g) for g in _split([gpus]) or []]
        except ValueError:
            raise UserError(f"--gpus takes indices such as 0,1,2, got {gpus!r}") from None
    flags: dict[str, Any] = {
        "model": model, "base_url": base_url, "tasks": _split(tasks), "arms": arms, "guidance": guidance,
        "seeds": seeds, "max_turns": max_turns, "max_wall_min": max_wall, "max_tokens": max_tokens,
        "executor": executor, "address": address, "agent": agent,
        "gpus": gpu_list,
        "from_run": str(from_run) if from_run else None, "device": device, "concurrency": concurrency,
        "tool_mode": tool_mode, "temperature": temperature, "top_p": top_p, "sampling_seed": sampling_seed,
    }
    config = resolve_config(config_file, flags)
    s = open_suite(suite)
    cancel = threading.Event()
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=err_console, transient=False)
    display = _Display(progress, config.max_turns)
    try:
        with progress:
            result = run(config, out, suite_root=s.root, argv=sys.argv, on_event=display, cancel=cancel,
                         on_warning=print_warning)
    except (KeyboardInterrupt, Terminated) as exc:
        # run() has marked the session interrupted and released the lock on its way out
        cancel.set()
        remove_own_tempdirs()
        why = "terminated" if isinstance(exc, Terminated) else "interrupted"
        err_console.print(f"{why}: finished episodes are saved in {out}; rerun the same command to resume")
        sys.stderr.flush()
        sys.stdout.flush()
        # episode threads may be waiting on the model; nothing unfinished is worth waiting for
        os._exit(128 + exc.signum if isinstance(exc, Terminated) else 130)
    rows = (summarize(out) if as_json else _print_summary(out, config.agent))
    if as_json:
        print_json({"run_dir": str(out), "run_id": result.run_id, "planned": result.planned,
                    "already_done": result.already_done, "ran": len(result.rows), "summary": rows})
    else:
        err_console.print(f"{len(result.rows)} episode(s) run this session, {result.already_done} already done; "
                          f"records in {out}/results.sqlite")
    if config.agent == "reference":
        from d2kgrade.runstore import load_run

        eps = load_run(out)["episodes"]
        bad = eps[~eps["correct"]]
        if len(bad):
            print_error(f"{len(bad)} of {len(eps)} expert kernels did not pass: "
                        + ", ".join(f"{r.episode_id} ({r.final_status})" for r in bad.itertuples()))
            raise typer.Exit(1)
    _exit_on_unfinished(result.rows)


def _exit_on_unfinished(rows: list[dict[str, Any]]) -> None:
    """Exit 1 when episodes of this session failed on the API or inside d2kgrade: the run did not do its job."""
    for status, what in (("api_failed", "failed on the API"), ("failed", "failed inside d2kgrade")):
        bad = [r for r in rows if r.get("status") == status]
        if bad:
            print_error(f"{len(bad)} of {len(rows)} episode(s) run this session {what} (status {status}; e.g. "
                        f"{bad[0]['episode_id']}: {str(bad[0].get('message'))[:300]}); they are not scored as wrong "
                        "kernels; rerun the same command to retry them")
    if any(r.get("status") in ("api_failed", "failed") for r in rows):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("run")(run_command)
