"""Calibrate the fusion rule: per-property reliability of static analysis and of the judge, from hand labels.

Static analysis: the first-pass confusion counts of the held-out corpora (``wild.first_pass`` and
``review.first_pass`` of ``benchmarks/data/static_accuracy.json``, written by ``python benchmarks/static_accuracy.py
--corpus wild|review --stage first_pass`` before any check was tuned on them; their tasks are disjoint, so each
property's counts come from one of them). The judge: ``--judge-grades FILE.jsonl`` (FileGrades of a judge
run over the labelled corpora, ``item`` or ``file`` naming the variant) when a run exists; else the stated prior of
:data:`d2kgrade.judge.calibration.JUDGE_PRIOR`. Writes ``d2kgrade/judge/calibration.json`` (shipped with the
package, read by the fusion rule) and prints the table.

    python benchmarks/static_fusion_calibration.py [--judge-grades grades.jsonl] [--out d2kgrade/judge/calibration.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.static_accuracy import CORPORA
from benchmarks.static_accuracy import STAGED as HELD_OUT  # the corpora whose first pass measures the rater
from d2kgrade.judge.calibration import (
    JUDGE_PRIOR,
    Calibration,
    Counts,
    Reliability,
    calibrate_rater,
    counts_from_accuracy,
)
from d2kgrade.static.corpus import load_labels
from d2kgrade.suite import Suite


def judge_counts(path: Path, suite: Suite) -> dict[str, Counts]:
    """Confusion counts of judge grades (rater ``llm``, kind ``code``) against the corpora's labels."""
    labels: dict[tuple[str, str], dict[str, str]] = {}
    for folder in CORPORA.values():
        for task_dir in sorted(p for p in folder.iterdir() if (p / "labels.yaml").is_file()):
            for name, lab in load_labels(task_dir, suite.load_rubric(task_dir.name)).items():
                labels[(task_dir.name, name)] = lab
    out: dict[str, Counts] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("rater") != "llm" or row.get("kind", "code") != "code":
            continue
        name = Path(row.get("file", "")).name
        lab = labels.get((row.get("task", ""), name)) or labels.get((row.get("task", ""), row.get("item", "")))
        if lab is None:
            continue
        for g in row.get("properties", []):
            want, got = lab.get(g["property_id"]), g["verdict"]
            if want is not None:
                out.setdefault(g["property_id"], Counts()).tally(want == "present", got)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--accuracy", type=Path, default=ROOT / "benchmarks" / "data" / "static_accuracy.json")
    ap.add_argument("--judge-grades", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "d2kgrade" / "judge" / "calibration.json")
    args = ap.parse_args()
    acc = json.loads(args.accuracy.read_text())
    firsts = {name: acc[name]["first_pass"] for name in HELD_OUT if acc.get(name, {}).get("first_pass")}
    if not firsts:
        raise SystemExit(f"{args.accuracy}: no wild.first_pass or review.first_pass entry (run "
                         "benchmarks/static_accuracy.py --corpus wild --stage first_pass on a rater not yet tuned to "
                         "that corpus)")
    s_counts: dict[str, Counts] = {}
    for first in firsts.values():
        s_counts.update(counts_from_accuracy(first))
    static, s_default = calibrate_rater(s_counts, (0.85, 0.85), " + ".join(f"{n} first pass" for n in firsts))
    n_static = sum(c.tp + c.fn + c.tn + c.fp for c in s_counts.values())
    sources = {"static": " + ".join(f"{n} corpus first pass ({f.get('date', '?')})" for n, f in firsts.items())
               + f", {n_static} labelled verdicts"}
    if args.judge_grades is not None:
        j_counts = judge_counts(args.judge_grades, Suite(ROOT))
        judge, j_default = calibrate_rater(j_counts, JUDGE_PRIOR, "measured judge")
        n_judge = sum(c.tp + c.fn + c.tn + c.fp for c in j_counts.values())
        sources["judge"] = f"{args.judge_grades.name} ({n_judge} verdicts)"
    else:
        judge, j_default = {}, Reliability(*JUDGE_PRIOR, 0, "assumed")
        sources["judge"] = f"assumed sensitivity/specificity {JUDGE_PRIOR} (no judge run over the corpora yet)"
    cal = Calibration(static=static, judge=judge, static_default=s_default, judge_default=j_default, sources=sources)
    data = cal.to_json()
    data["command"] = "python benchmarks/static_fusion_calibration.py" + (
        f" --judge-grades {args.judge_grades}" if args.judge_grades else "")
    data["date"] = time.strftime("%Y-%m-%d")
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{'property':52s} {'static se/sp':>14s} {'n':>4s}   judge se/sp")
    for pid in sorted(k for k in static if not k.startswith("*")):
        rs, rj = cal.static_of(pid), cal.judge_of(pid)
        print(f"{pid:52s} {rs.sensitivity:6.2f}/{rs.specificity:4.2f} {rs.n:4d}   "
              f"{rj.sensitivity:.2f}/{rj.specificity:.2f} ({rj.source})")
    for lv in sorted(k for k in static if k.startswith("*")):
        r = static[lv]
        print(f"{lv:52s} {r.sensitivity:6.2f}/{r.specificity:4.2f} {r.n:4d}   (pooled; other tasks use it)")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
