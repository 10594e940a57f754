"""``d2kgrade view``: a static site of one or more runs that works from ``file://`` (no server, no CDN).

Layout of the site::

    index.html                 the episodes table (sortable, filterable, searchable, paginated in the browser)
    data/episodes.js           the table's rows, as a script (file:// pages cannot fetch JSON)
    assets/view.css, view.js   the only style and script, shipped in the wheel
    e/<run>/<episode>.html     one page per episode, rendered here

Filters of the index live in its URL hash (``index.html#task=softmax&arm=guided``), so the report links into
filtered views.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from d2kgrade import __version__
from d2kgrade.io import atomic_write_text
from d2kgrade.metrics.perf import ScoreConfig
from d2kgrade.view.data import (Run, episode_table, final_results, grades_by_episode, load_runs,
                                reference_figures)
from d2kgrade.view.episode import EpisodeContext, render_episode
from d2kgrade.view.html import esc

log = logging.getLogger(__name__)

ASSETS = Path(__file__).parent / "assets"
INDEX_COLUMNS = ("task", "model", "arm", "seed", "status", "final_status", "turns", "tokens", "cost_usd",
                 "correct", "speedup_best", "speedup_eager", "speedup_compiled", "roofline", "perf_score",
                 "impl_score")


@dataclass
class SiteReport:
    """What :func:`build_site` wrote."""

    out: Path
    index: Path
    n_episodes: int
    n_pages: int
    bytes_written: int
    warnings: list[str]


def page_shell(title: str, body: str, depth: int, *, script_data: str = "") -> str:
    """A page with the site's stylesheet and script, ``depth`` folders below the site root."""
    up = "../" * depth
    data = f'<script src="{up}{script_data}"></script>' if script_data else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{esc(title)}</title><link rel="stylesheet" href="{up}assets/view.css"></head>'
            f'<body>{body}<footer class="muted">d2kgrade {esc(__version__)}</footer>{data}'
            f'<script src="{up}assets/view.js"></script></body></html>\n')


def _index_rows(table) -> list[dict[str, Any]]:
    rows = []
    for r in table.to_dict("records"):
        tokens = None if r["tokens_in"] is None else (r["tokens_in"] or 0) + (r["tokens_out"] or 0)
        rows.append({"page": r["page"], "run": r["run"], "id": r["episode_id"], "task": r["task"],
                     "model": r["model"], "arm": r["arm"], "seed": r["seed"], "status": r["status"],
                     "why": r["message"], "final_status": r["final_status"], "turns": r["turns"],
                     "tokens": tokens, "cost_usd": r["cost_usd"], "correct": r["correct"],
                     "speedup_best": r["speedup_best"], "speedup_eager": r["speedup_eager"],
                     "speedup_compiled": r["speedup_compiled"], "roofline": r["roofline"],
                     "perf_score": r["perf_score"], "impl_score": r["impl_score"]})
    return rows


def index_page(runs: list[Run], n: int, warnings: list[str]) -> str:
    sources = ", ".join(f"{esc(r.label)} (<code>{esc(r.root)}</code>)" for r in runs)
    warn = "".join(f"<li>{esc(w)}</li>" for w in warnings)
    body = (f"<h1>Episodes</h1><p>{n} episode(s) from {sources}.</p>" +
            (f'<ul class="warnings">{warn}</ul>' if warn else "") +
            '<div class="controls"><input id="q" type="search" placeholder="search id, task, model, status, why…">'
            + "".join(f'<select id="f-{c}" data-col="{c}"><option value="">every {c}</option></select>'
                      for c in ("task", "model", "arm", "status", "final_status")) +
            '<span id="count" class="muted"></span></div>'
            '<div class="tbl"><table id="episodes" class="episodes"><thead></thead><tbody></tbody></table></div>'
            '<div class="pager"><button type="button" id="prev">previous</button> <span id="pageinfo"></span> '
            '<button type="button" id="next">next</button></div>'
            "<noscript><p>The episodes table needs JavaScript; every episode page works without it.</p></noscript>")
    return page_shell("d2kgrade view", body, 0, script_data="data/episodes.js")


def _properties(suite_root: Path | None, tasks: set[str]) -> dict[str, str]:
    """Guidance texts by id, for the grade details (tasks the suite does not have are skipped)."""
    if suite_root is None:
        return {}
    from d2kgrade.errors import D2KError
    from d2kgrade.suite import Suite

    out: dict[str, str] = {}
    suite = Suite(suite_root)
    for t in sorted(tasks):
        try:
            task = suite.load_task(t)
        except D2KError:
            continue
        out.update({g.id: g.text for g in task.guidance})
    return out


def build_site(run_dirs: list[Path], out: Path, *, cfg: ScoreConfig | None = None,
               reference_dirs: list[Path] | None = None, reference_figures_file: Path | None = None,
               suite_root: Path | None = None,
               progress: Callable[[int, int], None] | None = None) -> SiteReport:
    """Write the viewer site of ``run_dirs`` into ``out`` (created; pages of an earlier build are replaced)."""
    from d2kgrade.ablate.results import REFERENCE_PREFIX

    cfg = cfg or ScoreConfig(resamples=0)
    runs = load_runs(run_dirs)
    refs_runs = load_runs(reference_dirs) if reference_dirs else []
    table = episode_table(runs, cfg)
    refs = reference_figures(runs, refs_runs, reference_figures_file)
    warnings = [f"{r.label}: {r.ablations.note}" for r in runs if not r.ablations.rows]
    out.mkdir(parents=True, exist_ok=True)
    for sub in ("e", "assets", "data"):
        shutil.rmtree(out / sub, ignore_errors=True)
    shutil.copytree(ASSETS, out / "assets")
    written = 0
    rows = _index_rows(table)
    data_js = "window.D2K_COLUMNS = " + json.dumps(INDEX_COLUMNS) + ";\nwindow.D2K_EPISODES = " + json.dumps(
        rows, separators=(",", ":"), allow_nan=False) + ";\n"
    atomic_write_text(out / "data" / "episodes.js", data_js)
    written += len(data_js)
    props = _properties(suite_root, set(table["task"])) if len(table) else {}
    by_key = {r["key"]: r for r in table.to_dict("records")}
    done = 0
    for i, run in enumerate(runs):
        finals = final_results(run)
        grades = grades_by_episode(run)
        abl: dict[str, list[dict[str, Any]]] = {}
        for a in run.ablations.rows:
            abl.setdefault(str(a.get("episode")), []).append(a)
        for key in (k for k in by_key if k.startswith(f"{i}:")):
            row = by_key[key]
            eid = row["episode_id"]
            ctx = EpisodeContext(row=row, run=run, result=finals.get(eid), grades=grades.get(eid, []),
                                 pairs=[by_key[k] for k in row["pair_keys"]], references=refs,
                                 ablations=abl.get(eid, []) + (abl.get(f"{REFERENCE_PREFIX}{row['task']}", [])
                                                               if row["agent"] == "reference" else []),
                                 ablation_note=run.ablations.note, properties=props)
            page = render_episode(ctx, page_shell)
            atomic_write_text(out / row["page"], page)
            written += len(page)
            done += 1
            if progress is not None:
                progress(done, len(by_key))
    index = index_page(runs, len(rows), warnings)
    atomic_write_text(out / "index.html", index)
    written += len(index)
    mask = os.umask(0)
    os.umask(mask)
    for p in out.rglob("*"):  # atomic writes make 0600 files; a site is for sharing
        os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~mask)
    log.info("wrote %d episode pages into %s", len(by_key), out)
    return SiteReport(out=out, index=out / "index.html", n_episodes=len(rows), n_pages=len(by_key),
                      bytes_written=written, warnings=warnings)
