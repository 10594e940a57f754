"""Why GPU timing was unstable, and which timing loop is stable: one script, one device call.

    python3 benchmarks/timing_study.py --out $OUT/timing_study_h200.json

Part A (fresh processes): each of ``--procs`` fresh processes loads the softmax expert reference and, per workload,
times it with every variant below, in an order rotated per process, after ``--idle-s`` of host-only work (what
the correctness trials before timing look like to the GPU: a few small launches, mostly idle). The SM clock is
sampled through NVML during each variant. The spread of the per-process medians is what an evaluation would see.

- ``legacy_20`` / ``legacy_100``: the loop of run 1 (per-rep device sync, host-side check with a sync after every
  call), 3 probe reps then 20 or 100 timed reps;
- ``perrep_nocheck_100``: the same loop without the check (how baselines were timed);
- ``batch_100``: :func:`runner.timing.timed_reps`, all reps queued back to back, on-GPU recheck, no warm-up;
- ``batch_warm_100`` / ``batch_warm_20``: the same after a 100 ms warm-up;
- ``batch_warm_100_readflush``: the same, L2 evicted by reading the flush buffer instead of zeroing it (no dirty
  lines left for the timed kernel to write back).

Part B (the real evaluator): ``--evals`` evaluations of the softmax reference (all workloads, quick options), with
the warm-up, then ``--evals-nowarm`` without it. Everything is written to ``--out`` after each step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TASK = "softmax"
WORKLOADS = ("rows_4k", "short_rows_fp32", "vocab_rows", "few_huge_rows")
VARIANTS = ("legacy_20", "legacy_100", "perrep_nocheck_100", "batch_100", "batch_warm_100", "batch_warm_20",
            "batch_warm_100_readflush")


# --------------------------------------------------------------------------------------------- child (part A)


class ClockSampler:
    """SM clock (MHz) through NVML every ~2 ms in a thread; empty when NVML is missing."""

    def __init__(self) -> None:
        self.handle = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # noqa: BLE001 - clocks are a diagnostic only
            pass
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def now(self) -> float | None:
        if self.handle is None:
            return None
        return float(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))

    def start(self) -> None:
        self.samples = []
        if self.handle is None:
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.is_set():
                self.samples.append(self.now() or 0.0)
                time.sleep(0.002)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, float | None]:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        xs = self.samples
        return {"mean": statistics.fmean(xs) if xs else None, "min": min(xs) if xs else None,
                "max": max(xs) if xs else None, "n": len(xs)}


class ReadFlush:
    """Duck-types the flush tensor for timed_reps: evicts L2 by reading the buffer (a max-reduction)."""

    def __init__(self, t: Any) -> None:
        self.t = t
        self.device = t.device

    def zero_(self) -> None:
        self.t.amax()


def legacy_timed_reps(call: Any, rotation: Any, reps: int, flush: Any, after: Any = None, start_rep: int = 0
                      ) -> list[float]:
    """The timing loop of H200 run 1 (runner/timing.py at commit d9b8560), verbatim in behaviour."""
    from runner.timing import _event, _sync

    out_ms = []
    dev = flush.device
    start, end = _event(dev), _event(dev)
    for r in range(start_rep, start_rep + reps):
        args, content = rotation.prepare(r)
        _sync(dev)
        flush.zero_()
        start.record()
        out = call(args)
        end.record()
        _sync(dev)
        out_ms.append(start.elapsed_time(end))
        if after is not None:
            after(content, out)
        del out
    return out_ms


def child(index: int, idle_s: float, out_path: Path, dry: bool) -> None:
    import torch

    from runner.evaluate import load_task
    from runner.inputs import WorkloadSpec, make_inputs
    from runner.loading import load_module
    from runner.stats import derive_seed
    from runner.timing import Recheck, Rotation, count_bad, flush_buffer, timed_reps
    from runner.trials import poison

    dev = torch.device("cpu") if dry else torch.device("cuda", 0)
    if not dry:
        torch.cuda.set_device(dev)
    task = load_task(ROOT, TASK)
    ref = load_module(ROOT / "tasks" / TASK / "reference.py", prefix="study_ref")
    kernel = load_module(ROOT / "references" / TASK / "triton.py", prefix="study_sub").kernel
    flush = flush_buffer(dev)
    clocks = ClockSampler()
    order = list(VARIANTS[index % len(VARIANTS):] + VARIANTS[:index % len(VARIANTS)])
    rows: list[dict[str, Any]] = []
    for wl_name in ("smoke",) if dry else WORKLOADS:
        wl = next(w for w in [*task.workloads, task.smoke] if w.name == wl_name)
        spec = WorkloadSpec.resolve(task, wl)
        contents = [make_inputs(ref, spec, seed=derive_seed(1234 + index, wl_name, j), device=dev,
                                dist=("normal", "shifted", "peaked")[j % 3]) for j in range(4)]
        refs = [(ref.reference(*c),) for c in contents]
        rot = Rotation.make(contents, refs)
        tol = task.tolerance_for(task.tensor_dtypes(wl)["y"])
        for j in range(4):  # compile and autotune outside every variant
            kernel(*rot.buffers[j])
        if not dry:
            torch.cuda.synchronize()

        def call(args: tuple[Any, ...]) -> Any:
            return kernel(*args)

        for v in order:
            time.sleep(idle_s)  # host-only phase before timing, as in an evaluation
            clk0 = clocks.now()
            clocks.start()
            t0 = time.perf_counter()
            if v.startswith("legacy") or v.startswith("perrep"):
                problems: list[str] = []

                def after(content: int, out: Any) -> None:
                    n = count_bad(out, rot.refs[content][0], *tol)
                    if n:
                        problems.append(f"{n} bad")
                    poison(out)

                chk = None if v.startswith("perrep") else after
                reps = int(v.rsplit("_", 1)[1]) // (10 if dry else 1)
                legacy_timed_reps(call, rot, 3, flush, chk)
                samples = legacy_timed_reps(call, rot, reps, flush, chk, start_rep=3)
                n_problems = len(problems)
            else:
                reps = int(v.split("_")[2] if v.startswith("batch_warm") else v.split("_")[1]) // (10 if dry else 1)
                warm = 100.0 if v.startswith("batch_warm") else 0.0
                fl = ReadFlush(flush) if v.endswith("readflush") else flush
                check = Recheck(rot.refs, [tol], dev)
                timed_reps(call, rot, 3, fl, check, warmup_ms=0)
                samples = timed_reps(call, rot, reps, fl, check, start_rep=3, warmup_ms=warm)
                n_problems = len(check.problems)
            wall = time.perf_counter() - t0
            clk = clocks.stop()
            rows.append({"proc": index, "workload": wl_name, "variant": v, "median_ms": statistics.median(samples),
                         "min_ms": min(samples), "first5_ms": statistics.median(samples[:5]),
                         "last5_ms": statistics.median(samples[-5:]), "reps": len(samples), "wall_s": wall,
                         "clock_before_mhz": clk0, "clock": clk, "problems": n_problems, "samples": samples})
            print(f"proc {index} {wl_name:16s} {v:26s} median {1e3 * rows[-1]['median_ms']:8.1f} us  "
                  f"first5 {1e3 * rows[-1]['first5_ms']:8.1f}  clk0 {clk0}  clk {clk['mean']}", flush=True)
        del rot, contents, refs
        if not dry:
            torch.cuda.empty_cache()
    extra: dict[str, Any] = {}
    if index == 0 and not dry:  # does a read flush evict L2 as well as a zeroing one? (an 8 MB copy: fits in L2)
        src = [(torch.randn(2 << 20, device=dev),) for _ in range(2)]
        dst = torch.empty(2 << 20, device=dev)
        rot8 = Rotation.make(src)

        def copy(args: tuple[Any, ...]) -> Any:
            return dst.copy_(args[0])

        for name, fl in (("zero_flush", flush), ("read_flush", ReadFlush(flush)),
                         ("no_flush", torch.empty(0, dtype=torch.uint8, device=dev))):
            extra[name] = statistics.median(timed_reps(copy, rot8, 100, fl))
    out_path.write_text(json.dumps({"rows": rows, "l2_copy_8mb_ms": extra}))


# --------------------------------------------------------------------------------------------- parent


def spread(xs: list[float]) -> float:
    return 100 * (max(xs) - min(xs)) / statistics.median(xs)


def summarize_a(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for v in VARIANTS:
        for wl in (*WORKLOADS, "smoke"):
            sel = [r for r in rows if r["variant"] == v and r["workload"] == wl]
            if not sel:
                continue
            meds = [r["median_ms"] for r in sel]
            clk = [r["clock"]["mean"] for r in sel if r["clock"]["mean"]]
            out.setdefault(v, {})[wl] = {
                "medians_ms": meds, "spread_pct": spread(meds), "median_of_medians_ms": statistics.median(meds),
                "first5_ms": [r["first5_ms"] for r in sel], "clock_mean_mhz": clk,
                "clock_before_mhz": [r["clock_before_mhz"] for r in sel],
                "iqr_pct": [100 * (statistics.quantiles(r["samples"], n=4)[2] - statistics.quantiles(r["samples"],
                            n=4)[0]) / r["median_ms"] for r in sel if len(r["samples"]) >= 4],
                "problems": sum(r["problems"] for r in sel)}
    return out


def part_b(n: int, warmup_ms: float, report: dict[str, Any], key: str, deadline: float, dry: bool) -> None:
    from runner.evaluate import EvalOptions, run_evaluation

    kw: dict[str, Any] = {"target_s": 0.15, "min_reps": 20, "max_reps": 150, "compile_baseline": False,
                          "warmup_ms": warmup_ms}
    if dry:
        kw.update(host_timing=True, min_reps=3, max_reps=5, target_s=0.02)
    opts = EvalOptions(**kw)
    per_wl: dict[str, list[float]] = {}
    evals = []
    for i in range(n):
        if time.monotonic() > deadline:
            report.setdefault("skipped", []).append(f"{key}: stopped after {i} evaluations (time budget)")
            break
        t0 = time.monotonic()
        r = run_evaluation(TASK, ROOT / "references" / TASK / "triton.py", suite_root=ROOT,
                           device="cpu" if dry else "cuda", workloads="all", hidden=False, timing=True,
                           timeout_s=300, options=opts)
        evals.append({"status": r.status, "message": r.message[:300], "wall_s": time.monotonic() - t0,
                      "workloads": {w.name: {"median_ms": w.time.median_ms if w.time else None,
                                             "iqr_ms": w.time.iqr_ms if w.time else None,
                                             "reps": w.time.reps if w.time else 0, "eager_ms":
                                             w.eager.median_ms if w.eager else None, "wall_s": w.wall_s}
                                    for w in r.workloads}})
        for w in r.workloads:
            if w.time:
                per_wl.setdefault(w.name, []).append(w.time.median_ms)
        print(f"{key} eval {i}: {r.status} {time.monotonic() - t0:.1f} s "
              + " ".join(f"{k}={1e3 * v[-1]:.1f}us" for k, v in per_wl.items()), flush=True)
    report[key] = {"warmup_ms": warmup_ms, "options": opts.__dict__, "evaluations": evals,
                   "workloads": {k: {"medians_ms": v, "spread_pct": spread(v)} for k, v in per_wl.items()
                                 if len(v) >= 2}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--procs", type=int, default=5)
    ap.add_argument("--idle-s", type=float, default=0.3)
    ap.add_argument("--evals", type=int, default=5)
    ap.add_argument("--evals-nowarm", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=270.0, help="stop starting new steps after this")
    ap.add_argument("--dry", action="store_true", help="CPU plumbing check (smoke workload, host clock)")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.idle_s, args.child_out, args.dry)
        return 0

    t_start = time.monotonic()
    deadline = t_start + args.budget_s
    from benchmarks.bench_references import versions  # noqa: PLC0415
    from runner.evaluate import gpu_info

    report: dict[str, Any] = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
                              "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "gpu": gpu_info(0), **versions(),
                              "task": TASK, "workloads": WORKLOADS, "variants": VARIANTS, "idle_s": args.idle_s}

    def save() -> None:
        report["total_wall_s"] = time.monotonic() - t_start
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1))

    rows: list[dict[str, Any]] = []
    l2: dict[str, Any] = {}
    for k in range(args.procs):
        if time.monotonic() > deadline - 60:
            report.setdefault("skipped", []).append(f"part A: stopped after {k} processes (time budget)")
            break
        tmp = args.out.parent / f".child{k}.json"
        try:
            rc = subprocess.run([sys.executable, __file__, "--out", str(args.out), "--child", str(k), "--child-out",
                                 str(tmp), "--idle-s", str(args.idle_s), *(["--dry"] if args.dry else [])], cwd=ROOT,
                                timeout=120, env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode
        except subprocess.TimeoutExpired:
            rc = -9
        if rc == 0 and tmp.exists():
            data = json.loads(tmp.read_text())
            rows += data["rows"]
            l2 = l2 or data["l2_copy_8mb_ms"]
            tmp.unlink()
        else:
            report.setdefault("errors", []).append(f"child {k} exited {rc}")
        report["part_a"] = {"summary": summarize_a(rows), "l2_copy_8mb_ms": l2, "rows": rows}
        save()
    print(f"part A done at {time.monotonic() - t_start:.0f} s", flush=True)
    part_b(args.evals, 100.0, report, "part_b_warm", deadline, args.dry)
    save()
    part_b(args.evals_nowarm, 0.0, report, "part_b_nowarm", deadline, args.dry)
    save()

    print("\nspread of per-process medians (%), part A:")
    summ = report.get("part_a", {}).get("summary", {})
    print(f"{'variant':28s}" + "".join(f"{w:>18s}" for w in WORKLOADS))
    for v, per in summ.items():
        print(f"{v:28s}" + "".join(f"{per[w]['spread_pct']:8.2f} ({1e3 * per[w]['median_of_medians_ms']:6.1f}us)"
                                   if w in per else f"{'-':>18s}" for w in WORKLOADS))
    for key in ("part_b_warm", "part_b_nowarm"):
        for w, d in report.get(key, {}).get("workloads", {}).items():
            print(f"{key} {w:16s} spread {d['spread_pct']:6.2f}%  medians "
                  + " ".join(f"{1e3 * x:.1f}" for x in d["medians_ms"]))
    print(f"l2 8MB copy: {l2}")
    save()
    print(f"wrote {args.out} ({time.monotonic() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
