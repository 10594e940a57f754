"""The long ratings table that agreement studies read, from judge outputs or from people.

One row per (item, property, rater):

| column | meaning |
|---|---|
| ``item_id`` | what was rated: ``<run>/<episode id>`` for a run's kernel, ``...#proposal`` for its design note |
| ``property_id`` | a rubric property id (``softmax.L1.online-normalizer``), or ``score`` for the 0-100 score |
| ``rater_id`` | who: ``static``, ``combined``, ``llm:<model>``, an annotator's name |
| ``rater_kind`` | ``static`` / ``llm`` / ``combined`` / ``human`` |
| ``value`` | 1 present, 0 absent, empty for unknown (a property); 0-100 (``score``) |
| ``evidence`` | the rater's quote or note (free text, may be empty) |

Optional: ``task`` and ``level`` (else taken from the property id ``<task>.<level>.<slug>``), and
``votes_present`` / ``votes_absent`` (how a sampled judge's votes split, for self-consistency).

Inputs: FileGrade JSONL (``grades.jsonl`` of a run, ``d2kgrade judge --json`` output, one object per line),
or CSV/JSONL long tables written by people or by ``d2kgrade annotate import``.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from d2kgrade.errors import Problem, SpecError, UserError
from d2kgrade.schema import GUIDANCE_ID_RE, Rubric

log = logging.getLogger(__name__)

SCORE = "score"
"""``property_id`` of a rater's 0-100 implementation score of an item."""
COLUMNS = ("item_id", "property_id", "rater_id", "rater_kind", "value", "evidence", "task", "level",
           "votes_present", "votes_absent")
REQUIRED = ("item_id", "property_id", "rater_id", "value")
RATER_KINDS = ("static", "llm", "combined", "human")
PROPOSAL_SUFFIX = "#proposal"

_PRESENT = {"1", "1.0", "present", "yes", "y", "true", "met", "t"}
_ABSENT = {"0", "0.0", "absent", "no", "n", "false", "not_met", "not met", "f", "not_applicable"}
_UNKNOWN = {"", "unknown", "?", "na", "n/a", "nan", "none", "unsure"}


def item_key(item: str, kind: str, run: str | None = None) -> str:
    """Item id of a graded file: ``<run>/<episode id>`` for a kernel of a run (``<episode id>`` alone when the
    grade is not from a run directory), with ``#proposal`` appended for a design note."""
    base = f"{run}/{item}" if run else item
    return base if kind == "code" else f"{base}{PROPOSAL_SUFFIX}"


def parse_verdict(value: Any) -> float:
    """1.0 / 0.0 / NaN from the spellings people and judges use; ValueError otherwise."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.nan
    text = str(value).strip().lower()
    if text in _PRESENT:
        return 1.0
    if text in _ABSENT:
        return 0.0
    if text in _UNKNOWN:
        return math.nan
    raise ValueError(f"expected present/absent/unknown (or yes/no, 1/0), got {value!r}")


def _task_level(property_id: str) -> tuple[str, str]:
    m = GUIDANCE_ID_RE.match(property_id)
    return (m.group("task"), m.group("level")) if m else ("", "")


def finish_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for col in ("item_id", "property_id", "rater_id", "rater_kind", "evidence", "task", "level"):
        df[col] = df[col].astype(object).where(df[col].notna(), "")
    for col in ("value", "votes_present", "votes_absent"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    derived = [_task_level(p) for p in df["property_id"]]
    df["task"] = [t or d[0] for t, d in zip(df["task"], derived)]
    df["level"] = [lv or d[1] for lv, d in zip(df["level"], derived)]
    return df


def check_duplicates(df: pd.DataFrame, source: str) -> None:
    dup = df.duplicated(subset=["item_id", "property_id", "rater_id"], keep=False)
    if dup.any():
        r = df[dup].iloc[0]
        raise UserError(f"{source}: rater {r['rater_id']!r} rated property {r['property_id']!r} of item "
                        f"{r['item_id']!r} more than once; expected one rating per (item, property, rater)")


# ------------------------------------------------------------------------------------ judge outputs


def _rater_id(data: dict[str, Any]) -> str:
    """``static``; ``llm:<model>`` and ``combined:<model>`` where the judge model is recorded (a run's
    grades.jsonl can hold the grades of several judge models)."""
    rater = str(data.get("rater", ""))
    info = data.get("rater_info") or {}
    if isinstance(info, dict) and rater == "combined":
        info = info.get("llm") or {}
    if rater in ("llm", "combined") and isinstance(info, dict) and info.get("model"):
        return f"{rater}:{info['model']}"
    return rater


def _votes(details: dict[str, Any]) -> tuple[float, float]:
    samples = details.get("samples")
    if isinstance(samples, list) and samples:
        verdicts = Counter(str(s.get("verdict", "")) for s in samples if isinstance(s, dict))
        return float(verdicts.get("present", 0)), float(verdicts.get("absent", 0))
    votes = details.get("votes")
    if isinstance(votes, dict):
        return float(votes.get("present", 0) or 0), float(votes.get("absent", 0) or 0)
    return math.nan, math.nan


def grades_to_rows(path: Path, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """Rows of the long table from a FileGrade JSONL file (one score row per file, one row per property).

    A grade with ``error`` set is of a file that could not be graded (the episode left no kernel, the file did
    not parse): its verdicts are the grader's default, not a reading of the file, and two raters "agreeing" on
    them is not agreement; such grades are left out and counted in ``skipped``.
    """
    from d2kgrade.grades import FileGrade
    from d2kgrade.io import validate_data
    from d2kgrade.metrics.tables import run_label

    run = run_label(path.parent) if path.name == "grades.jsonl" else None
    rows: list[dict[str, Any]] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}: line {lineno}: not valid JSON ({exc.msg})") from None
        fg = validate_data(FileGrade, data, f"{path}: line {lineno}")
        item = item_key(fg.item, fg.kind, run) if fg.item else item_key(fg.file, fg.kind)
        rid = _rater_id(data)
        if fg.error:
            if skipped is not None:
                skipped.append(f"{path}: line {lineno}")
            continue
        rows.append({"item_id": item, "property_id": SCORE, "rater_id": rid, "rater_kind": fg.rater,
                     "value": fg.score, "evidence": "", "task": fg.task, "level": ""})
        for p in fg.properties:
            vp, va = _votes(p.details) if fg.rater == "llm" else (math.nan, math.nan)
            ev = "; ".join(f"{e.start_line}-{e.end_line}: {e.code[:200]}" for e in p.evidence)
            rows.append({"item_id": item, "property_id": p.property_id, "rater_id": rid, "rater_kind": fg.rater,
                         "value": {"present": 1.0, "absent": 0.0}.get(p.verdict, math.nan), "evidence": ev,
                         "task": fg.task, "level": p.level, "votes_present": vp, "votes_absent": va})
    return rows


# ------------------------------------------------------------------------------------ people's tables


def table_to_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of the long table from a CSV/JSONL long table; errors name the file, the row and the column."""
    from d2kgrade.metrics.tables import read_table

    df = read_table(path)
    if df.empty and not len(df.columns):  # an empty file: nothing to read columns from
        raise UserError(f"{path}: holds no ratings (the file is empty)")
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise SpecError([Problem(str(path), "", f"missing column(s) {', '.join(missing)}; expected "
                                                f"{', '.join(REQUIRED)} (and optionally rater_kind, evidence, task, "
                                                "level, votes_present, votes_absent)")])
    rows = []
    for i, r in enumerate(df.to_dict("records"), start=1):
        where = f"row {i}"
        out = {c: ("" if r.get(c) is None or (isinstance(r.get(c), float) and math.isnan(r[c])) else r[c])
               for c in COLUMNS if c in r}
        for c in ("item_id", "property_id", "rater_id"):
            if str(out.get(c, "")).strip() == "":
                raise SpecError([Problem(str(path), f"{where}, column {c}", "is empty")])
            out[c] = str(out[c]).strip()
        kind = str(out.get("rater_kind", "") or "human").strip()
        if kind not in RATER_KINDS:
            raise SpecError([Problem(str(path), f"{where}, column rater_kind",
                                     f"expected one of {', '.join(RATER_KINDS)}, got {kind!r}")])
        out["rater_kind"] = kind
        raw = out.get("value", "")
        if out["property_id"] == SCORE:
            try:
                v = float(raw) if str(raw).strip() != "" else math.nan
            except ValueError:
                raise SpecError([Problem(str(path), f"{where}, column value",
                                         f"a score is a number from 0 to 100, got {raw!r}")]) from None
            if math.isfinite(v) and not 0 <= v <= 100:
                raise SpecError([Problem(str(path), f"{where}, column value",
                                         f"a score is a number from 0 to 100, got {raw!r}")])
        else:
            try:
                v = parse_verdict(raw)
            except ValueError as exc:
                raise SpecError([Problem(str(path), f"{where}, column value", str(exc))]) from None
        out["value"] = v
        rows.append(out)
    return rows


def _looks_like_grades(path: Path) -> bool:
    if path.suffix.lower() not in (".jsonl", ".ndjson", ".json"):
        return False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                return False
            return isinstance(obj, dict) and "properties" in obj and "rater" in obj
    return False


def read_ratings(paths: list[Path], notes: list[str] | None = None) -> pd.DataFrame:
    """The long table from several files (FileGrade JSONL or long tables, told apart by content).

    One rater id in several files is one rater (two runs' ``grades.jsonl`` hold the same ``static`` rater on
    different items), unless the files rate the same (item, property): then each file's rater gets the file's
    name appended (``llm:gpt-4.1@judge_a``) so they stay apart. Grades of files that could not be graded are left
    out and listed in ``notes``.
    """
    if not paths:
        raise UserError("no ratings given: pass FileGrade JSONL files or CSV/JSONL long tables")
    stems = [p.stem for p in paths]
    labels = [p.stem if stems.count(p.stem) == 1 else f"{p.parent.name}/{p.stem}" for p in paths]
    frames = []
    skipped: list[str] = []
    for p, label in zip(paths, labels):
        if p.is_dir():  # a run directory: its judges' grades
            if not (p / "grades.jsonl").is_file():
                raise UserError(f"{p}: a directory without grades.jsonl (judge the run first: d2kgrade judge --run)")
            p = p / "grades.jsonl"
        if not p.is_file():
            raise UserError(f"{p}: file not found")
        rows = grades_to_rows(p, skipped) if _looks_like_grades(p) else table_to_rows(p)
        if not rows:
            raise UserError(f"{p}: holds no ratings" + (" that could be used (every grade is of a file that "
                                                        "could not be graded)" if skipped else ""))
        df = finish_table(rows)
        check_duplicates(df, str(p))
        df["_source"] = label
        frames.append(df)
    if skipped and notes is not None:
        notes.append(f"{len(skipped)} grade(s) of files that could not be graded (no kernel or note, unparseable) "
                     f"are left out of agreement (e.g. {skipped[0]})")
    units: dict[str, list[set[tuple[str, str]]]] = {}
    for df in frames:
        for rid, g in df.groupby("rater_id"):
            units.setdefault(str(rid), []).append(set(zip(g["item_id"], g["property_id"])))
    clash = {rid for rid, sets in units.items()
             if len(sets) > 1 and any(a & b for i, a in enumerate(sets) for b in sets[i + 1:])}
    for df in frames:
        shared = df["rater_id"].isin(clash)
        df.loc[shared, "rater_id"] = df.loc[shared, "rater_id"] + "@" + df.loc[shared, "_source"]
    out = pd.concat(frames, ignore_index=True).drop(columns=["_source"])
    check_duplicates(out, ", ".join(str(p) for p in paths))
    # score rows written by people carry no task: take it from the item's property rows
    task_of = out[out["task"] != ""].groupby("item_id")["task"].first()
    blank = out["task"] == ""
    out.loc[blank, "task"] = out.loc[blank, "item_id"].map(task_of).fillna("")
    return out


def write_ratings(df: pd.DataFrame, path: Path) -> None:
    """Write the long table as CSV (values: 1, 0, empty; scores as numbers)."""
    from d2kgrade.io import atomic_write_text

    atomic_write_text(path, df[list(COLUMNS)].to_csv(index=False))


def add_derived_scores(df: pd.DataFrame, rubrics: dict[str, Rubric]) -> pd.DataFrame:
    """Add ``score`` rows for (item, rater) pairs that rated every property of the task's rubric but gave no
    score (people rate properties; the score follows from the rubric's weights)."""
    from d2kgrade.grades import PropertyGrade, implementation_score

    have = set(zip(df.loc[df["property_id"] == SCORE, "item_id"], df.loc[df["property_id"] == SCORE, "rater_id"]))
    props = df[df["property_id"] != SCORE]
    rows = []
    for (item, rater), g in props.groupby(["item_id", "rater_id"]):
        task = g["task"].iloc[0]
        if (item, rater) in have or task not in rubrics:
            continue
        rubric = rubrics[task]
        ids = {p.id for p in rubric.properties if not p.deprecated}
        rated = {pid: v for pid, v in zip(g["property_id"], g["value"]) if math.isfinite(v)}
        if not ids <= set(rated):
            continue
        grades = [PropertyGrade(property_id=p.id, level=p.level, rater="human",
                                verdict="present" if rated[p.id] == 1 else "absent")
                  for p in rubric.properties if p.id in ids]
        score, _ = implementation_score(rubric, grades)
        rows.append({"item_id": item, "property_id": SCORE, "rater_id": rater, "rater_kind": g["rater_kind"].iloc[0],
                     "value": score, "evidence": "derived from the property ratings", "task": task, "level": ""})
    if not rows:
        return df
    return pd.concat([df, finish_table(rows)], ignore_index=True)
