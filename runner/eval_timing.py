"""The evaluator's side of timing, profiling and the op record: what it asks the host for and how it checks it.

**Timed batches.** The kernel host times with CUDA events (:mod:`runner.host_timing`: rotation, L2 flush, pad,
events, back to back). Everything else is here: the input sets are made and their references computed here (and
handed to the host once per rotation, for all of its batches);
the host copies each rep's outputs into evaluator-owned slots right after the call's end event, and the
evaluator compares every one (the first output per input set with the reference in float64, the others bit for
bit with it) before it writes the next sets. Long batches are cut into chunks of at most :data:`CHUNK_BYTES` of
outputs, on the same input sets.

**The evaluator's clock.** The events are the host's word. The evaluator times each batch itself, from sending
the request to receiving the answer, and knows what a batch costs besides the kernel: before the submission is
loaded, while the host is still clean, it runs calibration batches of a null kernel with the same buffers
(copy in, flush, output copies) at two lengths and two pads, and fits ``wall = fixed + reps x (per_rep +
pad_factor x pad)`` by least squares. For a real batch ``(wall - fixed) / reps - per_rep - pad_factor x pad`` is
the kernel time the clock implies, with a standard error from the fit (the batch's own noise plus the
uncertainty of the three coefficients at the batch's reps and pad: an extrapolation from short calibration
batches to a long real one is only as good as the fit). Events whose mean is under it by more than
:func:`untrusted_margin` are ``timing.untrusted`` (rejected): the host under-reported.

The margin is wide on purpose. On the H200 (round 9, 2026-12-02) a calibration batch cost 300-500 ms besides its
reps and its residuals were 9-50 ms, so the clock's per-call estimate carries 0.1-0.6 ms of error; the old
margin (three times the residual per rep) rejected honest kernels (causal_conv1d long_single_seq: events 0.93 ms,
implied 2.89 ms, margin 1.92 ms). The clock catches a host that hides milliseconds, not microseconds; the outputs
(every one checked) and the roofline floor hold for short kernels.

**Profiled calls.** Every call of the hidden workload, and checked calls at positions drawn from the secret seed
(:data:`runner.evaluator.PROFILE_SHARE`, at least one per workload on CUDA), run under the profiler; every call
runs under the always-on op record. The evaluator merges them per workload and ships one summary to the caller,
which judges it (:func:`runner.profile_proof.judge`).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from contextlib import contextmanager
from typing import Any

from runner.evaluator import PROFILE_SHARE, Stop

PROBE_REPS = 3
CHUNK_BYTES = 32 << 30
CHUNK_SHARE = 0.3
"""Outputs one batch may stage on the GPU (the host keeps a copy of every rep's outputs until the batch ends): at
most this, and this share of the free memory. Each further chunk runs on the same input sets (still registered
with the host) and pays a warm-up and a verify step (round 12: 8 GB cut cross_entropy's timing into batches of 3
reps). The calibration's batches are held to the same limit (:func:`calibration_reps`)."""
FETCH_BYTES = 32 << 30
FETCH_SHARE = 0.3
"""GPU memory for the rows one verify step fetches into shared GPU buffers: at most this, and this share of the
free memory (more: through the shared-memory slots, as without them; round 12's cross_entropy fetched 7 rows of
2.1 GB through those, 0.9 s a verify step)."""
CALIBRATION_REPS = (4, 32)
"""Reps of the calibration batches: far apart, so that the per-rep slope is well determined (its standard error
at a 150-rep batch is 0.6x that of (8, 24) for about the same calibration time)."""
CALIBRATION_PADS = (0.0, 1.0)
VERIFY_SAMPLE = 3
"""Timed reps, besides the first of each input set, whose outputs the evaluator fetches and compares in full
(the rest are bound to those by keyed checksums)."""
PAD_DRIFT = 0.03
VERIFY_SLACK = 3.0
VERIFY_FLOOR_MS = 50.0
"""A verify step may take 3x the null kernel's and 50 ms more before it counts as work hidden after the loop."""
UNTRUSTED_FRACTION = 0.15
UNTRUSTED_FLOOR_MS = 0.01
UNTRUSTED_Z = 8.0
"""Standard errors of the clock's estimate the events may fall short by. The calibration has 8 batches for 3
coefficients (5 degrees of freedom): Student's t with 5 degrees of freedom exceeds 8 with probability 2.5e-4, so
an honest 85-workload run is falsely rejected about 2% of the time even when the noise estimate is low by luck;
a smaller factor would reject real kernels (see the module docstring)."""


def calibration_reps(chunk: int) -> tuple[int, int]:
    """The calibration's two batch lengths for a workload whose batches may stage ``chunk`` reps:
    :data:`CALIBRATION_REPS`, the longer cut to ``chunk`` and the shorter to half of that (round 14's
    gemma_vocab stages 4.8 GB a rep: 32 reps did not fit in the H200's memory, and the host failed every
    calibration batch)."""
    short, long = CALIBRATION_REPS
    long = max(1, min(long, chunk))
    return max(1, min(short, long // 2)), long


def untrusted_margin(implied_ms: float, se_ms: float) -> float:
    """How far under the clock's implied kernel time the events' mean may fall before they are not believed:
    15% of it, or :data:`UNTRUSTED_Z` standard errors of the estimate plus 10 us, whichever is larger."""
    return max(UNTRUSTED_FRACTION * implied_ms, UNTRUSTED_Z * se_ms + UNTRUSTED_FLOOR_MS)


def clock_estimate(cal: dict[str, Any], chunks: list[tuple[int, float, float]]) -> tuple[float, float]:
    """The per-call kernel time the evaluator's clock implies for batches ``(reps, wall_ms, pad_ms)`` and its
    standard error: each batch's own residual noise (``sigma_ms``) plus the fit's coefficient covariance
    (``cov``) at the batches' summed design row ``(1, reps, reps x pad)``."""
    import numpy as np

    coef = np.array([cal["fixed_ms"], cal["per_rep_ms_fit"], cal["pad_factor_fit"]])
    x = np.array([[1.0, n, n * pad] for n, _, pad in chunks]).sum(axis=0)
    reps = x[1]
    implied = (sum(w for _, w, _ in chunks) - float(x @ coef)) / reps
    var = len(chunks) * cal["sigma_ms"] ** 2 + float(x @ np.array(cal["cov"]) @ x)
    return implied, math.sqrt(max(var, 0.0)) / reps


def fit_calibration(a: Any, y: Any) -> dict[str, Any]:
    """Least squares of the calibration batches' walls ``y`` on rows ``(1, reps, reps x pad)``: the coefficients
    (clamped at 0 for display, unclamped for the estimate), the residual sigma with the degrees of freedom
    counted, and the coefficients' covariance."""
    import numpy as np

    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    resid = y - a @ coef
    dof = max(1, a.shape[0] - a.shape[1])
    sigma = float(math.sqrt(float(resid @ resid) / dof))
    cov = sigma ** 2 * np.linalg.pinv(a.T @ a)
    return {"fixed_ms": float(coef[0]), "per_rep_ms": max(0.0, float(coef[1])), "per_rep_ms_fit": float(coef[1]),
            "pad_factor": max(0.0, float(coef[2])), "pad_factor_fit": float(coef[2]), "sigma_ms": sigma,
            "noise_ms": sigma / max(CALIBRATION_REPS), "dof": dof, "cov": cov.tolist()}


class Timer:
    """Timing, the baselines, the profile schedule and the op record of one evaluation."""

    PROBE_REPS = PROBE_REPS

    def __init__(self, ev: Any) -> None:
        from runner.stats import derive_seed

        self.ev = ev
        cfg = ev.cfg
        t = cfg.get("timing", {})
        self.t = t
        self.enabled = bool(t.get("enabled")) and (ev.device.type == "cuda" or bool(t.get("host_backend")))
        self.rng = random.Random(derive_seed(ev.seed, "profile-positions"))
        self.flush: Any = None
        self.calibration: dict[str, dict[str, float]] = {}
        self.agg: dict[str, dict[str, Any]] = {}
        self._profiled: dict[str, int] = {}
        self._sets: tuple[Any, list[list[Any]]] | None = None
        """The rotation whose input sets are registered with the host, and their buffers per set."""
        self.on_device = False
        """Input sets and fetched outputs travel in GPU buffers shared with the host (:mod:`runner.cuda_share`),
        once :meth:`_probe_sharing` has shown that the host maps them; shared host memory otherwise."""
        self._fetch: list[Any] = []
        """GPU buffers the host copies a verify step's fetched rows into (kept for the workload's batches)."""
        self.cost: dict[str, float] = {}
        """The evaluator's own seconds per step, cumulative over the evaluation (sent with every calibration and
        timing message; the caller records the last as ``EvalResult.phase_detail``): where the calibration and
        timing phases go, which the message gaps alone cannot say. Three entries are counts, not seconds:
        ``batches``, ``verify_steps`` and ``verify_rows_max`` (the most rows one verify step fetched)."""

    def _spend(self, step: str, seconds: float) -> None:
        self.cost[step] = self.cost.get(step, 0.0) + seconds

    @contextmanager
    def _spent(self, step: str) -> Any:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._spend(step, time.perf_counter() - t0)

    # ------------------------------------------------------------------------------------------ before import

    def before_import(self) -> None:
        """Ceilings, baselines and clock calibration, while no submission code has run anywhere. Without timing
        (CPU) every candidate is still reported, with no figure."""
        if not self.enabled:
            self._report_untimed()
            return
        ev = self.ev
        from runner.timing import flush_buffer

        if not ev.cfg.get("ceilings") and ev.device.type == "cuda":
            from runner.roofline import measure_ceilings

            ev.chan.send("ceilings", ceilings=measure_ceilings(ev.device))
        self.flush = flush_buffer(ev.device)
        if ev.device.type == "cuda":
            # Compiled here, into the trusted Triton cache the next hosts' caches are seeded from
            # (runner.sandbox.seed_triton_cache): the host compiles the same kernel before any submission code.
            from runner import warmup_kernel

            warmup_kernel.run(ev.torch.zeros(200, device=ev.device))
        self.on_device = self._probe_sharing()
        cache = None
        if ev.device.type == "cuda" and ev.cfg.get("trusted_cache_dir") and self.t.get("baselines", True):
            from pathlib import Path

            from runner.baselines import Cache

            cache = Cache(Path(ev.cfg["trusted_cache_dir"]) / "baselines.sqlite")
        from runner.baselines import run_candidates
        from runner.evaluator import _environment

        env = {**_environment(ev.device), "driver": ev.cfg.get("driver")}
        for wl, spec, hidden, timed in ev.workloads:
            if not timed or hidden:
                continue
            if self.t.get("baselines", True):
                with self._spent("baselines"):
                    cands = run_candidates(ev, wl, spec, flush=self.flush, cache=cache,
                                           live=bool(self.t.get("live_baselines")), env=env)
                ev.chan.send("baseline", workload=wl.name, candidates=cands)
            self.calibration[wl.name] = self._calibrate(wl, spec)
        if cache is not None:
            cache.close()
        if ev.device.type == "cuda":
            import torch

            torch.cuda.empty_cache()

    def _probe_sharing(self) -> bool:
        """Whether the host maps the evaluator's GPU buffers and sees in one what the evaluator wrote: a buffer
        of random bytes, registered, and its keyed checksum asked of the host (before any submission code runs;
        a host that cannot, or a driver without exportable allocations, leaves the timing on shared memory).
        The caller hears the outcome (``sharing``: ``EvalResult.environment.buffers``)."""
        ok, why = self._try_sharing()
        self.ev.chan.send("sharing", on_device=ok, why=why)
        return ok

    def _try_sharing(self) -> tuple[bool, str]:
        from runner import cuda_share
        from runner.huge_inputs import fingerprints
        from runner.stats import derive_seed

        ev = self.ev
        if ev.device.type != "cuda" or not cuda_share.supported(ev.device):
            return False, "no exportable CUDA allocations here"
        torch = ev.torch
        key = derive_seed(ev.seed, "sharing-probe")
        gen = torch.Generator(device=ev.device).manual_seed(key)
        pattern = torch.randint(-2**31, 2**31 - 1, (1 << 16,), dtype=torch.int32, device=ev.device, generator=gen)
        try:
            ev._buf_id += 1
            buf = cuda_share.DeviceBuffer.create(ev._buf_id, torch.int32, tuple(pattern.shape), ev.device)
        except (cuda_share.CudaShareError, OSError, RuntimeError) as exc:
            return False, f"creating a shared GPU buffer failed: {exc}"[:300]
        try:
            buf.tensor.copy_(pattern)
            torch.cuda.synchronize(ev.device)
            got = ev.host.register([buf], mirror=False)
            ok = got == [buf.id] and ev.host.fingerprint([buf.id], key) == fingerprints([pattern], key).tolist()
            ev.host.release(got)
        finally:
            buf.close()
        return ok, "" if ok else "the kernel host did not map the probe buffer, or saw other bytes"

    def _report_untimed(self) -> None:
        from runner.baselines import module_version

        ev = self.ev
        only = self.t.get("candidates")
        cands = [c for c in ev.task.baseline_candidates() if only is None or c.name in only]
        for wl, _spec, hidden, _timed in ev.workloads:
            if hidden or not self.t.get("baselines", True):
                continue
            recs = []
            for c in cands:
                missing = [m for m in c.requires if module_version(m) is None]
                recs.append({"name": c.name, "kind": c.kind, "vendor": c.vendor,
                             "status": "unavailable" if missing else "not_timed",
                             "reason": f"not installed: {', '.join(missing)}" if missing else
                             "timing needs a CUDA GPU"})
            ev.chan.send("baseline", workload=wl.name, candidates=recs)

    def _calibrate(self, wl: Any, spec: Any) -> dict[str, float]:
        """Fit ``wall = fixed + reps x (per_rep + pad_factor x pad)`` for null-kernel batches on this workload's
        buffers, at two lengths and two pads (the pad is a spin whose length in time follows the SM clock, so its
        real cost is measured, not assumed), and time their verify steps; all while the host has run no
        submission code."""
        import numpy as np

        from runner.timing import WARMUP_MS

        ev = self.ev
        rot = self.rotation(wl, spec, "calibration", "null")
        null = [[str(spec.dtypes[t.name]).replace("torch.", ""), list(spec.shapes[t.name])] for t in ev.task.outputs]
        rows, ys, verify = [], [], []
        failed = ""
        for reps, pad in [(r, p) for p in CALIBRATION_PADS for r in calibration_reps(self._chunk_reps(spec))] * 2:
            reply, wall, vms = self._run_batch(wl, spec, rot, reps, start=0, pad_ms=pad,
                                               warmup_ms=float(self.t.get("warmup_ms", WARMUP_MS)), check=None,
                                               null=null)
            if not reply.ok:
                failed = f"a calibration batch of {reps} reps failed: {reply.error.message}"[:300]
                break
            rows.append([1.0, reps, reps * pad])
            ys.append(wall)
            verify.append(vms)
        with self._spent("buffers"):
            self.release_sets()
            self.release_fetch()
        if failed:  # no fit from failed batches (the host is still clean): this workload is timed without the clock
            ev.chan.send("calibration", workload=wl.name, failed=failed, cost=dict(self.cost))
            return {}
        cal = fit_calibration(np.array(rows), np.array(ys))
        cal["verify_ms"] = max(verify)
        ev.chan.send("calibration", workload=wl.name, **cal, cost=dict(self.cost))
        return cal

    # ------------------------------------------------------------------------------------------ profile + ops

    def profile_now(self) -> bool:
        """Whether the next checked call runs under the profiler (CUDA; the draw is secret)."""
        if self.ev.device.type != "cuda":
            return False
        return self.rng.random() < PROFILE_SHARE

    def record_call(self, wl: str, reply: Any) -> None:
        a = self.agg.setdefault(wl, {"ops": {}, "interp_ops": {}, "kernels": {}, "own_launches": None,
                                     "calls": 0, "profiled": 0})
        a["calls"] += 1
        for key in ("ops", "interp_ops"):
            for op, n in getattr(reply.ops, key).items():
                a[key][op] = max(a[key].get(op, 0), n)
        if reply.kernels is not None:
            a["profiled"] += 1
            for name, k in reply.kernels.items():
                rec = a["kernels"].setdefault(name, {"count": 0, "us": 0.0})
                rec["count"] += k.count
                rec["us"] += k.us
        if reply.own_launches is not None:
            a["own_launches"] = reply.own_launches if a["own_launches"] is None else min(a["own_launches"],
                                                                                       reply.own_launches)

    def send_profile(self, wl: Any) -> None:
        """One merged profile message per workload (a profiled call first, on CUDA, if none was drawn)."""
        ev = self.ev
        a = self.agg.get(wl.name)
        if a is None:
            return
        if ev.device.type == "cuda" and a["profiled"] == 0:
            spec = ev._spec
            originals = ev._make(spec, "profile", dist=ev.dists[0])
            ev._trial(spec, wl.name, 10_000, "profiled", originals, profile=True)
        # Sized by the result, not the inputs: a large input the kernel only samples (rotary's 131072 x 64 cos
        # cache, of which a call reads 13 rows) would otherwise hide PyTorch computing the whole output.
        n = max([math.prod(int(d) for d in ev._spec.shapes[o.name]) for o in ev.task.outputs] or [1])
        ev.chan.send("profile", workload=wl.name, summary={"ops": a["ops"], "interp_ops": a["interp_ops"],
                                                           "kernels": a["kernels"]},
                     data_numel=n, own_launches=a["own_launches"], calls=a["calls"], profiled=a["profiled"])

    # ------------------------------------------------------------------------------------------ rotation

    def n_sets(self, spec: Any) -> int:
        """Input sets per batch: 2-4 as GPU memory allows (see :mod:`runner.timing`)."""
        ev = self.ev
        torch = ev.torch
        if ev.device.type != "cuda":
            return 2
        per_set = sum(_nbytes(spec.shapes[t.name], spec.dtypes[t.name]) * 3 for t in ev.task.inputs) + \
            sum(_nbytes(spec.shapes[t.name], spec.dtypes[t.name]) * 3 for t in ev.task.outputs)
        free, _ = torch.cuda.mem_get_info(ev.device)
        return max(1, min(4, int(0.3 * free // max(per_set, 1))))

    def rotation(self, wl: Any, spec: Any, salt: str, tag: str, with_refs: bool = False) -> Any:
        """Fresh input sets (and their references) on the evaluator's device."""
        from runner.huge_inputs import rotation_contents
        from runner.timing import Rotation
        from runner.trials import output_tuple

        ev = self.ev
        sets = self.n_sets(spec)
        # Sets after the first reuse its huge inputs (what the host's batch shares), so each set's reference
        # is computed on what the kernel gets.
        with self._spent("inputs"):
            contents = rotation_contents(lambda j: ev._make(spec, salt, tag, j, dist=ev.dists[j % len(ev.dists)]),
                                         sets, ev.huge(spec))
        with self._spent("references"):
            refs = [tuple(r.clone() for r in output_tuple(ev.ref.reference(*c, **spec.scalars))) for c in contents] \
                if with_refs else []
        return Rotation(contents, [tuple(t.clone() for t in c) for c in contents], refs)

    def probe_local(self, call: Any, rot: Any) -> tuple[int, float]:
        """Pace a trusted function (a baseline) in this process: repetitions for ``target_s`` and the pad."""
        from runner.timing import choose_reps, pad_for, timed_reps

        t = self.t
        timed_reps(call, rot, rot.size, self.flush, warmup_ms=0)
        stats: dict[str, float] = {}
        t0 = time.perf_counter()
        timed_reps(call, rot, PROBE_REPS, self.flush, start_rep=rot.size, warmup_ms=0, stats=stats)
        per_rep = (time.perf_counter() - t0) / PROBE_REPS
        pad = pad_for(stats.get("host_ms_per_rep", 0.0))
        return choose_reps(per_rep + pad / 1e3, t["target_s"], t["min_reps"], t["max_reps"]), pad

    # ------------------------------------------------------------------------------------------ the submission

    def _set_buffers(self, spec: Any, rot: Any) -> list[list[Any]]:
        """The rotation's input sets in shared memory: written and registered (on CUDA, uploaded by the host) once,
        for every batch of the rotation (the calibration's eight, the probe, timed and cross-check batches), so no
        batch's wall holds their copies. A new rotation releases the last one's."""
        if self._sets is not None and self._sets[0] is rot:
            return self._sets[1]
        self.release_sets()
        ev = self.ev
        huge = ev.huge(spec)
        dev = self.on_device
        first = ev.new_buffers([(tuple(t.shape), t.dtype) for t in rot.contents[0]], contents=list(rot.contents[0]),
                               on_device=dev)
        set_bufs = [first]
        for content in rot.contents[1:]:
            own = [t for t, h in zip(content, huge, strict=True) if not h]
            made = iter(ev.new_buffers([(tuple(t.shape), t.dtype) for t in own], contents=own, on_device=dev)
                        if own else [])
            set_bufs.append([f if h else next(made) for f, h in zip(first, huge, strict=True)])
        self._sets = (rot, set_bufs)
        return set_bufs

    def _fetch_buffers(self, spec: Any, rows: int) -> list[Any] | None:
        """GPU buffers with at least ``rows`` rows per output for a verify step to copy into (None: the host copies
        into the batch's shared-memory slots); kept while they are large enough, so a workload's batches reuse
        them."""
        ev = self.ev
        if not self.on_device or not rows:
            return None
        if self._fetch and self._fetch[0].shape[0] >= rows:
            return self._fetch
        self.release_fetch()
        out_bytes = _out_bytes(ev, spec)
        limit = self._gpu_budget(FETCH_BYTES, FETCH_SHARE)
        if rows * out_bytes > limit:
            return None
        cap = max(rows, VERIFY_SAMPLE + 4)  # room for any later verify step of the workload, where it fits
        cap = cap if cap * out_bytes <= limit else rows
        self._fetch = ev.new_buffers([((cap, *spec.shapes[t.name]), spec.dtypes[t.name]) for t in ev.task.outputs],
                                     mirror=False, on_device=True)
        return self._fetch

    def release_fetch(self) -> None:
        bufs, self._fetch = self._fetch, []
        try:
            self.ev.host.release([b.id for b in bufs])
        finally:
            for b in bufs:
                b.close()

    def release_sets(self) -> None:
        """The host unmaps the current rotation's input sets, and so does the evaluator."""
        if self._sets is None:
            return
        bufs = list({id(b): b for bufs in self._sets[1] for b in bufs}.values())
        self._sets = None
        try:
            self.ev.host.release([b.id for b in bufs])
        finally:
            for b in bufs:
                b.close()

    def _batch_request(self, spec: Any, rot: Any, reps: int, *, start: int, warmup_ms: float, pad_ms: float,
                       wall_rounds: int = 0) -> tuple[dict[str, Any], list[Any]]:
        """The rotation's set buffers, one new ``[reps, *shape]`` slot per output (the host unmaps those when the
        batch ends), and the request using them."""
        ev = self.ev
        huge = ev.huge(spec)
        set_bufs = self._set_buffers(spec, rot)
        outs = ev.new_buffers([((reps, *spec.shapes[t.name]), spec.dtypes[t.name]) for t in ev.task.outputs],
                              mirror=False)
        req = {"sets": [[b.id for b in bufs] for bufs in set_bufs], "outs": [b.id for b in outs], "reps": reps,
               "start": start, "scalars": spec.scalars, "warmup_ms": warmup_ms, "pad_ms": pad_ms,
               "wall_rounds": wall_rounds, "shared": [i for i, h in enumerate(huge) if h], "keep_sets": True}
        if any(huge):
            from runner.stats import derive_seed

            req["fingerprint_key"] = derive_seed(ev.seed, spec.workload.name, "batch", start, reps)
        return req, outs

    def _run_batch(self, wl: Any, spec: Any, rot: Any, reps: int, *, start: int, pad_ms: float,
                   warmup_ms: float, check: Any, wall_rounds: int = 0,
                   null: list[Any] | None = None) -> tuple[Any, float, float]:
        """One timed batch, then its verification: returns the reply, the evaluator's milliseconds around the
        timed loop and around the verify step. Every rep's outputs are checked before this returns."""
        ev = self.ev
        with self._spent("buffers"):
            req, outs = self._batch_request(spec, rot, reps, start=start, warmup_ms=warmup_ms, pad_ms=pad_ms,
                                            wall_rounds=wall_rounds)
        if null is not None:
            req["null"] = null
        limit = float(ev.cfg.get("stall_s") or 300.0) + 60.0
        t0 = time.perf_counter()
        reply = ev.host.batch(req, timeout_s=limit)
        wall = 1e3 * (time.perf_counter() - t0)
        self._spend("host_batch", wall / 1e3)
        self._spend("batches", 1)
        verify_ms = 0.0
        try:
            if null is None:
                ev._violations(wl.name)
                ev._check_host("timing", wl.name)
                self.record_call(wl.name, reply)
            if not reply.ok:
                return reply, wall, verify_ms
            if null is None and req.get("fingerprint_key") is not None:
                huge = ev.huge(spec)
                ev._huge_unchanged(wl.name, "timed calls", [t for t, h in zip(rot.contents[0], huge, strict=True) if h],
                                   [t.name for t, h in zip(ev.task.inputs, huge, strict=True) if h],
                                   req["fingerprint_key"], reply.fingerprints)
            if reply.screened and null is None:
                check.problems += list(reply.screened)
            verify_ms = self._verify(wl, spec, rot, reps, start, reply.batch_id, outs, check, null is not None,
                                     limit)
        finally:
            for b in outs:
                b.close()
        return reply, wall, verify_ms

    def _verify(self, wl: Any, spec: Any, rot: Any, reps: int, start: int, batch_id: int, outs: list[Any],
                check: Any, null: bool, limit: float) -> float:
        """Checksums of every rep under a key drawn now, the first rep per input set and a secret sample in full
        (:mod:`runner.host_timing`); reps whose checksums differ from their set's first are fetched and checked in
        full too. Rows are fetched at most :meth:`_fetch_rows` per verify step, each later step's checksums
        compared with the first's. Returns the milliseconds of the first verify step (the clock's second part)."""
        from runner.huge_inputs import fingerprint
        from runner.stats import derive_seed

        ev = self.ev
        nout = len(ev.task.outputs)
        content_of = [rot.slot(start + r)[1] for r in range(reps)]
        first: dict[int, int] = {}
        for r, c in enumerate(content_of):
            first.setdefault(c, r)
        rest = [r for r in range(reps) if r not in first.values()]
        sample = self.rng.sample(rest, min(len(rest), VERIFY_SAMPLE))
        full = sorted({*first.values(), *sample})
        key = derive_seed(ev.seed, wl.name, "verify", batch_id)
        pending = [r for r in range(reps) if r not in full]
        group = self._fetch_rows(spec)
        head, later = full[:group], full[group:]
        done = null or not (later or pending)
        t0 = time.perf_counter()
        ver, into = self._verify_step(spec, batch_id, key, head, done, limit)
        verify_ms = 1e3 * (time.perf_counter() - t0)
        self._spend("host_verify", verify_ms / 1e3)
        if len(ver.digests) != reps or any(len(d) != nout for d in ver.digests):
            if null:
                return verify_ms
            ev._flag("protocol.malformed", f"the kernel host returned {len(ver.digests)} checksums for {reps} reps",
                     wl.name)
            raise Stop
        if null:
            return verify_ms

        def check_rows(fetched_rows: list[int], into: list[Any] | None) -> None:
            at = {r: j for j, r in enumerate(fetched_rows)}
            with self._spent("check"):
                for r in fetched_rows:
                    # Private copies, made after the host's reply: what is checked, whatever the host writes later.
                    copies = tuple(o.tensor[at[r]].clone() for o in into) if into is not None else \
                        tuple(o.tensor[r].to(ev.device, copy=True) for o in outs)
                    mine = [int(fingerprint(c, key + j)) for j, c in enumerate(copies)]
                    if mine != ver.digests[r]:
                        ev._flag("protocol.malformed", f"{wl.name}: the kernel host's checksum of timed call {r} does "
                                 "not match the output it copied out", wl.name)
                        raise Stop
                    check(content_of[r], copies)

        check_rows(head, into)
        # The others must be bit-identical to their set's first output (checked in full above); those that are not
        # (a nondeterministic kernel, or one that changes its answers) are fetched and checked in full.
        differ = [r for r in pending if ver.digests[r] != ver.digests[first[content_of[r]]]]
        more = later + differ
        steps = [more[i:i + group] for i in range(0, len(more), group)] or ([] if done else [[]])
        for n, rows in enumerate(steps):
            with self._spent("host_verify"):
                again, into = self._verify_step(spec, batch_id, key, rows, n == len(steps) - 1, limit)
            if again.digests != ver.digests:
                ev._flag("protocol.malformed", f"{wl.name}: the kernel host's checksums changed between two "
                         "verify steps of one batch", wl.name)
                raise Stop
            check_rows(rows, into)
        check.calls += len(pending) - len(differ)
        with self._spent("check"):
            check.settle()
        return verify_ms

    def _verify_step(self, spec: Any, batch_id: int, key: int, rows: list[int], last: bool,
                     limit: float) -> tuple[Any, list[Any] | None]:
        """One verify request for ``rows`` (into the workload's GPU fetch buffers where they fit): the host's
        reply and the buffers the rows are in (None: the batch's shared-memory slots)."""
        into = self._fetch_buffers(spec, len(rows))
        self._spend("verify_steps", 1)
        self.cost["verify_rows_max"] = max(self.cost.get("verify_rows_max", 0), len(rows))
        ver = self.ev.host.verify(batch_id, key, rows, last=last, timeout_s=limit,
                                  into=[b.id for b in into] if into is not None else None)
        return ver, into

    def _fetch_rows(self, spec: Any) -> int:
        """Rows one verify step fetches at most: what the workload's fetch buffers hold or the fetch budget
        allows, and at least one (a row over the budget goes through the batch's shared-memory slots). Round 14's
        cross_entropy fetched its 2.1-4.8 GB rows all at once, which overran the budget, so every row went through
        host memory: 32 s of its 64 s evaluation."""
        have = int(self._fetch[0].shape[0]) if self._fetch else 0
        return max(1, have, int(self._gpu_budget(FETCH_BYTES, FETCH_SHARE) // max(_out_bytes(self.ev, spec), 1)))

    def _chunk_reps(self, spec: Any) -> int:
        """Reps whose outputs one batch may stage (:data:`CHUNK_BYTES`), at least one."""
        return max(1, int(self._gpu_budget(CHUNK_BYTES, CHUNK_SHARE) // max(_out_bytes(self.ev, spec), 1)))

    def time_submission(self, wl: Any, spec: Any) -> None:
        """Probe, timed batch, wall-clock cross-check; every output checked; the clock compared with the events."""
        ev = self.ev
        torch = ev.torch
        from runner.timing import WARMUP_MS, choose_reps, pad_for

        t = self.t
        try:
            rot = self.rotation(wl, spec, "timing", "0", with_refs=True)
        except torch.OutOfMemoryError:
            ev.chan.send("timing", workload=wl.name, skipped="not enough GPU memory for the rotated input sets")
            return
        check = ev_recheck(ev, spec, rot)
        warm = float(t.get("warmup_ms", WARMUP_MS))
        # One rep per set, then PROBE_REPS paced reps (fewer where the staging budget is short, at least one).
        probe_reps = rot.size + max(1, min(PROBE_REPS, self._chunk_reps(spec) - rot.size))
        probe, _, _ = self._run_batch(wl, spec, rot, probe_reps, start=0, pad_ms=0.0, warmup_ms=0.0, check=check)
        if not probe.ok:
            self._timing_error(wl, probe)
            return
        per_rep_ms = statistics.fmean(probe.samples_ms[rot.size:]) if len(probe.samples_ms) > rot.size else 0.0
        pad = pad_for(probe.host_ms_per_rep)
        reps = choose_reps((per_rep_ms + pad + self._overhead(wl)) / 1e3, t["target_s"], t["min_reps"],
                           t["max_reps"])
        chunk = min(reps, self._chunk_reps(spec))
        samples: list[float] = []
        dists: list[str] = []  # the input distribution of each sample's set (rotation j draws dists[j % len])
        clock: list[tuple[int, float, float]] = []
        verify_ms = 0.0
        start = probe_reps
        done = 0
        while done < reps:
            n = min(chunk, reps - done)
            reply, wall, vms = self._run_batch(wl, spec, rot, n, start=start + done, pad_ms=pad, warmup_ms=warm,
                                               check=check)
            if not reply.ok:
                self._timing_error(wl, reply)
                return
            samples += reply.samples_ms
            dists += sample_dists(ev.dists, rot, start + done, len(reply.samples_ms))
            clock.append((n, wall, reply.pad_ms))
            verify_ms = max(verify_ms, vms)
            done += n
        rounds = max(1, min(8, reps // rot.size))
        cross, _, _ = self._run_batch(wl, spec, rot, 0, start=start + done, pad_ms=0.0, warmup_ms=0.0,
                                      check=check, wall_rounds=rounds)
        ev._check_host("the wall-clock cross-check", wl.name)
        with self._spent("buffers"):
            self.release_sets()
            self.release_fetch()
        ev.chan.send("timing", workload=wl.name, samples=samples, dists=dists, batch=cross.wall or {}, sets=rot.size,
                     checked=check.calls, problems=check.problems[:5], n_problems=len(check.problems), pad_ms=pad,
                     clock=self._clock(wl, samples, clock, verify_ms), cost=dict(self.cost))

    def _gpu_budget(self, most: int, share: float) -> float:
        """Bytes of GPU memory a use may take: at most ``most``, and ``share`` of the free memory (off CUDA:
        ``most``); :data:`CHUNK_BYTES`, :data:`FETCH_BYTES`."""
        ev = self.ev
        if self.t.get("budget_bytes"):  # tests: the chunked paths on a CPU
            return float(min(most, self.t["budget_bytes"]))
        if ev.device.type != "cuda":
            return float(most)
        return min(most, share * ev.torch.cuda.mem_get_info(ev.device)[0])

    def _overhead(self, wl: Any) -> float:
        cal = self.calibration.get(wl.name)
        return cal["per_rep_ms"] if cal else 0.0

    def _clock(self, wl: Any, samples: list[float], chunks: list[tuple[int, float, float]],
               verify_ms: float = 0.0) -> dict[str, Any]:
        """The evaluator's clock against the events (see the module docstring); a verify step far slower than
        the null kernel's is work done after the timed loop, and is flagged too."""
        cal = self.calibration.get(wl.name)
        reps = sum(n for n, _, _ in chunks)
        if not cal or not reps or not samples:
            return {"available": False}
        k = cal["pad_factor"]
        implied, se = clock_estimate(cal, chunks)
        mean = statistics.fmean(samples)
        # The pad's length follows the SM clock, which can move between calibration and batch: 3% of it is noise.
        pad_mean = sum(n * pad for n, _, pad in chunks) / reps
        margin = untrusted_margin(max(implied, 0.0), se) + PAD_DRIFT * k * pad_mean
        late = verify_ms > VERIFY_SLACK * cal.get("verify_ms", 0.0) + VERIFY_FLOOR_MS
        return {"available": True, "implied_ms": implied, "events_mean_ms": mean, "margin_ms": margin,
                "untrusted": mean < implied - margin or late, "late_verify": late, "verify_ms": verify_ms,
                "reps": reps, "wall_ms": sum(w for _, w, _ in chunks),
                "pad_ms": pad_mean, "se_ms": se,
                **{key: cal[key] for key in ("fixed_ms", "per_rep_ms", "noise_ms", "pad_factor", "sigma_ms")}}

    def _timing_error(self, wl: Any, reply: Any) -> None:
        err = reply.error
        self.ev.chan.send("call_error", workload=wl.name, what="timing", status=err.status, fatal=err.fatal,
                          message=err.message)
        if err.fatal:
            raise Stop


def sample_dists(dists: Any, rot: Any, first: int, n: int) -> list[str]:
    """The input distribution of reps ``first`` .. ``first + n - 1`` of a batch on ``rot``: the content a rep gets
    (:meth:`runner.timing.Rotation.slot`) is set j, drawn from ``dists[j % len(dists)]`` (:meth:`Timer.rotation`;
    sets after the first share the first's huge inputs, so only their other inputs follow their distribution)."""
    return [str(dists[rot.slot(first + r)[1] % len(dists)]) for r in range(n)]


def ev_recheck(ev: Any, spec: Any, rot: Any) -> Any:
    """A :class:`runner.timing.Recheck` of timed outputs against the rotation's references (with the task's own
    ``check`` when it has one), every fetched output compared with the reference."""
    from runner.checks import make_recheck

    dtypes = ev.task.tensor_dtypes(spec.workload)
    tols = [ev.task.tolerance_for(dtypes[t.name]) for t in ev.task.outputs]
    return make_recheck(rot.refs, tols, ev.device, ref=ev.ref, spec=spec, contents=rot.contents, full=True)


def _nbytes(shape: Any, dtype: Any) -> int:
    from runner.shm import tensor_nbytes

    return tensor_nbytes(shape, dtype)


def _out_bytes(ev: Any, spec: Any) -> int:
    """Bytes of one call's outputs."""
    return sum(_nbytes(spec.shapes[o.name], spec.dtypes[o.name]) for o in ev.task.outputs)


__all__ = ["Timer", "calibration_reps", "clock_estimate", "ev_recheck", "fit_calibration", "sample_dists",
           "untrusted_margin"]
