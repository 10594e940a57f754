"""Baseline candidates: what a user would pick instead, each checked and timed in the evaluator's own process.

A task declares its candidates (``Task.baselines``: eager PyTorch, each SDPA backend, cuDNN with
``benchmark=True``, ``torch.compile`` in several modes, peer libraries); :meth:`d2kgrade.schema.Task.
baseline_candidates` gives the defaults otherwise. Per timed workload, before the submission is loaded, the
evaluator (trusted code only: no submission ever ran in this process) runs each candidate:

1. ``unavailable`` when a module it ``requires`` does not import, or it is CUDA-only on a CPU;
2. once on a fresh input set, compared with the reference at the task's tolerance: out of it, ``incorrect``
   (excluded from the best baseline, with its worst error ratio recorded); an exception is ``failed``;
3. timed like a submission (:func:`runner.timing.timed_reps`: rotation, L2 flush, pad, CUDA events), unless the
   cache holds a figure for the same key.

The best baseline of the workload is the fastest ``ok`` candidate (chosen by the caller from the figures).

**The cache** (``<cache>/trusted/baselines.sqlite``): one row per key, the SHA-256 of everything a figure depends
on: the GPU name, driver, torch, triton, CUDA and Python versions, the versions of the modules the candidate
requires, the task id, the workload's parameters and dtype, the candidate (name, kind, mode, function), the
source of ``reference.py`` and the timing method (:data:`TIMING_METHOD` and the timing settings). A hit is
reported with ``cached: true`` and when it was measured; ``live`` (``--live-baselines``) measures again and
replaces the row.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

TIMING_METHOD = "batched-events-v2"
"""Bump when the way a figure is measured changes: older cache rows then stop matching."""


def brief(text: str, most: int = 500) -> str:
    """``text`` in at most about ``most`` characters: its start and its end, where a compiler names the error (round
    17's FlexAttention candidate failed with an Inductor CompilationError whose first 500 characters were the
    template's source, not the error)."""
    if len(text) <= most:
        return text
    head = most * 2 // 5
    return f"{text[:head]} [...] {text[len(text) - (most - head):]}"


def module_version(name: str) -> str | None:
    """``__version__`` of an importable module, or None when it does not import."""
    try:
        mod = importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a peer library that fails to import is simply unavailable
        return None
    return str(getattr(mod, "__version__", "unknown"))


def cache_key(env: dict[str, Any], task_id: str, workload: Any, cand: Any, ref_sha: str,
              timing: dict[str, Any], peer_versions: dict[str, str | None]) -> str:
    """The key of one figure (see the module docstring)."""
    blob = {"env": {k: env.get(k) for k in ("gpu", "driver", "torch", "triton", "cuda", "python")},
            "task": task_id, "workload": {"params": dict(workload.params), "dtype": workload.dtype},
            "candidate": {"name": cand.name, "kind": cand.kind, "mode": cand.mode, "fn": cand.fn},
            "peers": peer_versions, "reference_sha": ref_sha, "method": TIMING_METHOD,
            "timing": {k: timing.get(k) for k in ("target_s", "min_reps", "max_reps", "warmup_ms")}}
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()


class Cache:
    """Baseline figures by key, in SQLite (one writer at a time; readers never block on a crash)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.con = sqlite3.connect(path, timeout=30)
        self.con.execute("CREATE TABLE IF NOT EXISTS baselines (key TEXT PRIMARY KEY, record TEXT NOT NULL, "
                         "measured_at TEXT NOT NULL)")
        self.con.commit()

    def get(self, key: str) -> dict[str, Any] | None:
        row = self.con.execute("SELECT record, measured_at FROM baselines WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        rec = json.loads(row[0])
        rec["measured_at"] = row[1]
        return rec  # type: ignore[no-any-return]

    def put(self, key: str, record: dict[str, Any], measured_at: str) -> None:
        with self.con:
            self.con.execute("INSERT OR REPLACE INTO baselines VALUES (?, ?, ?)",
                             (key, json.dumps(record), measured_at))

    def close(self) -> None:
        self.con.close()


def run_candidates(ev: Any, wl: Any, spec: Any, *, flush: Any, cache: Cache | None, live: bool,
                   env: dict[str, Any]) -> list[dict[str, Any]]:
    """Every candidate of the task on one workload, as ``BaselineTiming`` dicts (plus raw ``samples``)."""
    out = []
    ref_sha = hashlib.sha256(Path(ev.cfg["reference_py"]).read_bytes()).hexdigest()
    only = ev.cfg["timing"].get("candidates")
    for cand in ev.task.baseline_candidates():
        if only is not None and cand.name not in only:
            continue
        rec: dict[str, Any] = {"name": cand.name, "kind": cand.kind, "vendor": cand.vendor, "status": "ok",
                               "reason": ""}
        missing = [m for m in cand.requires if module_version(m) is None]
        fn = getattr(ev.ref, cand.fn, None)
        if missing:
            rec.update(status="unavailable", reason=f"not installed: {', '.join(missing)}")
        elif cand.device == "cuda" and ev.device.type != "cuda" and not ev.timer.t.get("host_backend"):
            rec.update(status="unavailable", reason="needs a CUDA GPU")
        elif not callable(fn):
            rec.update(status="failed", reason=f"reference.py defines no function {cand.fn!r}")
        elif cand.kind == "compile" and not ev.cfg["timing"].get("compile", True):
            rec.update(status="not_timed", reason="torch.compile candidates are off in this evaluation")
        if rec["status"] != "ok":
            out.append(rec)
            continue
        peers = {m: module_version(m) for m in cand.requires}
        key = cache_key(env, ev.task.id, wl, cand, ref_sha, ev.cfg["timing"], peers)
        rec["cache_key"] = key
        hit = cache.get(key) if cache is not None and not live else None
        if hit is not None:
            rec.update(hit, cached=True, cache_key=key)
            out.append(rec)
            continue
        rec.update(_measure(ev, wl, spec, cand, fn, flush))
        rec["measured_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        if cache is not None and rec["status"] in ("ok", "incorrect"):
            cache.put(key, {k: v for k, v in rec.items() if k not in ("measured_at", "cached", "cache_key")},
                      rec["measured_at"])
        out.append(rec)
    return out


def _measure(ev: Any, wl: Any, spec: Any, cand: Any, fn: Any, flush: Any) -> dict[str, Any]:
    """Check one candidate against the reference, then time it."""
    import torch

    from runner.checks import judge
    from runner.timing import WARMUP_MS, timed_reps

    rec: dict[str, Any] = {}
    scalars = spec.scalars
    try:
        call = _callable(cand, fn, scalars)
        inputs = ev._make(spec, "baseline-check", cand.name, dist=ev.dists[0])
        t0 = time.perf_counter()
        got = call(tuple(t.clone() for t in inputs))
        if ev.device.type == "cuda":
            torch.cuda.synchronize()
        if cand.kind == "compile":
            rec["compile_warmup_s"] = time.perf_counter() - t0
        expected = ev.ref.reference(*inputs, **scalars)
        outs = got if isinstance(got, tuple) else (got,)
        res = judge(ev.task, spec, ev.ref, outs, expected, inputs, ev.device)
        rec["max_tol_ratio"] = max((m.tol_ratio for m in res), default=0.0)
        bad = next((m for m in res if not m.ok), None)
        if bad is not None:
            rec.update(status="incorrect", reason=f"{bad.name}: {bad.reason}"[:500])
        del got, outs, expected
        rot = ev.timer.rotation(wl, spec, "baseline", cand.name)
        reps, pad = ev.timer.probe_local(call, rot)
        first = rot.size + ev.timer.PROBE_REPS
        rec["samples"] = timed_reps(call, rot, reps, flush, start_rep=first,
                                    warmup_ms=float(ev.cfg["timing"].get("warmup_ms", WARMUP_MS)), pad_ms=pad)
        del rot
    except Exception as exc:  # noqa: BLE001 - a candidate that raises is reported, never fatal
        rec.update(status="failed", reason=brief(f"{type(exc).__name__}: {exc}"))
        rec.pop("samples", None)
    if ev.device.type == "cuda":
        torch.cuda.empty_cache()
    return rec


def _callable(cand: Any, fn: Any, scalars: dict[str, Any]) -> Any:
    import torch

    if cand.kind == "compile":
        import torch._inductor.config as inductor_config

        # One compile thread: inductor's pool starts threads lazily (seen on the H200 inside a softmax evaluation).
        inductor_config.compile_threads = 1
        torch._dynamo.reset()
        mode = None if cand.mode in (None, "default") else cand.mode
        compiled = torch.compile(fn, dynamic=False, mode=mode)

        def run_compiled(args: tuple[Any, ...]) -> Any:
            return compiled(*args, **scalars)

        return run_compiled

    def run_eager(args: tuple[Any, ...]) -> Any:
        return fn(*args, **scalars)

    return run_eager


__all__ = ["run_candidates", "Cache", "cache_key", "module_version", "TIMING_METHOD"]
