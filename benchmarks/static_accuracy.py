"""Precision and recall of the static rater against the hand-labelled corpora, per property, per level, per task.

Two corpora (``present`` is the positive class; ``unknown`` counts as a miss):

- ``corpus``: ``tests/static/corpus/<task>/``, written with the checks (26 tasks); it measures fit.
- ``wild``: ``tests/static/wild/<task>/``, production-style kernels (launcher classes, closures, partials, dicts
  of kernels, multi-file submissions...) labelled before any check was changed for them; it measures how the
  rater generalises. Its first-pass figure (the rater as it was when the labels were committed) is kept under
  ``wild.first_pass`` beside the current one (``wild.final``).
- ``review``: ``tests/static/review/<task>/``, the same for the 19 tasks outside ``wild``: kernels of the other
  valid forms and designs their guidance allows (and weaker ones it does not), written to review each rubric's
  static block against its guidance; ``review.first_pass`` and ``review.final`` likewise.

Prints one line per property, per level and per task, and merges the results into ``--out`` under the corpus's
key (and, for ``wild``, the ``--stage``), keeping the other entries.

    python benchmarks/static_accuracy.py [--corpus corpus|wild|review] [--stage final|first_pass] [TASK ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from d2kgrade.static.corpus import Tally, evaluate
from d2kgrade.suite import Suite

CORPORA = {"corpus": ROOT / "tests" / "static" / "corpus", "wild": ROOT / "tests" / "static" / "wild",
           "review": ROOT / "tests" / "static" / "review"}
STAGED = ("wild", "review")
"""The held-out corpora: each keeps its first-pass figure beside the final one."""


def fmt(x: float | None) -> str:
    return "  n/a" if x is None else f"{x:5.2f}"


def measure(folder: Path, tasks: list[str]) -> dict:
    """Grade every labelled variant of ``tasks`` under ``folder``; print and return the tallies."""
    suite = Suite(ROOT)
    results = {}
    overall: dict[str, Tally] = {}
    print(f"{'property':52s} {'n':>3s} {'acc':>5s} {'prec':>5s} {'rec':>5s}  errors")
    for t in tasks:
        res = evaluate(folder / t, suite.load_rubric(t), suite.load_task(t))
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
    props = [d for r in results.values() for d in r["properties"].values()]
    summary["properties_at_or_above_0.9"] = sum(1 for d in props if (d["accuracy"] or 0) >= 0.9)
    summary["properties"] = len(props)
    return {"summary": summary, "tasks": results}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="*")
    ap.add_argument("--corpus", choices=sorted(CORPORA), default="corpus")
    ap.add_argument("--stage", choices=("final", "first_pass"), default="final",
                    help="wild and review corpora only: which entry to write (first_pass is written once, before tuning)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "data" / "static_accuracy.json")
    args = ap.parse_args()
    folder = CORPORA[args.corpus]
    tasks = args.tasks or sorted(p.name for p in folder.iterdir() if (p / "labels.yaml").is_file())
    res = measure(folder, tasks)
    res["command"] = "python benchmarks/static_accuracy.py --corpus " + args.corpus + (
        f" --stage {args.stage}" if args.corpus in STAGED else "")
    res["date"] = time.strftime("%Y-%m-%d")
    data = json.loads(args.out.read_text()) if args.out.is_file() else {}
    if "summary" in data:  # the earlier layout held the in-repo corpus at the top level
        data = {"corpus": data}
    if args.corpus in STAGED:
        data.setdefault(args.corpus, {})[args.stage] = res
    else:
        data["corpus"] = res
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
