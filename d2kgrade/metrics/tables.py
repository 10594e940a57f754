"""The tables that scoring reads: episodes, workloads and grades, validated, from a run store or plain files.

The contract (shared with the runner): ``episodes`` has one row per agent episode, ``workloads`` one row per
evaluated workload of an episode's final submission, and ``RUN_DIR/grades.jsonl`` one
:class:`~d2kgrade.grades.FileGrade` per line (``item`` = episode id). Tables from elsewhere enter as CSV or JSONL
files with the same columns. Every check here names the file, the row and the column, and what was expected.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from d2kgrade.errors import Problem, SpecError, UserError
from d2kgrade.grades import FileGrade
from d2kgrade.io import validate_data

log = logging.getLogger(__name__)

AGENTS = ("llm", "reference", "replay")
ARMS = ("unguided", "guided", "propose")
GUIDANCE = ("none", "L1", "L1-L2", "all")
HIDDEN_WORKLOAD = "hidden"

# column -> kind; kinds: str, int, bool, float
EPISODE_REQUIRED = {"episode_id": "str", "model": "str", "agent": "str", "arm": "str", "guidance": "str",
                    "task": "str", "seed": "int", "correct": "bool"}
EPISODE_OPTIONAL = {"run_id": "str", "status": "str", "final_status": "str", "turns": "float",
                    "tokens_in": "float", "tokens_out": "float", "cost_usd": "float", "wall_s": "float",
                    "design_note_path": "str", "kernel_path": "str", "suite_version": "str"}
WORKLOAD_REQUIRED = {"episode_id": "str", "workload": "str", "status": "str", "speedup_eager": "float"}
WORKLOAD_OPTIONAL = {"speedup_compiled": "float", "roofline_fraction": "float", "time_ms": "float",
                     "eager_ms": "float", "compiled_ms": "float"}

_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f"}


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA or v is pd.NaT or (
        isinstance(v, str) and v.strip() == "")


def _coerce(value: Any, kind: str) -> Any:
    """Coerce one cell; raise ValueError with what was expected."""
    if kind == "str":
        if _is_missing(value):
            return ""
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)
    if kind == "float":
        if _is_missing(value):
            return math.nan
        if isinstance(value, bool):
            raise ValueError("expected a number")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError(f"expected a number, got {value!r}") from None
    if kind == "int":
        if _is_missing(value):
            raise ValueError("expected an integer, got nothing")
        try:
            f = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"expected an integer, got {value!r}") from None
        if not f.is_integer():
            raise ValueError(f"expected an integer, got {value!r}")
        return int(f)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if _is_missing(value):
            raise ValueError("expected true/false, got nothing")
        text = str(value).strip().lower()
        if text.endswith(".0"):
            text = text[:-2]
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValueError(f"expected true/false (or 1/0), got {value!r}")
    raise AssertionError(kind)


def validate_table(df: pd.DataFrame, source: str, required: dict[str, str],
                   optional: dict[str, str]) -> pd.DataFrame:
    """Check required columns and coerce types; return a new frame with every known column present.

    Raises:
        SpecError: one problem per missing column, or for the first bad cell of each column.
    """
    if df.empty and not len(df.columns):  # an empty file: no rows, and so no header to check
        df = pd.DataFrame({c: [] for c in required})
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise SpecError([Problem(source, "", f"missing column(s) {', '.join(missing)}; expected at least "
                                             f"{', '.join(required)}")])
    out: dict[str, list[Any]] = {}
    problems: list[Problem] = []
    for col, kind in {**required, **optional}.items():
        if col not in df.columns:
            out[col] = [("" if kind == "str" else math.nan)] * len(df)
            continue
        values = []
        for i, v in enumerate(df[col].tolist()):
            try:
                values.append(_coerce(v, kind))
            except ValueError as exc:
                problems.append(Problem(source, f"row {i + 1}, column {col}", str(exc)))
                break
        out[col] = values
    if problems:
        raise SpecError(problems)
    frame = pd.DataFrame(out, index=range(len(df)))
    for col, kind in {**required, **optional}.items():
        if kind == "str":
            frame[col] = frame[col].astype(object)
        elif kind == "bool":
            frame[col] = frame[col].astype(bool)
        elif kind == "int":
            frame[col] = frame[col].astype("int64")
        else:
            frame[col] = frame[col].astype("float64")
    extra = [c for c in df.columns if c not in out]
    for c in extra:  # keep unknown columns (config_json, notes...) untouched
        frame[c] = df[c].tolist()
    return frame


def _check_values(df: pd.DataFrame, source: str, column: str, allowed: tuple[str, ...]) -> None:
    bad = df.index[~df[column].isin(allowed)]
    if len(bad):
        i = int(bad[0])
        raise SpecError([Problem(source, f"row {i + 1}, column {column}",
                                 f"expected one of {', '.join(allowed)}, got {df.at[i, column]!r}")])


def validate_episodes(df: pd.DataFrame, source: str) -> pd.DataFrame:
    """Validate an episodes table (see the module docstring)."""
    out = validate_table(df, source, EPISODE_REQUIRED, EPISODE_OPTIONAL)
    for col, allowed in (("agent", AGENTS), ("arm", ARMS), ("guidance", GUIDANCE)):
        _check_values(out, source, col, allowed)
    for col in ("episode_id", "task"):
        empty = out.index[out[col] == ""]
        if len(empty):
            raise SpecError([Problem(source, f"row {int(empty[0]) + 1}, column {col}", "is empty")])
    dup = out["episode_id"].duplicated()
    if dup.any():
        i = int(out.index[dup][0])
        raise SpecError([Problem(source, f"row {i + 1}, column episode_id",
                                 f"episode id {out.at[i, 'episode_id']!r} appears more than once")])
    for i, row in out.iterrows():
        guided = row["arm"] == "guided"
        if guided == (row["guidance"] == "none"):
            want = "L1, L1-L2 or all" if guided else "none"
            raise SpecError([Problem(source, f"row {int(i) + 1}, column guidance",
                                     f"arm {row['arm']!r} needs guidance {want}, got {row['guidance']!r}")])
    return out


def validate_workloads(df: pd.DataFrame, source: str) -> pd.DataFrame:
    """Validate a workloads table (see the module docstring)."""
    return validate_table(df, source, WORKLOAD_REQUIRED, WORKLOAD_OPTIONAL)


# ------------------------------------------------------------------------------------------- plain files


def read_table(path: Path) -> pd.DataFrame:
    """Read a CSV or JSONL (one object per line) file into a frame; errors name the file and the line."""
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        try:
            return pd.read_csv(path, dtype=object, keep_default_na=False)
        except pd.errors.EmptyDataError:  # an empty table (a run whose episodes have no final evaluation)
            return pd.DataFrame()
        except (pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise UserError(f"{path}: not a readable CSV file ({str(exc).splitlines()[0]})") from None
    if suffix in (".jsonl", ".ndjson", ".json"):
        rows = []
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}: line {lineno}: not valid JSON ({exc.msg}); expected one object per "
                                "line") from None
            if not isinstance(obj, dict):
                raise UserError(f"{path}: line {lineno}: expected a JSON object, got {type(obj).__name__}")
            rows.append(obj)
        return pd.DataFrame(rows)
    raise UserError(f"{path}: unknown table format {suffix!r}; expected .csv or .jsonl")


def read_grades(path: Path) -> list[FileGrade]:
    """Read a grades JSONL file (one :class:`FileGrade` per line)."""
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    out = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}: line {lineno}: not valid JSON ({exc.msg})") from None
        out.append(validate_data(FileGrade, data, f"{path}: line {lineno}"))
    return out


@dataclass
class RunTables:
    """The validated tables of one run (or of plain files)."""

    source: str
    """Where they came from (a run directory or file names), for messages."""
    episodes: pd.DataFrame
    """Validated episodes."""
    workloads: pd.DataFrame
    """Validated workloads."""
    grades: list[FileGrade] = field(default_factory=list)
    """Grades of the run's kernels and design notes."""
    root: Path | None = None
    """The run directory (kernel_path and design_note_path are relative to it)."""


def _find(run_dir: Path, stem: str) -> Path | None:
    for suffix in (".csv", ".jsonl"):
        p = run_dir / f"{stem}{suffix}"
        if p.is_file():
            return p
    return None


def load_run_dir(run_dir: Path) -> RunTables:
    """Load one run: the run store (``results.sqlite``, through :func:`d2kgrade.runstore.load_run`) when the
    folder has one, else plain ``episodes``/``workloads`` tables (CSV or JSONL); plus ``grades.jsonl``."""
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: not a directory (expected a run directory)")
    from d2kgrade import runstore

    ep_path, wl_path = _find(run_dir, "episodes"), _find(run_dir, "workloads")
    if (run_dir / runstore.DB_NAME).is_file():
        try:
            tables = runstore.load_run(run_dir)
        except UserError:  # RunStoreError: already one line naming the file
            raise
        except Exception as exc:  # a damaged or foreign sqlite file: say which and why, not a traceback
            raise UserError(f"{run_dir / runstore.DB_NAME}: cannot read the run store ({exc})") from None
        for name in ("episodes", "workloads"):
            if name not in tables:
                raise UserError(f"{run_dir}: the run store has no {name} table")
        episodes = validate_episodes(tables["episodes"], f"{run_dir / runstore.DB_NAME} (episodes)")
        workloads = validate_workloads(tables["workloads"], f"{run_dir / runstore.DB_NAME} (workloads)")
    elif ep_path is not None:
        episodes = validate_episodes(read_table(ep_path), str(ep_path))
        if wl_path is None:
            raise UserError(f"{run_dir}: has {ep_path.name} but no workloads.csv or workloads.jsonl")
        workloads = validate_workloads(read_table(wl_path), str(wl_path))
    else:
        raise UserError(f"{run_dir}: not a run directory (no {runstore.DB_NAME}, no episodes.csv or "
                        "episodes.jsonl)")
    grades_path = run_dir / "grades.jsonl"
    grades = read_grades(grades_path) if grades_path.is_file() else []
    return RunTables(source=str(run_dir), episodes=episodes, workloads=workloads, grades=grades, root=run_dir)


def load_files(episodes: Path, workloads: Path, grades: Path | None = None) -> RunTables:
    """Load plain files from elsewhere: an episodes and a workloads table, and optionally grades JSONL."""
    return RunTables(source=f"{episodes}",
                     episodes=validate_episodes(read_table(episodes), str(episodes)),
                     workloads=validate_workloads(read_table(workloads), str(workloads)),
                     grades=read_grades(grades) if grades else [], root=episodes.parent)


@dataclass
class Combined:
    """Several runs joined: episode keys are ``<run index>:<episode_id>`` so runs never collide."""

    episodes: pd.DataFrame
    workloads: pd.DataFrame
    grades: pd.DataFrame
    """One row per (episode key, kind, rater): score, level percents (L1, L2, L3) and the property verdicts."""
    verdicts: pd.DataFrame
    """One row per (episode key, kind, rater, property_id): level and verdict."""
    sources: list[str]
    warnings: list[str]


def combine(runs: list[RunTables]) -> Combined:
    """Join runs; grade rows are attached to episodes of the same run by episode id."""
    eps, wls, grows, vrows, warnings = [], [], [], [], []
    for i, run in enumerate(runs):
        e = run.episodes.copy()
        e["key"] = pd.Series([f"{i}:{x}" for x in e["episode_id"]], index=e.index, dtype=object)
        e["run"] = i
        eps.append(e)
        w = run.workloads.copy()
        known = set(e["episode_id"])
        orphans = sorted(set(w["episode_id"]) - known)
        if orphans:
            warnings.append(f"{run.source}: {len(orphans)} workload row group(s) name unknown episodes "
                            f"(e.g. {orphans[0]!r}); ignored")
        w = w[w["episode_id"].isin(known)].copy()
        # object dtype even when empty: an empty list would make a float64 column that no join accepts
        w["key"] = pd.Series([f"{i}:{x}" for x in w["episode_id"]], index=w.index, dtype=object)
        wls.append(w)
        seen: set[tuple[str, str, str]] = set()
        unknown_items, repeated, ungradable = 0, 0, 0
        for g in run.grades:
            if g.item not in known:
                unknown_items += 1
                continue
            key = (f"{i}:{g.item}", g.kind, g.rater)
            repeated += key in seen
            ungradable += bool(g.error)
            seen.add(key)
            lv = {ls.level: (100.0 * ls.points / ls.max_points if ls.max_points else math.nan) for ls in g.levels}
            grows.append({"key": key[0], "kind": g.kind, "rater": g.rater, "task": g.task, "score": g.score,
                          "L1": lv.get("L1", math.nan), "L2": lv.get("L2", math.nan), "L3": lv.get("L3", math.nan),
                          "n_unknown": g.n_unknown, "error": g.error,
                          "verdicts": {p.property_id: (p.level, p.verdict) for p in g.properties}})
        if unknown_items:
            warnings.append(f"{run.source}: {unknown_items} grade(s) name no episode of this run; ignored")
        if repeated:
            warnings.append(f"{run.source}: {repeated} grade(s) repeat an (episode, kind, rater) graded before "
                            "(judged again, or by a second judge model?); the last line of each counts")
        if ungradable:
            warnings.append(f"{run.source}: {ungradable} grade(s) are of files that could not be graded (no kernel "
                            "or design note, unparseable): they count as graded, every property absent")
    grades = pd.DataFrame(grows, columns=["key", "kind", "rater", "task", "score", "L1", "L2", "L3", "n_unknown",
                                          "error", "verdicts"])
    grades = grades.drop_duplicates(subset=["key", "kind", "rater"], keep="last").reset_index(drop=True)
    for r in grades.itertuples(index=False):
        for pid, (level, verdict) in r.verdicts.items():
            vrows.append({"key": r.key, "kind": r.kind, "rater": r.rater, "property_id": pid, "level": level,
                          "verdict": verdict})
    verdicts = pd.DataFrame(vrows, columns=["key", "kind", "rater", "property_id", "level", "verdict"])
    episodes = pd.concat(eps, ignore_index=True) if eps else pd.DataFrame(columns=[*EPISODE_REQUIRED, "key", "run"])
    workloads = (pd.concat(wls, ignore_index=True) if wls
                 else pd.DataFrame(columns=[*WORKLOAD_REQUIRED, *WORKLOAD_OPTIONAL, "key"]))
    return Combined(episodes=episodes, workloads=workloads, grades=grades.drop(columns=["verdicts"]),
                    verdicts=verdicts, sources=[r.source for r in runs], warnings=warnings)


def load_runs(run_dirs: list[Path], *, episodes: Path | None = None, workloads: Path | None = None,
              grades: Path | None = None) -> list[RunTables]:
    """Run directories, plus one set of plain files when ``episodes`` is given; duplicates are refused."""
    seen: set[Path] = set()
    runs = []
    for d in run_dirs:
        key = d.resolve()
        if key in seen:
            raise UserError(f"{d}: given twice")
        seen.add(key)
        runs.append(load_run_dir(d))
    if episodes is not None or workloads is not None:
        if episodes is None or workloads is None:
            raise UserError("--episodes and --workloads go together (both tables are needed)")
        runs.append(load_files(episodes, workloads, grades))
    elif grades is not None:
        raise UserError("--grades needs --episodes and --workloads (a run directory's grades.jsonl is read "
                        "automatically)")
    if not runs:
        raise UserError("nothing to score: give RUN_DIR(s), or --episodes FILE --workloads FILE")
    return runs


def run_label(run_dir: Path) -> str | None:
    """The name of a run in item ids (``<run>/<episode id>``): episode ids repeat across runs (one run per model),
    so agreement studies and annotation packs qualify them. The store's ``run_id``, else the first ``run_id`` of
    a plain episodes table, else the folder's name; None when ``run_dir`` is not a run directory."""
    import sqlite3

    from d2kgrade import runstore

    db = run_dir / runstore.DB_NAME
    if db.is_file():
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
            try:
                row = con.execute("SELECT run_id FROM runs LIMIT 1").fetchone()
            finally:
                con.close()
        except sqlite3.Error:
            row = None
        return str(row[0]) if row and row[0] else run_dir.resolve().name
    ep = _find(run_dir, "episodes")
    if ep is None:
        return None
    df = read_table(ep)
    if "run_id" in df.columns and len(df) and str(df["run_id"].iloc[0]).strip():
        return str(df["run_id"].iloc[0]).strip()
    return run_dir.resolve().name
