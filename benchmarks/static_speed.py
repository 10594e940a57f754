"""How many kernel files the static rater grades per second, on one core.

Grades every expert reference (``references/<id>/*.py``, 90-390 lines, ~245 on average: the "typical 200-line
kernel") and every corpus variant against its task's rubric, from bytes on disk to a FileGrade, with the facts
cache off (each grade parses from scratch). Pins itself to one CPU and repeats each file ``--rounds`` times.
Reports, per file, the fastest round (least disturbed by other processes: the figure to compare across machines)
and the median, plus the fastest ``ast.parse`` of the same text alone as a calibration: CPython's own parser is a
floor no analysis can go below, and the ratio total/parse hardly depends on the machine's load. Writes
``benchmarks/static_speed.json``.

    python benchmarks/static_speed.py [--rounds 5] [--out benchmarks/static_speed.json]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from d2kgrade.static.extract import extract_facts  # noqa: E402
from d2kgrade.static.grade import grade_facts  # noqa: E402
from d2kgrade.static.registry import load_all  # noqa: E402
from d2kgrade.suite import Suite  # noqa: E402


def files(suite: Suite) -> list[tuple[str, Path, str]]:
    out = []
    for tid in suite.task_ids:
        if not suite.rubric_path(tid).is_file():
            continue
        for path in suite.reference_kernels(tid).values():
            out.append(("reference", path, tid))
        corpus = ROOT / "tests" / "static" / "corpus" / tid
        if corpus.is_dir():
            out += [("corpus", p, tid) for p in sorted(corpus.iterdir()) if p.suffix in (".py", ".cu")]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "static_speed.json")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    suite = Suite(ROOT)
    load_all()
    rubrics = {tid: suite.load_rubric(tid) for tid in suite.task_ids if suite.rubric_path(tid).is_file()}
    rows = []
    for kind, path, tid in files(suite):
        times, parse = [], []
        text = path.read_text(errors="replace")
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            facts = extract_facts(path, cache=False)
            grade_facts(rubrics[tid], facts)
            times.append(time.perf_counter() - t0)
            if path.suffix == ".py":
                t0 = time.perf_counter()
                ast.parse(text)
                parse.append(time.perf_counter() - t0)
        n_checks = sum(len(p.static.checks) for p in rubrics[tid].properties)
        rows.append({"kind": kind, "file": str(path.relative_to(ROOT)), "task": tid,
                     "lines": len(text.splitlines()), "checks": n_checks,
                     "min_ms": round(1000 * min(times), 3), "median_ms": round(1000 * statistics.median(times), 3),
                     "parse_min_ms": round(1000 * min(parse), 3) if parse else None})

    def summary(sel: list[dict]) -> dict:
        if not sel:
            return {}
        best = [r["min_ms"] for r in sel]
        med = [r["median_ms"] for r in sel]
        parsed = [r for r in sel if r["parse_min_ms"]]
        return {"files": len(sel), "mean_lines": round(statistics.mean(r["lines"] for r in sel), 1),
                "mean_min_ms_per_file": round(statistics.mean(best), 3),
                "files_per_second": round(1000 * len(sel) / sum(best), 1),
                "files_per_second_median_rounds": round(1000 * len(sel) / sum(med), 1),
                "max_min_ms": round(max(best), 3),
                "total_over_ast_parse": round(sum(r["min_ms"] for r in parsed) / sum(r["parse_min_ms"] for r in parsed),
                                              2) if parsed else None}

    graded = [r for r in rows if r["checks"] > 0]
    result = {
        "what": "kernel files graded per second on one core (parse + facts + every static check of the rubric)",
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
                    "cores_used": 1, "load_average_1min": round(os.getloadavg()[0], 2)},
        "rounds": args.rounds,
        "references_with_checks": summary([r for r in graded if r["kind"] == "reference"]),
        "corpus_with_checks": summary([r for r in graded if r["kind"] == "corpus"]),
        "all_files": summary(rows),
        "per_file": rows,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for key in ("references_with_checks", "corpus_with_checks", "all_files"):
        s = result[key]
        if s:
            print(f"{key:24s} {s['files']:3d} files, {s['mean_lines']:6.1f} lines avg: "
                  f"{s['mean_min_ms_per_file']:7.2f} ms/file, {s['files_per_second']:7.1f} files/s "
                  f"({s['files_per_second_median_rounds']:.1f} on median rounds), "
                  f"{s['total_over_ast_parse']}x ast.parse")
    print(f"load average during the run: {result['machine']['load_average_1min']}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
