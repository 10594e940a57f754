"""What the viewer and the report read from run directories: one summary row per episode, and its details.

A run directory holds ``results.sqlite`` (:func:`d2kgrade.runstore.load_run`), the episode folders
(``episodes/<id>/transcript.jsonl``, ``design_note.md``, ``kernels/vNNN_*``), ``grades.jsonl`` (the judge) and,
once ``d2kgrade ablate`` has run, ``ablations.jsonl``. Plain episodes/workloads tables (CSV, JSONL) load too;
their episodes then have no transcript or kernel history, and the pages say so.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from d2kgrade.grades import FileGrade
from d2kgrade.metrics.perf import ScoreConfig, episode_performance, reference_speeds
from d2kgrade.metrics.score import condition
from d2kgrade.metrics.tables import RunTables, combine, load_run_dir, run_label
from d2kgrade.records import EvalResult

log = logging.getLogger(__name__)

def slug(text: str) -> str:
    """A file-name-safe form of an id (dots and dashes kept: ``softmax.guided-all.s0``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "_"


def page_path(run: str, episode_id: str) -> str:
    """Path of an episode's page inside a viewer site, relative to its ``index.html``."""
    return f"e/{slug(run)}/{slug(episode_id)}.html"


def _finite(x: Any) -> float | None:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def geomean(values: list[float | None]) -> float | None:
    """Geometric mean of the finite positive values, None when there are none."""
    v = [x for x in values if x is not None and math.isfinite(x) and x > 0]
    return float(math.exp(sum(math.log(x) for x in v) / len(v))) if v else None


@dataclass
class Ablations:
    """The ablation records of one run, or why there are none."""

    rows: list[dict[str, Any]]
    """One dict per record (``d2kgrade.ablate.results.AblationRecord`` dumped)."""
    note: str = ""
    """Why there are no rows (no file, unreadable file), for the pages."""


def load_ablations(run_dir: Path) -> Ablations:
    """``RUN_DIR/ablations.jsonl`` (``d2kgrade ablate``) through :func:`d2kgrade.ablate.results.load_run_ablations`;
    a missing or unreadable file becomes the sentence the pages show instead."""
    from d2kgrade.ablate.results import ABLATIONS_FILE, load_run_ablations
    from d2kgrade.errors import UserError

    if not (run_dir / ABLATIONS_FILE).is_file():
        return Ablations([], f"no ablations: {ABLATIONS_FILE} is not in {run_dir} (run `d2kgrade ablate` on this "
                             "run)")
    try:
        rows = [r.model_dump() for r in load_run_ablations(run_dir)]
    except UserError as exc:
        return Ablations([], f"ablations not shown: {exc}")
    return Ablations(rows, "" if rows else f"{run_dir / ABLATIONS_FILE} holds no ablation record")


@dataclass
class Run:
    """One loaded run directory (or set of plain tables)."""

    label: str
    """Unique name among the loaded runs (the store's run_id, else the folder's name)."""
    tables: RunTables
    """Validated episodes, workloads and grades."""
    store: dict[str, pd.DataFrame] | None
    """Every table of ``results.sqlite``; None for plain tables."""
    ablations: Ablations
    """``ablations.jsonl``."""

    @property
    def root(self) -> Path:
        assert self.tables.root is not None
        return self.tables.root


def load_runs(run_dirs: list[Path]) -> list[Run]:
    """Load run directories; labels are made unique (``name``, ``name-2``...)."""
    return runs_from_tables([load_run_dir(d) for d in run_dirs])


def runs_from_tables(tables: list[RunTables]) -> list[Run]:
    """Wrap loaded tables (:func:`d2kgrade.metrics.tables.load_runs`) with their stores, labels and ablations."""
    from d2kgrade import runstore

    out: list[Run] = []
    seen: set[str] = set()
    for t in tables:
        d = t.root if t.root is not None else Path(t.source).parent
        is_run_dir = Path(t.source) == d
        has_store = is_run_dir and (d / runstore.DB_NAME).is_file()
        label = (run_label(d) if is_run_dir else None) or d.name
        base, n = label, 2
        while label in seen:
            label, n = f"{base}-{n}", n + 1
        seen.add(label)
        store = runstore.load_run(d) if has_store else None
        out.append(Run(label=label, tables=t, store=store, ablations=load_ablations(d)))
    return out


def combined(tables: list[RunTables]):
    """:func:`d2kgrade.metrics.tables.combine`, with the episode-key column of an empty episodes or workloads
    table made text (it comes out float, and pandas then refuses to merge it with text keys)."""
    c = combine(tables)
    for frame in (c.episodes, c.workloads):
        if frame.empty:
            frame["key"] = frame["key"].astype(object)
    return c


def final_results(run: Run) -> dict[str, EvalResult]:
    """``episode_id -> EvalResult`` of each episode's final evaluation (stores only)."""
    if run.store is None:
        return {}
    ev = run.store["evaluations"]
    out: dict[str, EvalResult] = {}
    for r in ev[ev["kind"] == "final"].itertuples(index=False):
        try:
            out[r.episode_id] = EvalResult.model_validate_json(r.result_json)
        except ValueError as exc:  # an older or damaged record: the page says the evaluation is unreadable
            log.warning("%s: final evaluation of %s unreadable (%s)", run.root, r.episode_id, exc)
    return out


def best_speedup(result: EvalResult | None) -> float | None:
    """Geomean over timed, passed, non-hidden workloads of the speedup over the best baseline."""
    if result is None:
        return None
    return geomean([w.speedup_best for w in result.workloads if not w.hidden and w.status == "passed"])


EPISODE_COLUMNS = ("key", "run", "episode_id", "model", "agent", "arm", "guidance", "task", "seed", "status",
                   "final_status", "message", "turns", "tokens_in", "tokens_out", "cost_usd", "wall_s", "correct",
                   "speedup_eager", "speedup_compiled", "speedup_best", "best_baselines", "roofline",
                   "perf_score", "impl_score", "page", "pair_keys")
"""Columns of :func:`episode_table`. ``arm`` is the condition (``guided``, ``guided-L1``...); ``pair_keys``
lists the keys of the same (run set, model, task, seed) in the other arms."""


def episode_table(runs: list[Run], cfg: ScoreConfig) -> pd.DataFrame:
    """One row per episode of every run (agent and reference episodes): what the viewer's table shows and what
    the report counts. Speeds are NaN for wrong kernels, as in scoring."""
    if not runs:
        return pd.DataFrame(columns=list(EPISODE_COLUMNS))
    both = combined([r.tables for r in runs])
    E, W = both.episodes, both.workloads
    if E.empty:
        return pd.DataFrame(columns=list(EPISODE_COLUMNS))
    perf = episode_performance(E, W, reference_speeds(E, W), cfg).set_index("key")
    g = both.grades
    code = g[(g["kind"] == "code") & (g["rater"] == cfg.rater)].drop_duplicates("key", keep="last")
    impl = code.set_index("key")["score"].astype(float)
    finals = {i: final_results(r) for i, r in enumerate(runs)}
    rows = []
    for e in E.to_dict("records"):
        i = int(e["run"])
        res = finals[i].get(e["episode_id"])
        p = perf.loc[e["key"]] if e["key"] in perf.index else None
        best = sorted({w.best_baseline for w in res.workloads if w.best_baseline}) if res else []
        rows.append({
            "key": e["key"], "run": runs[i].label, "episode_id": e["episode_id"], "model": e["model"],
            "agent": e["agent"], "arm": "reference" if e["agent"] == "reference" else condition(e["arm"],
                                                                                                e["guidance"]),
            "guidance": e["guidance"], "task": e["task"], "seed": int(e["seed"]),
            "status": e.get("status") or "", "final_status": e.get("final_status") or "",
            "message": e.get("message") or "", "turns": _finite(e.get("turns")),
            "tokens_in": _finite(e.get("tokens_in")), "tokens_out": _finite(e.get("tokens_out")),
            "cost_usd": _finite(e.get("cost_usd")), "wall_s": _finite(e.get("wall_s")),
            "correct": bool(e["correct"]),
            "speedup_eager": _finite(p["speedup_eager"]) if p is not None else None,
            "speedup_compiled": _finite(p["speedup_compiled"]) if p is not None else None,
            "speedup_best": best_speedup(res) if e["correct"] else None, "best_baselines": ", ".join(best),
            "roofline": _finite(p["roofline"]) if p is not None else None,
            "perf_score": _finite(p["perf_score"]) if p is not None else None,
            "impl_score": _finite(impl.get(e["key"])),
            "page": page_path(runs[i].label, e["episode_id"]),
        })
    df = pd.DataFrame(rows, columns=[c for c in EPISODE_COLUMNS if c != "pair_keys"])
    pairs: dict[tuple[str, str, int], list[str]] = {}
    for r in df[df["agent"] != "reference"].itertuples(index=False):
        pairs.setdefault((r.model, r.task, r.seed), []).append(r.key)
    df["pair_keys"] = [[k for k in pairs.get((r.model, r.task, r.seed), []) if k != r.key]
                       if r.agent != "reference" else [] for r in df.itertuples(index=False)]
    return df.replace({np.nan: None})


@dataclass
class ReferenceFigures:
    """The expert reference's figures per (task, workload), and where they came from."""

    rows: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """``(task, workload) -> {median_ms, iqr_ms, speedup_eager, speedup_compiled, roofline_fraction, status}``."""
    source: str = ""
    """Run directory or figures file, with its GPU where known."""


def reference_figures(runs: list[Run], reference_runs: list[Run], figures_file: Path | None) -> ReferenceFigures:
    """Reference episodes of the runs (and of ``reference_runs``), else a ``bench_references.py`` JSON file
    (``benchmarks/data/references_h200.json``)."""
    out = ReferenceFigures()
    sources = []
    for run in [*runs, *reference_runs]:
        eps = run.tables.episodes
        refs = eps[(eps["agent"] == "reference") & eps["correct"]]
        if refs.empty:
            continue
        finals = final_results(run)
        for r in refs.itertuples(index=False):
            res = finals.get(r.episode_id)
            if res is None:
                continue
            for w in res.workloads:
                out.rows.setdefault((r.task, w.name), {
                    "status": w.status, "median_ms": w.time.median_ms if w.time else None,
                    "iqr_ms": w.time.iqr_ms if w.time else None, "speedup_eager": w.speedup_eager,
                    "speedup_compiled": w.speedup_compiled, "speedup_best": w.speedup_best,
                    "roofline_fraction": w.roofline_fraction})
            sources.append(f"{run.root} ({res.environment.gpu or res.environment.device})")
    if figures_file is not None:
        from d2kgrade.errors import UserError

        try:
            data = json.loads(figures_file.read_text(encoding="utf-8"))
            wls = data["workloads"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{figures_file}: not a bench_references.py figures file (expected a JSON object with "
                            f"a 'workloads' list): {exc}") from None
        for w in wls:
            out.rows.setdefault((w.get("task"), w.get("workload")), {
                "status": w.get("status"), "median_ms": w.get("median_ms"), "iqr_ms": w.get("iqr_ms"),
                "speedup_eager": w.get("speedup_eager"), "speedup_compiled": w.get("speedup_compiled"),
                "speedup_best": None, "roofline_fraction": w.get("roofline_fraction")})
        sources.append(f"{figures_file} ({data.get('gpu', 'GPU not named')})")
    out.source = "; ".join(dict.fromkeys(sources))
    return out


def grades_by_episode(run: Run) -> dict[str, list[FileGrade]]:
    """``episode_id -> grades`` of one run, the last of each (kind, rater) kept, in file order."""
    out: dict[str, dict[tuple[str, str], FileGrade]] = {}
    for g in run.tables.grades:
        out.setdefault(g.item, {})[(g.kind, g.rater)] = g
    return {k: list(v.values()) for k, v in out.items()}
