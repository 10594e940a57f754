"""What an evaluation costs on CPU: wall and CPU seconds of every expert reference through the evaluator (the
smoke and hidden workloads under the Triton interpreter), for one or more trees of the code, interleaved.

    python benchmarks/eval_cpu_cost.py --code before=/tmp/before --code after=/tmp/after \\
        --out benchmarks/data/eval_cpu_cost_split.json

Each evaluation runs in a fresh interpreter (``D2KGRADE_EVAL_MODE=spawn``) in its own probe subprocess. The probe
is a child subreaper and, once ``evaluate`` returns, waits for every descendant still alive (killing what is left
after ``--linger-s``), so the CPU time of every process the job started (the job leader, the kernel host, the
evaluator, torch.compile's gcc and compile workers) lands in its ``RUSAGE_CHILDREN``, whether or not the sandbox
waited for it. Spawn mode adds the import of torch to every figure, once per process that imports it.

Trees run in turn on each task, their order reversed on every other task and round (ABBA), so a change of the
machine's load falls on both; the load average is recorded around every evaluation. The probe checks that
``runner`` and ``d2kgrade`` are imported from the tree under test (the venv's editable install points elsewhere).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import ctypes, json, os, resource, signal, sys, time
from pathlib import Path
code = sys.argv[1]
sys.path.insert(0, code)
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans of the job come back here to be reaped and counted
import d2kgrade, runner
from runner.evaluate import evaluate
origin = {m.__name__: m.__file__ for m in (d2kgrade, runner)}
assert all(f.startswith(code + os.sep) for f in origin.values()), origin
t0 = time.time()
r = evaluate(sys.argv[2], Path(sys.argv[3]), device="cpu", seed=int(sys.argv[4]))
wall = time.time() - t0

def children():
    me = str(os.getpid())
    out = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1] == me:
                out.append(int(p))
        except (OSError, IndexError):
            pass
    return out

reaped, killed, deadline = 0, 0, time.time() + float(sys.argv[5])
while True:
    try:
        pid, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    if pid:
        reaped += 1
        continue
    if time.time() > deadline:
        for pid in children():
            os.kill(pid, signal.SIGKILL)
            killed += 1
        deadline = float("inf")
    time.sleep(0.05)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
me = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"status": r.status, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
                  "caller_cpu_s": me.ru_utime + me.ru_stime, "workloads": len(r.workloads),
                  "workload_names": [w.name for w in r.workloads],
                  "checked_calls": sum(w.checked_calls + w.trials for w in r.workloads),
                  "late_reaped": reaped, "late_killed": killed, "imported_from": origin}))
"""


def _tree(spec: str) -> tuple[str, Path]:
    label, sep, path = spec.rpartition("=")
    code = Path(path).resolve()
    if not (code / "runner" / "evaluate.py").is_file():
        sys.exit(f"error: --code {spec}: {code} has no runner/evaluate.py")
    return (label if sep else code.name), code


def _git(code: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(code), *args], capture_output=True, text=True, check=False).stdout.strip()


FLOOR_KERNEL = "def kernel(*args, **kwargs):\n    raise RuntimeError('floor')\n"
"""A submission that fails its first call: what an evaluation costs before any checking (processes, imports, the
first input set and its reference)."""


def _run_one(code: Path, task: str, seed: int, linger_s: float, submission: Path | None = None) -> dict:
    env = {**os.environ, "D2KGRADE_EVAL_MODE": "spawn", "D2KGRADE_SUITE": str(code)}
    t0, load0 = time.time(), os.getloadavg()
    sub = submission or code / "references" / task / "triton.py"
    proc = subprocess.run([sys.executable, "-c", PROBE, str(code), task, str(sub), str(seed), str(linger_s)], capture_output=True, text=True, env=env, cwd=code,
                          timeout=1800, check=False)
    try:
        rec = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        rec = {"status": "error", "stderr": proc.stderr[-1500:]}
    rec.update(elapsed_s=time.time() - t0, load_before=load0, load_after=os.getloadavg())
    if "cpu_s" in rec:
        rec["total_cpu_s"] = rec["cpu_s"] + rec["caller_cpu_s"]
        rec["cpu_s_per_workload"] = rec["total_cpu_s"] / max(rec["workloads"], 1)
    return rec


def _summary(doc: dict, labels: list[str]) -> dict:
    """Per task and label the median over rounds; totals over the tasks every label measured."""
    per_task: dict[str, dict] = {}
    for task, runs in doc["runs"].items():
        row = {}
        for lab in labels:
            ok = [r for r in runs.get(lab, []) if "total_cpu_s" in r]
            if ok:
                row[lab] = {k: statistics.median(r[k] for r in ok)
                            for k in ("total_cpu_s", "cpu_s_per_workload", "wall_s", "workloads", "checked_calls")}
                row[lab]["status"] = sorted({r["status"] for r in ok})
        if len(labels) == 2 and all(lab in row for lab in labels):
            a, b = (row[lab]["total_cpu_s"] for lab in labels)
            row[f"{labels[1]}_over_{labels[0]}"] = b / a if a else None
        per_task[task] = row
    both = [t for t, row in per_task.items() if all(lab in row for lab in labels)]
    totals = {}
    for lab in labels:
        cpu = sum(per_task[t][lab]["total_cpu_s"] for t in both)
        nw = sum(per_task[t][lab]["workloads"] for t in both)
        totals[lab] = {"tasks": len(both), "total_cpu_s": cpu, "workloads": nw,
                       "cpu_s_per_workload": cpu / nw if nw else None,
                       "wall_s": sum(per_task[t][lab]["wall_s"] for t in both)}
    if len(labels) == 2 and both:
        a, b = (totals[lab]["total_cpu_s"] for lab in labels)
        totals[f"{labels[1]}_over_{labels[0]}"] = b / a if a else None
    return {"per_task": per_task, "totals": totals}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--code", action="append", default=None, metavar="[LABEL=]PATH",
                    help="a tree whose runner is measured (repeat for several; default: this checkout)")
    ap.add_argument("--tasks", nargs="*", default=None, help="default: every task with a Triton reference in all trees")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--warmup", type=int, default=1,
                    help="untimed evaluations of the first task per tree first (a cold first run of a tree took 39 s "
                         "wall against 6 s warm, on the same 6 CPU-s)")
    ap.add_argument("--linger-s", type=float, default=30.0,
                    help="how long descendants still alive after evaluate() may run before they are killed")
    ap.add_argument("--floor-reps", type=int, default=0,
                    help="then this many evaluations per tree of a kernel that fails its first call, on the first "
                         "task (the fixed cost of an evaluation)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--summarize", action="store_true",
                    help="only recompute the summary of an existing --out (a run cut short keeps its runs)")
    args = ap.parse_args()
    if args.summarize:
        doc = json.loads(args.out.read_text())
        doc.update(_summary(doc, list(doc["trees"])))
        args.out.write_text(json.dumps(doc, indent=1))
        print(json.dumps(doc["totals"], indent=1))
        return
    trees = [_tree(s) for s in (args.code or [f"this={ROOT}"])]
    labels = [lab for lab, _ in trees]
    if len(set(labels)) != len(labels):
        sys.exit(f"error: --code: labels must differ, got {labels}")
    tasks = args.tasks or sorted(set.intersection(*({p.parent.name for p in (code / "references").glob("*/triton.py")
                                                     if (code / "tasks" / p.parent.name).is_dir()}
                                                    for _, code in trees)))
    doc = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
           "date": datetime.now(UTC).isoformat(), "python": platform.python_version(),
           "cpus": os.cpu_count(), "seed": args.seed, "rounds": args.rounds,
           "trees": {lab: {"code": str(code), "commit": _git(code, "rev-parse", "HEAD"),
                           "dirty": bool(_git(code, "status", "--porcelain", "--untracked-files=no"))}
                     for lab, code in trees},
           "load_before": os.getloadavg(), "runs": {t: {lab: [] for lab in labels} for t in tasks}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for lab, code in trees:
        for _ in range(args.warmup):
            rec = _run_one(code, tasks[0], args.seed, args.linger_s)
            print(f"warm-up {tasks[0]} {lab} {rec.get('status')} {rec['elapsed_s']:.1f} s", flush=True)
    k = 0
    for rnd in range(args.rounds):
        for task in tasks:
            order = trees if k % 2 == 0 else trees[::-1]
            k += 1
            for lab, code in order:
                rec = _run_one(code, task, args.seed + rnd, args.linger_s)
                rec["round"] = rnd
                doc["runs"][task][lab].append(rec)
                print(f"{task} {lab} {rec.get('status')} {rec.get('total_cpu_s', 0):.1f} cpu-s "
                      f"{rec['elapsed_s']:.1f} s load {rec['load_before'][0]:.1f}", flush=True)
                doc["load_after"] = os.getloadavg()
                args.out.write_text(json.dumps(doc, indent=1))
    if args.floor_reps:
        floor = args.out.with_name(args.out.stem + "_floor_kernel.py")
        floor.write_text(FLOOR_KERNEL)
        doc["floor"] = {"task": tasks[0], "kernel": FLOOR_KERNEL, "runs": {lab: [] for lab in labels}}
        for rep in range(args.floor_reps):
            for lab, code in (trees if rep % 2 == 0 else trees[::-1]):
                rec = _run_one(code, tasks[0], args.seed, args.linger_s, submission=floor)
                doc["floor"]["runs"][lab].append(rec)
                print(f"floor {tasks[0]} {lab} {rec.get('status')} {rec.get('total_cpu_s', 0):.1f} cpu-s", flush=True)
        floor.unlink()
        doc["floor"]["median_total_cpu_s"] = {lab: statistics.median(r["total_cpu_s"] for r in runs if "total_cpu_s" in r)
                                              for lab, runs in doc["floor"]["runs"].items()}
    doc.update(_summary(doc, labels))
    args.out.write_text(json.dumps(doc, indent=1))
    for lab, t in doc["totals"].items():
        print(lab, json.dumps(t))


if __name__ == "__main__":
    main()
