"""How many kernel files the static rater grades per second on one core, in process CPU time.

Grades every expert reference (``references/<id>/*.py|*.cu``) and every corpus variant against its task's rubric,
from bytes on disk to a FileGrade, with the facts cache off (each grade parses from scratch). The process pins
itself to one CPU and times each file ``--rounds`` times with ``time.process_time`` (CPU time of this process,
so time spent waiting for a core does not count), and reports, per set of files:

- ``files_per_second``: files / sum over files of the fastest round (the least disturbed by other processes:
  the figure to compare across runs);
- ``files_per_second_median_rounds``: the same from each file's median round (what a loaded machine gives);
- ``total_over_ast_parse``: CPU time over the fastest ``ast.parse`` of the same text, a calibration that hardly
  depends on the machine (CPython's own parser is a floor no analysis can go below).

Sets: ``references`` (all references with a rubric), ``references_200_lines`` (the references of 150-250 lines:
issue 4's "typical 200-line kernel", target >= 100 files/s) and ``corpus``. The machine's load average (before
and after) and the CPU/wall ratio of the run are written with the results, since CPU time on a shared machine
still grows with contention (shared caches, SMT siblings). Writes ``benchmarks/data/static_speed.json``.

    python benchmarks/static_speed.py [--rounds 7] [--out benchmarks/data/static_speed.json]
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

from d2kgrade.static.extract import extract_facts
from d2kgrade.static.grade import grade_facts
from d2kgrade.static.registry import load_all
from d2kgrade.suite import Suite

BAND = (150, 250)
"""Line counts of the "typical 200-line kernel" set."""


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


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "data" / "static_speed.json")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    suite = Suite(ROOT)
    load_all()
    rubrics = {tid: suite.load_rubric(tid) for tid in suite.task_ids if suite.rubric_path(tid).is_file()}
    todo = [(kind, path, tid, path.read_bytes().decode("utf-8", "replace")) for kind, path, tid in files(suite)]
    for _, path, tid, _ in todo:  # warm-up: imports, lru caches, checks' argument validation
        grade_facts(rubrics[tid], extract_facts(path, cache=False))
    load_before = os.getloadavg()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    times: dict[Path, list[float]] = {p: [] for _, p, _, _ in todo}
    parse: dict[Path, list[float]] = {p: [] for _, p, _, _ in todo}
    for _ in range(args.rounds):  # rounds outside, files inside: a burst of load hits every file alike
        for _, path, tid, text in todo:
            t0 = time.process_time()
            grade_facts(rubrics[tid], extract_facts(path, cache=False))
            t1 = time.process_time()
            times[path].append(t1 - t0)
            if path.suffix == ".py":
                ast.parse(text)
                parse[path].append(time.process_time() - t1)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    rows = []
    for kind, path, tid, text in todo:
        n_checks = sum(len(p.static.checks) for p in rubrics[tid].properties)
        rows.append({"kind": kind, "file": str(path.relative_to(ROOT)), "task": tid,
                     "lines": len(text.splitlines()), "checks": n_checks,
                     "min_ms": round(1000 * min(times[path]), 3),
                     "median_ms": round(1000 * statistics.median(times[path]), 3),
                     "parse_min_ms": round(1000 * min(parse[path]), 3) if parse[path] else None})
    graded = [r for r in rows if r["checks"] > 0]
    refs = [r for r in graded if r["kind"] == "reference"]
    result = {
        "what": "kernel files graded per second on one core, process CPU time "
                "(read + parse + facts + every static check of the rubric + FileGrade)",
        "machine": {"python": platform.python_version(), "cpu": cpu_model(), "cpus": os.cpu_count(),
                    "cores_used": 1, "load_average_before": [round(x, 2) for x in load_before],
                    "load_average_after": [round(x, 2) for x in os.getloadavg()],
                    "cpu_over_wall": round(cpu / wall, 3)},
        "rounds": args.rounds,
        "references": summary(refs),
        "references_200_lines": summary([r for r in refs if BAND[0] <= r["lines"] <= BAND[1]]),
        "corpus": summary([r for r in graded if r["kind"] == "corpus"]),
        "per_file": rows,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for key in ("references", "references_200_lines", "corpus"):
        s = result[key]
        if s:
            print(f"{key:22s} {s['files']:3d} files, {s['mean_lines']:6.1f} lines avg: "
                  f"{s['mean_min_ms_per_file']:6.2f} ms/file, {s['files_per_second']:6.1f} files/s "
                  f"({s['files_per_second_median_rounds']:.1f} on median rounds), "
                  f"{s['total_over_ast_parse']}x ast.parse")
    m = result["machine"]
    print(f"load average {m['load_average_before']} -> {m['load_average_after']} on {m['cpus']} CPUs; "
          f"this process got {m['cpu_over_wall']:.0%} of its core")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
