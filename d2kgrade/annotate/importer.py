"""``d2kgrade annotate import``: filled templates and Label Studio exports back into the long ratings table.

With the pack's key, blind ids become the item ids the judges use (the episode id, ``<episode>#proposal`` for a
design note), so people's ratings join the judges' on (item, property). Without it items keep their blind ids.
An empty ``value`` is a question not answered and is left out; ``unknown`` is kept (as a missing rating).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from d2kgrade.agreement.ratings import COLUMNS, check_duplicates, finish_table, item_key, parse_verdict
from d2kgrade.annotate.labelstudio import read_export
from d2kgrade.errors import Problem, SpecError, UserError


def load_key(path: Path) -> dict[str, dict[str, Any]]:
    """The pack key's items: blind id -> episode, kind, task..."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("items"), dict):
        raise UserError(f"{path}: not an annotation pack key (no 'items' mapping)")
    return data["items"]


def _template_rows(path: Path) -> list[dict[str, Any]]:
    from d2kgrade.metrics.tables import read_table

    df = read_table(path)
    missing = [c for c in ("blind_id", "property_id", "value") if c not in df.columns]
    if missing:
        raise SpecError([Problem(str(path), "", f"missing column(s) {', '.join(missing)}; expected the pack's "
                                                "ratings_template.csv columns")])
    rows = []
    for i, r in enumerate(df.to_dict("records"), start=1):
        value = r.get("value")
        if value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == "":
            continue
        rater = str(r.get("annotator") or "").strip() or path.parent.name
        rows.append({"blind_id": str(r["blind_id"]).strip(), "property_id": str(r["property_id"]).strip(),
                     "rater_id": rater, "value": value, "evidence": str(r.get("evidence") or ""), "_where": f"row {i}"})
    return rows


def _labelstudio_rows(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc.msg}); expected a Label Studio JSON or JSON-MIN "
                        "export") from None
    if not isinstance(data, list):
        raise UserError(f"{path}: expected a list of tasks (a Label Studio JSON or JSON-MIN export)")
    try:
        rows = read_export(data, str(path))
    except ValueError as exc:
        raise UserError(f"{path}: {exc}") from None
    for r in rows:
        r["_where"] = f"task {r['blind_id']}"
    return rows


def import_ratings(paths: list[Path], key: Path | None = None) -> pd.DataFrame:
    """The long ratings table from filled templates (.csv) and Label Studio exports (.json)."""
    if not paths:
        raise UserError("no files to import")
    items = load_key(key) if key is not None else None
    out = []
    for path in paths:
        if not path.is_file():
            raise UserError(f"{path}: file not found")
        rows = _labelstudio_rows(path) if path.suffix.lower() == ".json" else _template_rows(path)
        for r in rows:
            try:
                v = parse_verdict(r["value"])
            except ValueError as exc:
                raise SpecError([Problem(str(path), f"{r['_where']}, column value", str(exc))]) from None
            blind = r["blind_id"]
            if items is not None:
                if blind not in items:
                    raise UserError(f"{path}: blind id {blind!r} is not in the key {key}; is it the key of this "
                                    "pack?")
                meta = items[blind]
                item = str(meta.get("item_id") or item_key(str(meta["episode_id"]), str(meta["kind"])))
                task = str(meta["task"])
            else:
                item, task = blind, ""
            out.append({"item_id": item, "property_id": r["property_id"], "rater_id": r["rater_id"],
                        "rater_kind": "human", "value": v, "evidence": r["evidence"], "task": task, "level": ""})
    df = finish_table(out)
    check_duplicates(df, ", ".join(str(p) for p in paths))
    return df[list(COLUMNS)]
