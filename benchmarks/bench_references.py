"""Every expert reference through the evaluator on this GPU: correctness, timing against eager and torch.compile,
fraction of roofline, the evaluator's own overhead, and a noise study. Writes ``benchmarks/data/references_<gpu>.json``.

    python benchmarks/bench_references.py                       # every task with a reference (~6-8 min, H200)
    python benchmarks/bench_references.py --quick               # fewer reps, no torch.compile baseline
    python benchmarks/bench_references.py --tasks softmax gemm_bf16

Budget: torch.compile warm-up of the baselines dominates a cold run (tens of seconds per workload the first time;
the inductor cache makes reruns fast), so every baseline is first compiled in parallel processes (``--prewarm``)
into the caches the evaluator's workers then hit. Once ``--compile-budget-s`` of warm-up has been spent in the
workers, the remaining tasks are timed without the compiled baseline and the JSON says so. Every figure in the
JSON was measured in this run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from d2kgrade.io import write_json  # noqa: E402
from runner.evaluate import EvalOptions, gpu_info, load_task, run_evaluation  # noqa: E402


def references(root: Path, only: list[str] | None) -> list[tuple[str, Path]]:
    out = []
    for task_dir in sorted((root / "tasks").iterdir()):
        tid = task_dir.name
        if only and tid not in only:
            continue
        if not (task_dir / "task.yaml").is_file() or not (task_dir / "reference.py").is_file():
            continue
        for lang in ("triton", "cuda"):
            path = root / "references" / tid / f"{lang}.py"
            if path.is_file():
                out.append((tid, path))
    return out


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version()}
    try:
        import torch

        out["torch"] = torch.__version__
        out["cuda"] = torch.version.cuda
    except ImportError:
        pass
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        pass
    return out


# ------------------------------------------------------------------------- compiled-baseline prewarm


def _prewarm_init(sem: Any) -> None:
    global _BIG
    _BIG = sem


def _prewarm_one(item: tuple[str, str, str]) -> dict[str, Any]:
    """Compile one workload's baseline exactly as the evaluator's worker does (dynamic=False, one compile thread,
    the same input shapes from the task's input maker), so the worker's own compile is a cache hit."""
    import torch
    import torch._inductor.config as inductor_config

    from runner.direct import load_reference
    from runner.inputs import WorkloadSpec, make_inputs

    task_id, wl_name, device = item
    t0 = time.monotonic()
    big, inputs = False, None
    try:
        task = load_task(ROOT, task_id)
        wl = next(w for w in [*task.workloads, task.smoke] if w.name == wl_name)
        spec = WorkloadSpec.resolve(task, wl)
        big = _input_bytes(spec) > _BIG_BYTES
        if big:
            _BIG.acquire()
        ref = load_reference(ROOT / "tasks" / task_id)
        inputs = make_inputs(ref, spec, seed=0, device=device)
        inductor_config.compile_threads = 1
        torch._dynamo.reset()
        torch.compile(ref.baseline, dynamic=False)(*inputs, **spec.scalars)
        if device == "cuda":
            torch.cuda.synchronize()
        return {"task": task_id, "workload": wl_name, "ok": True, "s": time.monotonic() - t0}
    except Exception as exc:  # noqa: BLE001 - the evaluator compiles it itself then
        return {"task": task_id, "workload": wl_name, "ok": False, "s": time.monotonic() - t0,
                "error": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        inputs = None
        if device == "cuda":
            torch.cuda.empty_cache()
        if big:
            _BIG.release()


_BIG: Any = None
_BIG_BYTES = 4 << 30  # workloads with more input bytes than this prewarm two at a time (GPU memory)


def _input_bytes(spec: Any) -> int:
    import math

    return sum(math.prod(spec.shapes[t.name]) * spec.dtypes[t.name].itemsize for t in spec.task.inputs)


def prewarm(tasks: list[str], procs: int, device: str = "cuda", smoke: bool = False) -> dict[str, Any]:
    """Compile every workload's torch.compile baseline in ``procs`` parallel processes before anything is timed.

    The evaluator compiles the baseline in its worker with one compile thread (inductor's pool threads would trip
    the thread guard), ~5-30 s a workload cold; run serially over 85 workloads that is most of a benchmark run.
    Compiled here first, in parallel, into the same inductor/Triton caches (``TORCHINDUCTOR_CACHE_DIR``,
    ``TRITON_CACHE_DIR``, which the sandbox passes on), the worker's compile is a cache hit. Nothing is timed
    while this runs; the worker still compiles (from cache) and reports that warm-up time.
    """
    import multiprocessing as mp

    items = [(t, w.name, device) for t in tasks
             for w in ([load_task(ROOT, t).smoke] if smoke else load_task(ROOT, t).workloads)]
    t0 = time.monotonic()
    ctx = mp.get_context("spawn")
    with ctx.Pool(procs, initializer=_prewarm_init, initargs=(ctx.BoundedSemaphore(2),)) as pool:
        results = list(pool.imap_unordered(_prewarm_one, items))
    failed = [r for r in results if not r["ok"]]
    print(f"prewarm: {len(items)} baselines compiled in {time.monotonic() - t0:.0f} s on {procs} processes, "
          f"{len(failed)} failed", flush=True)
    return {"procs": procs, "wall_s": time.monotonic() - t0, "items": results}


# ------------------------------------------------------------------------------------------- the run


def row(task: str, lang: str, w: Any, options: EvalOptions) -> dict[str, Any]:
    timed_s = (w.time.median_ms * w.time.reps / 1e3) if w.time else 0.0
    return {
        "task": task, "reference": lang, "workload": w.name, "hidden": w.hidden, "status": w.status,
        "message": w.message[:300], "params": w.params,
        "max_rel_err": max((e.max_rel_err for e in w.errors), default=None),
        "median_ms": w.time.median_ms if w.time else None, "iqr_ms": w.time.iqr_ms if w.time else None,
        "reps": w.time.reps if w.time else 0,
        "eager_ms": w.eager.median_ms if w.eager else None,
        "compiled_ms": w.compiled.median_ms if w.compiled else None,
        "speedup_eager": w.speedup_eager, "speedup_compiled": w.speedup_compiled,
        "beats_best_baseline": (None if w.time is None or (w.eager is None and w.compiled is None) else
                                w.time.median_ms < min(x.median_ms for x in (w.eager, w.compiled) if x)),
        "roofline_floor_ms": w.roofline_floor_ms, "roofline_fraction": w.roofline_fraction,
        "host_ms_per_call": w.host_ms, "checked_calls": w.checked_calls,
        "compile_warmup_s": w.compile_warmup_s, "compile_baseline": options.compile_baseline,
        "evaluator_wall_s": w.wall_s, "evaluator_overhead_s": max(0.0, w.wall_s - timed_s) if w.time else w.wall_s,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", nargs="*", help="task ids (default: every task with a reference kernel)")
    ap.add_argument("--quick", action="store_true", help="fewer reps, no torch.compile baseline")
    ap.add_argument("--out", type=Path, help="output JSON (default benchmarks/data/references_<gpu>.json)")
    ap.add_argument("--noise-task", default="softmax", help="task whose reference the noise study repeats")
    ap.add_argument("--noise-runs", type=int, default=None, help="repeated evaluations for the noise study (5)")
    ap.add_argument("--compile-budget-s", type=float, default=180.0,
                    help="torch.compile warm-up seconds after which compiled baselines are skipped")
    ap.add_argument("--timeout-s", type=float, default=600.0, help="per evaluation")
    ap.add_argument("--prewarm", type=int, default=6, metavar="PROCS",
                    help="compile the torch.compile baselines in PROCS parallel processes first (0: off)")
    args = ap.parse_args()

    gpu = gpu_info(0)
    if gpu is None:
        print("no CUDA GPU visible; this benchmark needs one", file=sys.stderr)
        return 2
    slug = "h200" if "H200" in gpu["name"] else gpu["name"].lower().replace(" ", "-")
    out_path = args.out or ROOT / "benchmarks" / "data" / f"references_{slug}.json"
    quick = args.quick
    base = EvalOptions(target_s=0.15 if quick else 0.3, min_reps=20, max_reps=150 if quick else 400,
                       compile_baseline=not quick)
    noise_runs = args.noise_runs or 5
    t_start = time.monotonic()
    rows: list[dict[str, Any]] = []
    evals: list[dict[str, Any]] = []
    compile_spent = 0.0
    ceilings = None
    noise: dict[str, Any] = {}

    def report(complete: bool) -> dict[str, Any]:
        return {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "gpu": gpu["name"], "driver": gpu["driver"], "compute_cap": gpu["compute_cap"], **versions(),
            "complete": complete, "quick": quick, "options": base.__dict__, "ceilings": ceilings,
            "total_wall_s": time.monotonic() - t_start, "compile_warmup_total_s": compile_spent,
            "evaluations": evals, "workloads": rows, "noise": noise, "prewarm": warm,
        }

    todo = references(ROOT, args.tasks)
    warm: dict[str, Any] = {}
    if base.compile_baseline and args.prewarm > 0:
        default_cache = str(Path(tempfile.gettempdir()) / "d2k_inductor")
        cache = Path(os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", default_cache))
        os.environ.setdefault("TRITON_CACHE_DIR", str(cache / "triton"))
        warm = prewarm(sorted({t for t, _ in todo}), args.prewarm)

    # The noise study first (nothing else runs on the GPU now; a run cut short by a time limit still has it).
    noise_ref = [p for t, p in references(ROOT, [args.noise_task])]
    if noise_ref:
        per_wl: dict[str, list[float]] = {}
        for _ in range(noise_runs):
            r = run_evaluation(args.noise_task, noise_ref[0], suite_root=ROOT, device="cuda", workloads="all",
                               hidden=False, timing=True, timeout_s=args.timeout_s,
                               options=EvalOptions(**{**base.__dict__, "compile_baseline": False}))
            for w in r.workloads:
                if w.time:
                    per_wl.setdefault(w.name, []).append(w.time.median_ms)
        noise = {"task": args.noise_task, "runs": noise_runs, "workloads": {
            name: {"medians_ms": xs, "spread_pct": 100 * (max(xs) - min(xs)) / statistics.median(xs),
                   "stdev_pct": 100 * statistics.pstdev(xs) / statistics.mean(xs)} for name, xs in per_wl.items()}}

        write_json(out_path, report(complete=False))

    for task, path in todo:
        opts = base
        if base.compile_baseline and compile_spent > args.compile_budget_s:
            opts = EvalOptions(**{**base.__dict__, "compile_baseline": False})
        t0 = time.monotonic()
        try:
            load_task(ROOT, task)
            r = run_evaluation(task, path, suite_root=ROOT, device="cuda", workloads="all", hidden=True,
                               timing=True, timeout_s=args.timeout_s, options=opts)
        except Exception as exc:  # noqa: BLE001 - one broken task must not end the benchmark
            evals.append({"task": task, "reference": path.stem, "status": "evaluator_error",
                          "message": f"{type(exc).__name__}: {exc}"[:500]})
            print(f"{task}: evaluator error: {exc}", file=sys.stderr)
            continue
        ceilings = ceilings or r.ceilings
        compile_spent += sum(w.compile_warmup_s or 0.0 for w in r.workloads)
        evals.append({"task": task, "reference": path.stem, "status": r.status, "message": r.message[:500],
                      "flags": [f.model_dump() for f in r.flags], "wall_s": time.monotonic() - t0})
        rows += [row(task, path.stem, w, opts) for w in r.workloads]
        print(f"{task:24s} {r.status:10s} {time.monotonic() - t0:6.1f} s  {r.message[:100]}", flush=True)
        # Written after every task: a run cut short by a time limit keeps every figure it measured.
        write_json(out_path, report(complete=False))

    final = report(complete=True)
    write_json(out_path, final)
    _print_table(rows, noise)
    print(f"wrote {out_path} ({final['total_wall_s']:.0f} s)")
    return 0


def _print_table(rows: list[dict[str, Any]], noise: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    def f(x: Any, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    t = Table(title="references on this GPU")
    for col in ("task", "workload", "status", "time us", "eager us", "compile us", "x eager", "x compile",
                "roofline", "overhead s"):
        t.add_column(col, justify="left" if col in ("task", "workload", "status") else "right")
    for r in rows:
        t.add_row(r["task"], r["workload"] + (" (h)" if r["hidden"] else ""), r["status"],
                  f(r["median_ms"] and r["median_ms"] * 1e3, ".1f"), f(r["eager_ms"] and r["eager_ms"] * 1e3, ".1f"),
                  f(r["compiled_ms"] and r["compiled_ms"] * 1e3, ".1f"), f(r["speedup_eager"], ".2f"),
                  f(r["speedup_compiled"], ".2f"), f(r["roofline_fraction"] and 100 * r["roofline_fraction"], ".0f")
                  + ("%" if r["roofline_fraction"] else ""), f(r["evaluator_overhead_s"], ".1f"))
    Console().print(t)
    for name, n in (noise.get("workloads") or {}).items():
        print(f"noise {noise['task']}/{name}: spread of {noise['runs']} medians {n['spread_pct']:.2f}% "
              f"(stdev {n['stdev_pct']:.2f}%)")


if __name__ == "__main__":
    sys.exit(main())
