"""Are the tolerances right? Measures, on this GPU, how much of each task's tolerance honest implementations use.

For every task, catalog workload and input distribution: draw the inputs (seeded), compute the float64 oracle
(``reference``), and compare two honest implementations with it through the evaluator's own comparison:

- ``baseline``: the task's PyTorch baseline, eager (cuBLAS, cuDNN, FlashAttention...: what production code uses);
- ``expert``: the suite's expert reference kernel (``references/<id>/triton.py``).

Per output it records ``tol_ratio``, the share of the tolerance the worst element uses (max over elements of
``|out - ref| / (atol + rtol*|ref|)``; above 1 fails), and the number of elements out of tolerance. A tolerance is
right when both honest implementations stay well below 1 on every draw; the CPU tests show that zeros, constants,
echoes and the lower-precision shortcuts land above it. Outputs that a task checks with its own ``check`` (top-k
indices, ...) are reported as that check's verdict. A failure keeps its full traceback, so this script is also
the first thing to run on a new GPU. Trusted code only: nothing here is sandboxed.

    python benchmarks/tolerance_audit.py [--tasks softmax topk] [--seed 7] [--out benchmarks/data/tolerance_audit_h200.json]
    TRITON_INTERPRET=1 python benchmarks/tolerance_audit.py --device cpu --out /tmp/audit.json   # smoke workloads

Writes the JSON after every task, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from benchmarks.bench_references import references, versions  # noqa: E402
from d2kgrade.io import write_json  # noqa: E402
from runner.direct import compare_outputs, load_reference  # noqa: E402
from runner.evaluate import gpu_info, load_task  # noqa: E402
from runner.inputs import WorkloadSpec, distributions, make_inputs  # noqa: E402
from runner.loading import load_module  # noqa: E402


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def measure(name: str, fn: Any, inputs: tuple[Any, ...], expected: Any, spec: WorkloadSpec, ref: Any,
            device: str) -> dict:
    """Call ``fn`` on clones of ``inputs`` and compare with ``expected``; never raises."""
    try:
        got = fn(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs], **spec.scalars)
        _sync(device)
        mism = compare_outputs(spec, got, expected, inputs=inputs, ref=ref)
    except Exception:  # noqa: BLE001 - a crash is a finding, recorded with its traceback
        return {"impl": name, "ok": False, "error": traceback.format_exc()[-4000:]}
    return {"impl": name, "ok": all(m.ok for m in mism), "outputs": [
        {"name": m.name, "ok": m.ok, "tol_ratio": _finite(m.tol_ratio), "n_bad": m.n_bad, "n_total": m.n_total,
         "max_abs_err": m.max_abs_err, "reason": m.reason[:300]} for m in mism]}


def _summary(res: dict) -> str:
    """``expert ok 0.31`` / ``baseline FAIL 1.42 (3 bad)`` / ``expert ERROR``: the worst tolerance share."""
    if "error" in res:
        return f"{res['impl']} ERROR"
    ratios = [o["tol_ratio"] for o in res["outputs"] if o.get("n_total")]
    worst = "inf" if any(x is None for x in ratios) else f"{max(ratios, default=0.0):.3f}"
    bad = sum(o["n_bad"] for o in res["outputs"])
    return f"{res['impl']} {'ok' if res['ok'] else 'FAIL'} {worst}" + (f" ({bad} bad)" if bad else "")


def audit_task(task_id: str, kernel_path: Path, seed: int, device: str = "cuda",
               on_row: Any = None) -> list[dict]:
    """Every catalog workload (the smoke workload on ``cpu``) and distribution of one task; ``on_row(rows)`` is
    called after each draw (to save them before the next draw can crash the process)."""
    task = load_task(ROOT, task_id)
    ref = load_reference(ROOT / "tasks" / task_id)
    try:
        kernel = load_module(kernel_path, prefix="d2k_audit").kernel
    except Exception:  # noqa: BLE001
        return [{"task": task_id, "error": "loading the expert reference failed:\n" + traceback.format_exc()[-4000:]}]
    rows = []
    for wl in (task.workloads if device == "cuda" else [task.smoke]):
        spec = WorkloadSpec.resolve(task, wl)
        for i, dist in enumerate(distributions(ref)):
            t0 = time.monotonic()
            row: dict[str, Any] = {"task": task_id, "workload": wl.name, "dist": dist, "seed": seed + i,
                                   "tolerance": {k: list(v) for k, v in task.tolerance.items()}}
            try:
                inputs = make_inputs(ref, spec, seed=seed + i, device=device, dist=dist)
                expected = ref.reference(*inputs, **spec.scalars)
                _sync(device)
            except Exception:  # noqa: BLE001
                row["error"] = "inputs or oracle failed:\n" + traceback.format_exc()[-4000:]
                rows.append(row)
                continue
            row["results"] = [measure("baseline", ref.baseline, inputs, expected, spec, ref, device),
                              measure("expert", kernel, inputs, expected, spec, ref, device)]
            row["wall_s"] = time.monotonic() - t0
            rows.append(row)
            if on_row is not None:
                on_row(rows)
            print(f"{task_id:24s} {wl.name:24s} {dist:16s} " + "  ".join(_summary(r) for r in row["results"]),
                  flush=True)
            del inputs, expected
            gc.collect()
            if device == "cuda":
                torch.cuda.empty_cache()
    return rows


def _audit_in_subprocess(task_id: str, args: argparse.Namespace) -> list[dict]:
    """One task in a child process; its rows, or one error row with the child's output tail."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        part = Path(tmp) / "part.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--no-isolate", "--tasks", task_id, "--seed",
               str(args.seed), "--device", args.device, "--out", str(part)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.task_timeout_s)
            tail, rc = (proc.stdout + proc.stderr)[-4000:], proc.returncode
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            tail, rc = out[-4000:] + f"\n(timed out after {args.task_timeout_s:.0f} s)", None
        sys.stdout.write("".join(line + "\n" for line in tail.splitlines() if line.startswith(task_id)))
        rows = json.loads(part.read_text())["rows"] if part.is_file() else []
        if rc != 0:
            rows.append({"task": task_id, "error": f"the audit process ended with {rc}:\n{tail}"})
        return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="*")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--no-isolate", dest="isolate", action="store_false",
                    help="audit every task in this process (default: one subprocess per task, so an illegal memory "
                         "access, which leaves the CUDA context unusable, costs one task and not the run)")
    ap.add_argument("--task-timeout-s", type=float, default=300.0)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: the smoke workloads under TRITON_INTERPRET=1 (a check of this script, not an audit)")
    args = ap.parse_args()
    gpu = gpu_info(0) if args.device == "cuda" else {"name": "cpu", "driver": None}
    if gpu is None:
        print("no CUDA GPU visible; this audit needs one (or --device cpu for the smoke workloads)", file=sys.stderr)
        return 2
    slug = "h200" if "H200" in gpu["name"] else gpu["name"].lower().replace(" ", "-")
    out_path = args.out or ROOT / "benchmarks" / "data" / f"tolerance_audit_{slug}.json"
    t_start = time.monotonic()
    rows: list[dict] = []

    def report(complete: bool) -> dict:
        return {"command": " ".join([Path(sys.executable).name, *sys.argv]),
                "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "gpu": gpu["name"], "driver": gpu["driver"], **versions(), "complete": complete,
                "total_wall_s": time.monotonic() - t_start, "rows": rows}

    todo = [(t, p) for t, p in references(ROOT, args.tasks) if p.name == "triton.py"]
    if args.tasks:  # in the order given (the ones most likely to fail first, when time is short)
        todo.sort(key=lambda tp: args.tasks.index(tp[0]))
    for task_id, path in todo:
        if args.isolate:
            rows += _audit_in_subprocess(task_id, args)
        else:
            done = list(rows)
            rows += audit_task(task_id, path, args.seed, args.device,
                               on_row=lambda new: write_json(out_path, {**report(False), "rows": done + new}))
        write_json(out_path, report(complete=False))
    write_json(out_path, report(complete=True))
    bad = [r for r in rows if "error" in r or any(not x["ok"] for x in r.get("results", []))]
    print(f"wrote {out_path}: {len(rows)} draws, {len(bad)} with a failure ({time.monotonic() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
