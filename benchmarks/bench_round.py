"""Expert references through the evaluator on this GPU, every baseline candidate of each task timed beside them;
one JSON written after every task (a round cut short keeps what it measured).

    python benchmarks/bench_round.py --tasks flash_attention_fwd gemm_bf16 --out round.json \\
        [--candidates eager compile sdpa_cudnn ...] [--repeat 5] [--hidden]

Per workload: status, median and spread, roofline fraction, every candidate (status, median, why excluded), the
best candidate and the speedup over it, the evaluator's clock against the host's events; per evaluation the wall
time. ``--repeat N`` evaluates each task N times (the timing-repeatability study: spread of the medians of the
kernel and of every candidate, with ``--live-baselines`` implied so that each repeat measures them again).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.evaluate import EvalOptions, gpu_info, run_evaluation  # noqa: E402


def _versions() -> dict[str, Any]:
    import torch
    import triton

    return {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "triton": triton.__version__}


def _nvml() -> dict[str, Any]:
    """SM clock and throttle reasons now (nvidia-smi), for the record."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,clocks_throttle_reasons.active,"
                              "temperature.gpu,power.draw", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    keys = ("sm_mhz", "mem_mhz", "throttle", "temp_c", "power")
    return dict(zip(keys, [v.strip() for v in out.split(",")], strict=False))


SLOWDOWN_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
"""NVML's clock-event reasons that slow a busy GPU: software power cap, hardware slowdown, software and hardware
thermal slowdown, power brake (idle, application clocks and display clocks are not slowdowns)."""
CLOCK_MOVED_PCT = 2.0


class ClockSampler:
    """nvidia-smi every 200 ms during one evaluation: the SM clock and clock-event reasons while the GPU was busy,
    and whether they moved (``moved``: a slowdown reason seen, or busy SM clocks more than 2% apart)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> ClockSampler:
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=utilization.gpu,clocks.sm,clocks_throttle_reasons.active",
                 "--format=csv,noheader,nounits", "-lms", "200"], stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True)
        except OSError:
            pass  # no nvidia-smi: no samples
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            out, _ = self.proc.communicate(timeout=20)
            self.lines = out.splitlines()

    def summary(self) -> dict[str, Any]:
        busy: list[tuple[int, int]] = []
        for line in self.lines:
            try:
                util, mhz, reasons = (v.strip() for v in line.split(","))
                if int(util) > 0:
                    busy.append((int(mhz), int(reasons, 16)))
            except ValueError:
                continue
        if not busy:
            return {"samples": 0}
        mhz = [m for m, _ in busy]
        seen = 0
        for _, r in busy:
            seen |= r
        return {"samples": len(busy), "sm_mhz_min": min(mhz), "sm_mhz_max": max(mhz),
                "reasons_seen": hex(seen), "slowdown": bool(seen & SLOWDOWN_MASK),
                "moved": bool(seen & SLOWDOWN_MASK) or 100 * (max(mhz) - min(mhz)) / min(mhz) > CLOCK_MOVED_PCT}


def _profile_dir(d: Path | None) -> str | None:
    if d is None:
        return None
    d.mkdir(parents=True, exist_ok=True)
    return str(d.resolve())


def _profile_text(d: Path, name: str, top: int = 45) -> None:
    """The evaluator's profiles not yet summarised, as text: the top functions by own and by cumulative time."""
    import io
    import pstats

    for f in sorted(d.glob("evaluator-*.pstats")):
        buf = io.StringIO()
        st = pstats.Stats(str(f), stream=buf)
        st.sort_stats("tottime").print_stats(top)
        st.sort_stats("cumulative").print_stats(top)
        (d / f"profile-{name}.txt").write_text(buf.getvalue())
        f.rename(d / f"profile-{name}.pstats")


def summarize(r: Any) -> dict[str, Any]:
    wls = []
    for w in r.workloads:
        wls.append({
            "name": w.name, "status": w.status, "message": w.message[:300],
            "median_ms": w.time.median_ms if w.time else None, "iqr_ms": w.time.iqr_ms if w.time else None,
            "reps": w.time.reps if w.time else None,
            "by_dist": {d: {"median_ms": t.median_ms, "iqr_ms": t.iqr_ms, "reps": t.reps}
                        for d, t in w.time_by_dist.items()},
            "roofline_floor_ms": w.roofline_floor_ms,
            "roofline_fraction": w.roofline_fraction, "best_baseline": w.best_baseline,
            "speedup_best": w.speedup_best, "speedup_eager": w.speedup_eager, "speedup_compiled": w.speedup_compiled,
            "baselines": [{"name": b.name, "kind": b.kind, "vendor": b.vendor, "status": b.status,
                           "reason": b.reason[:300], "median_ms": b.time.median_ms if b.time else None,
                           "iqr_ms": b.time.iqr_ms if b.time else None, "cached": b.cached,
                           "max_tol_ratio": b.max_tol_ratio} for b in w.baselines],
            "evaluator_ms": w.evaluator_ms, "clock": w.clock, "wall_s": w.wall_s})
    return {"status": r.status, "message": r.message[:500], "wall_s": r.wall_s, "sandbox": r.environment.sandbox,
            "buffers": r.environment.buffers,
            "flags": [f.code for f in r.flags], "import_s": r.import_s, "phases": r.phases,
            "phase_detail": r.phase_detail, "workloads": wls}


def spread(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per workload, the spread of the medians over repeated evaluations ((max - min) / min, %), for the kernel
    and for every candidate (a speedup is a ratio of both), and the evaluations whose clocks moved
    (:class:`ClockSampler`)."""
    out: dict[str, Any] = {}
    names = {w["name"] for r in runs for w in r.get("workloads", []) if w.get("median_ms")}
    for name in sorted(names):
        series: dict[str, list[float]] = {}
        for r in runs:
            for w in r.get("workloads", []):
                if w["name"] != name:
                    continue
                if w.get("median_ms"):
                    series.setdefault("kernel", []).append(w["median_ms"])
                for b in w.get("baselines", []):
                    if b.get("median_ms"):
                        series.setdefault(b["name"], []).append(b["median_ms"])
        pct = {k: 100 * (max(v) - min(v)) / min(v) for k, v in series.items() if len(v) > 1}
        if pct:
            out[name] = {"spread_pct": max(pct.values()), "by": pct, "runs": len(runs),
                         "clocks_moved": [i for i, r in enumerate(runs) if r.get("clocks", {}).get("moved")]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", nargs="+", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--candidates", nargs="*", default=None, help="only these candidates (default: all)")
    ap.add_argument("--exclude", nargs="*", default=[], help="every candidate but these")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--hidden", action="store_true")
    ap.add_argument("--target-s", type=float, default=0.4)
    ap.add_argument("--live-baselines", action="store_true")
    ap.add_argument("--timeout-s", type=float, default=900.0)
    ap.add_argument("--host-call-buffers", action="store_true",
                    help="correctness calls through shared host memory (EvalOptions.gpu_call_buffers off)")
    ap.add_argument("--profile-dir", type=Path, default=None,
                    help="run the evaluator under cProfile; per evaluation, its top functions to "
                         "<dir>/profile-<task>-<i>.txt (the .pstats beside it)")
    args = ap.parse_args()
    gpu = gpu_info(0)
    doc: dict[str, Any] = {"command": " ".join(sys.argv), "date": datetime.now(timezone.utc).isoformat(),
                           "gpu": gpu, "versions": _versions(), "tasks": {}}
    live = args.live_baselines or args.repeat > 1
    t_start = time.time()
    from runner.evaluate import default_suite_root, load_task

    for task in args.tasks:
        names = args.candidates
        if args.exclude:
            names = [c.name for c in load_task(default_suite_root(), task).baseline_candidates()
                     if c.name not in args.exclude and (names is None or c.name in names)]
        runs = []
        for i in range(args.repeat):
            before = _nvml()
            t0 = time.time()
            clocks = ClockSampler()
            try:
                with clocks:
                    r = run_evaluation(task, ROOT / "references" / task / "triton.py", device="cuda", seed=1000 + i,
                                       hidden=args.hidden, timeout_s=args.timeout_s,
                                       options=EvalOptions(candidates=tuple(names) if names is not None else None,
                                                           target_s=args.target_s, live_baselines=live,
                                                           profile_dir=_profile_dir(args.profile_dir),
                                                           gpu_call_buffers=not args.host_call_buffers))
                s = summarize(r)
                if args.profile_dir:
                    _profile_text(args.profile_dir, f"{task}-{i}")
            except Exception as exc:  # noqa: BLE001 - one task's failure is recorded, the round goes on
                s = {"status": "error", "message": f"{type(exc).__name__}: {exc}"[:2000]}
            s["elapsed_s"] = time.time() - t0
            s["nvml_before"], s["nvml_after"] = before, _nvml()
            s["clocks"] = clocks.summary()
            runs.append(s)
            doc["tasks"][task] = runs
            doc["total_wall_s"] = time.time() - t_start
            if len(runs) > 1:
                doc.setdefault("spread", {})[task] = spread(runs)
            args.out.write_text(json.dumps(doc, indent=1))
            print(f"{task} #{i}: {s['status']} {s['elapsed_s']:.1f}s", flush=True)


if __name__ == "__main__":
    main()
