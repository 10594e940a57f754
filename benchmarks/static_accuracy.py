"""Precision and recall of the static rater against the hand-labelled corpus, per property and per level.

Grades every variant under ``tests/static/corpus/<task>/`` with the suite's rubric for that task and compares with
``labels.yaml`` (``present`` is the positive class; ``unknown`` counts as a miss). Prints one line per property,
per level and per task, and writes ``benchmarks/static_accuracy.json``.

    python benchmarks/static_accuracy.py [--out benchmarks/static_accuracy.json] [TASK ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from d2kgrade.static.corpus import Tally, evaluate  # noqa: E402
from d2kgrade.suite import Suite  # noqa: E402

CORPUS = ROOT / "tests" / "static" / "corpus"


def fmt(x: float | None) -> str:
    return "  n/a" if x is None else f"{x:5.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="*")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "static_accuracy.json")
    args = ap.parse_args()
    suite = Suite(ROOT)
    tasks = args.tasks or sorted(p.name for p in CORPUS.iterdir() if (p / "labels.yaml").is_file())
    results = {}
    overall: dict[str, Tally] = {}
    print(f"{'property':52s} {'n':>3s} {'acc':>5s} {'prec':>5s} {'rec':>5s}  errors")
    for t in tasks:
        res = evaluate(CORPUS / t, suite.load_rubric(t))
        results[t] = res
        for pid, d in res["properties"].items():
            print(f"{pid:52s} {d['n']:3d} {fmt(d['accuracy'])} {fmt(d['precision'])} {fmt(d['recall'])}  "
                  + "; ".join(d["errors"]))
        for lv, d in res["levels"].items():
            print(f"{t + ' ' + lv:52s} {d['n']:3d} {fmt(d['accuracy'])} {fmt(d['precision'])} {fmt(d['recall'])}")
            tally = overall.setdefault(lv, Tally())
            for k in ("tp", "fp", "tn", "fn", "unknown"):
                setattr(tally, k, getattr(tally, k) + d[k])
    total = Tally()
    for tally in overall.values():
        for k in ("tp", "fp", "tn", "fn", "unknown"):
            setattr(total, k, getattr(total, k) + getattr(tally, k))
    summary = {lv: t.as_dict() for lv, t in sorted(overall.items())}
    summary["all"] = total.as_dict()
    for lv, d in summary.items():
        print(f"{'ALL ' + lv:52s} {d['n']:3d} {fmt(d['accuracy'])} {fmt(d['precision'])} {fmt(d['recall'])}")
    for d in summary.values():
        d.pop("errors", None)
    args.out.write_text(json.dumps({"summary": summary, "tasks": results}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
