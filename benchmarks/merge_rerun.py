"""Fold a later ``bench_references.py`` run of some tasks into the full-suite JSON, keeping what it replaced.

    python benchmarks/merge_rerun.py benchmarks/data/runs/round7/bench_changed_tasks.json \\
        --into benchmarks/data/references_h200.json --why "references retuned (round 7)" [--tasks swiglu layernorm]

For every task of the rerun (or of ``--tasks``), the rerun's workload and evaluation rows replace the full run's,
and a ``reruns`` entry records the rerun's command, date, options, GPU, versions and measured ceilings (its rows'
roofline fractions are against those), why it was made, and the rows it replaced, so no measured figure is lost. A rerun from another GPU, or one that did not complete, is refused:
the figures of one file must come from one kind of machine and from finished runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from d2kgrade.io import write_json  # noqa: E402

PROVENANCE = ("command", "date", "gpu", "driver", "python", "torch", "cuda", "triton", "total_wall_s", "options",
              "ceilings")  # the rerun's own measured rates: its rows' roofline fractions use them


def merge(full: dict[str, Any], rerun: dict[str, Any], tasks: list[str] | None, why: str, source: str
          ) -> dict[str, Any]:
    """``full`` with the rerun's rows for ``tasks`` (default: every task in the rerun) in place of its own."""
    if rerun.get("gpu") != full.get("gpu"):
        raise ValueError(f"{source}: measured on {rerun.get('gpu')!r}, the full run on {full.get('gpu')!r}")
    if not rerun.get("complete"):
        raise ValueError(f"{source}: the rerun did not complete (complete = false)")
    in_rerun = {row["task"] for row in rerun["workloads"]}
    chosen = set(tasks) if tasks else in_rerun
    missing = sorted(chosen - in_rerun)
    if missing:
        raise ValueError(f"{source}: no rows for {', '.join(missing)}")
    out = dict(full)
    replaced = {key: [row for row in full.get(key, []) if row["task"] in chosen] for key in ("workloads",
                                                                                             "evaluations")}
    for key in ("workloads", "evaluations"):
        kept = [row for row in full.get(key, []) if row["task"] not in chosen]
        out[key] = kept + [row for row in rerun.get(key, []) if row["task"] in chosen]
    entry = {"tasks": sorted(chosen), "why": why, "source": source,
             **{k: rerun[k] for k in PROVENANCE if k in rerun}, "replaced": replaced}
    out["reruns"] = [*full.get("reruns", []), entry]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rerun", type=Path, help="JSON written by bench_references.py for some tasks")
    ap.add_argument("--into", type=Path, default=ROOT / "benchmarks" / "data" / "references_h200.json")
    ap.add_argument("--tasks", nargs="*", default=None, help="tasks to take from the rerun (default: all of them)")
    ap.add_argument("--why", required=True, help="why the tasks were rerun (kept in the reruns entry)")
    args = ap.parse_args()
    try:
        full = json.loads(args.into.read_text())
        rerun = json.loads(args.rerun.read_text())
        source = args.rerun.resolve().relative_to(ROOT).as_posix() if args.rerun.resolve().is_relative_to(ROOT) \
            else str(args.rerun)
        merged = merge(full, rerun, args.tasks, args.why, source)
    except (OSError, json.JSONDecodeError, KeyError, ValueError) as exc:
        print(f"merge_rerun: {exc}", file=sys.stderr)
        return 2
    write_json(args.into, merged)
    print(f"{args.into}: {len(merged['workloads'])} workload rows, {len(merged['reruns'])} reruns recorded")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
