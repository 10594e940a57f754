"""What an evaluation costs on CPU: wall and CPU seconds of every expert reference through the evaluator (the
smoke and hidden workloads under the Triton interpreter), for this checkout or another tree of the code.

    python benchmarks/eval_cpu_cost.py --out benchmarks/data/eval_cpu_cost_after.json
    python benchmarks/eval_cpu_cost.py --code /tmp/before --out benchmarks/data/eval_cpu_cost_before.json

Each evaluation runs in a fresh interpreter (``D2KGRADE_EVAL_MODE=spawn``) in its own subprocess, so the CPU time
of every process it starts (the job leader, the kernel host, the evaluator) is reaped into the child's
``RUSAGE_CHILDREN``; spawn mode adds the import of torch to every figure, the same before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import json, resource, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from runner.evaluate import evaluate
t0 = time.time()
r = evaluate(sys.argv[2], Path(sys.argv[3]), device="cpu", seed=int(sys.argv[4]))
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
me = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"status": r.status, "wall_s": time.time() - t0, "cpu_s": ru.ru_utime + ru.ru_stime,
                  "caller_cpu_s": me.ru_utime + me.ru_stime, "workloads": len(r.workloads),
                  "checked_calls": sum(w.checked_calls + w.trials for w in r.workloads)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--code", type=Path, default=ROOT, help="the tree whose runner is measured")
    ap.add_argument("--tasks", nargs="*", default=None)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    code = args.code.resolve()
    tasks = args.tasks or sorted(p.name for p in (code / "tasks").iterdir() if (code / "references" / p.name /
                                                                               "triton.py").is_file())
    rev = subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    doc = {"command": " ".join(sys.argv), "date": datetime.now(timezone.utc).isoformat(), "code": str(code),
           "commit": rev, "python": platform.python_version(), "cpus": os.cpu_count(),
           "load_before": os.getloadavg(), "tasks": {}}
    env = {**os.environ, "D2KGRADE_EVAL_MODE": "spawn", "D2KGRADE_SUITE": str(code)}
    for task in tasks:
        t0 = time.time()
        proc = subprocess.run([sys.executable, "-c", PROBE, str(code), task,
                               str(code / "references" / task / "triton.py"), str(args.seed)],
                              capture_output=True, text=True, env=env, timeout=1800)
        try:
            rec = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            rec = {"status": "error", "stderr": proc.stderr[-1500:]}
        rec["elapsed_s"] = time.time() - t0
        doc["tasks"][task] = rec
        print(task, rec.get("status"), f"{rec.get('cpu_s', 0):.1f} cpu-s", f"{rec['elapsed_s']:.1f} s", flush=True)
        doc["load_after"] = os.getloadavg()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1))
    done = [r for r in doc["tasks"].values() if "cpu_s" in r]
    doc["total_cpu_s"] = sum(r["cpu_s"] for r in done)
    doc["total_wall_s"] = sum(r["wall_s"] for r in done)
    args.out.write_text(json.dumps(doc, indent=1))
    print(f"total: {doc['total_cpu_s']:.0f} cpu-s, {doc['total_wall_s']:.0f} s over {len(done)} tasks")


if __name__ == "__main__":
    main()
