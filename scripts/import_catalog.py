#!/usr/bin/env python3
"""Start a task from the catalog: write tasks/<id>/task.yaml and a rubric skeleton rubrics/<id>.yaml.

The catalog (../shared/catalog.yaml) is the contract for ids, workloads and guidance ids; this copies an entry
into the task format and adds the smoke workload you give. The rubric gets one property per guidance id, with
a judge question built from the guidance text and evidence; refine the prose and add static checks by hand.
Existing files are never overwritten.

    python scripts/import_catalog.py softmax --smoke '{"M": 37, "N": 300}' --smoke-dtype fp32
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CATALOG = ROOT.parent / "shared" / "catalog.yaml"
NOT_MET = ("The code does not implement this, or only names, comments or unreachable code claim it while the "
           "executed data flow does something else.")


def _str_presenter(dumper: yaml.Dumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


yaml.add_representer(str, _str_presenter, Dumper=yaml.SafeDumper)


def dump(data: object) -> str:
    return yaml.safe_dump(data, sort_keys=False, width=118, allow_unicode=True)


def task_doc(entry: dict, smoke: dict, smoke_dtype: str, derived: dict) -> dict:
    doc: dict = {"schema_version": 1}
    for key in ("id", "title", "category", "semantics", "inputs", "outputs", "bound"):
        doc[key] = entry[key]
    if derived:
        doc["derived"] = derived
    for key in ("cost", "tolerance", "workloads"):
        doc[key] = entry[key]
    doc["smoke"] = {"name": "smoke", "params": smoke, "dtype": smoke_dtype,
                    "why": "Tiny irregular shape for CPU runs under the Triton interpreter."}
    doc["guidance"] = entry["guidance"]
    doc["pitfalls"] = entry.get("pitfalls", [])
    return doc


def rubric_doc(entry: dict) -> dict:
    props = []
    for g in entry["guidance"]:
        ev = g.get("evidence", {})
        props.append({
            "id": g["id"],
            "level": g["level"],
            "weight": 1.0,
            "static": {"checks": []},
            "judge": {
                "question": f"Does the kernel implement this design property: {g['text'].strip()}",
                "met": f"Triton: {ev.get('triton', '').strip()} CUDA: {ev.get('cuda', '').strip()}",
                "not_met": NOT_MET,
            },
        })
    return {"schema_version": 1, "task": entry["id"], "version": 1, "properties": props}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("task_id")
    ap.add_argument("--smoke", required=True, help="JSON object of the smoke workload's params")
    ap.add_argument("--smoke-dtype", required=True)
    ap.add_argument("--derived", default="{}", help="JSON object name -> formula")
    ap.add_argument("--catalog", type=Path, default=DEFAULT_CATALOG)
    ap.add_argument("--root", type=Path, default=ROOT)
    args = ap.parse_args(argv)
    catalog = yaml.safe_load(args.catalog.read_text())
    entries = {t["id"]: t for t in catalog["tasks"]}
    if args.task_id not in entries:
        print(f"error: {args.task_id!r} is not in {args.catalog}", file=sys.stderr)
        return 1
    entry = entries[args.task_id]
    task_path = args.root / "tasks" / args.task_id / "task.yaml"
    rubric_path = args.root / "rubrics" / f"{args.task_id}.yaml"
    for path, doc in ((task_path, task_doc(entry, json.loads(args.smoke), args.smoke_dtype,
                                           json.loads(args.derived))),
                      (rubric_path, rubric_doc(entry))):
        if path.exists():
            print(f"kept {path} (exists)")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump(doc))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
