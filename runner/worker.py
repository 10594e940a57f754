"""The evaluation worker: runs inside the sandbox (:mod:`runner.sandbox`), never in the caller's process.

Order of a job (each step reports over the authenticated channel; the parent decides every status):

1. Trusted phase, before the submission exists in this process: load the task and its reference module; on
   CUDA, measure the roofline ceilings if the parent has none cached, and time the task's baseline eager and
   under ``torch.compile`` on every timed workload (so a submission cannot slow the baselines down).
2. Snapshot the harness (:class:`runner.integrity.Guard`), then import the submission.
3. Per workload: correctness trials over the reference module's distributions (secret per-trial seeds, clones,
   poisoned allocator, reference computed after the call), a repeat trial on the same buffers with a few values
   changed; then on CUDA the timing of :mod:`runner.timing` with every output rechecked, or on CPU a shorter
   rotation that rechecks outputs without timing; then one profiled call (:mod:`runner.profile_proof`).
   The guard is verified after every call, before anything it protects is used again.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from runner.sandbox import ChannelWriter, apply_limits, read_all

PRELOAD = ("torch", "triton", "triton.language", "numpy", "yaml", "pydantic", "d2kgrade.schema", "d2kgrade.records",
           "runner.compare", "runner.direct", "runner.inputs", "runner.loading", "runner.integrity", "runner.timing",
           "runner.trials", "runner.profile_proof", "runner.roofline", "runner.stats", "runner.checks",
           "runner.huge_inputs", "torch.profiler", "torch._dynamo")
"""Imported once by the zygote (torch._dynamo alone is ~3 s). If any of them loaded the CUDA driver, the zygote
refuses to serve and jobs are spawned instead (see :func:`zygote_main`)."""

PROBE_REPS = 3
"""Calls timed, without warm-up, to pace the timed batch: after one call per input set (each output compared with
the reference in full, the costly check), these show the cost of a steady-state call."""


# --------------------------------------------------------------------------------------------- entry points


def zygote_main(ctrl_fd: int) -> None:
    """Import the heavy modules once, then fork one job per request (see :mod:`runner.sandbox`)."""
    import importlib

    sock = socket.socket(fileno=ctrl_fd)
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module that fails here fails again, visibly, in the job
            pass
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # job leaders are reaped automatically
    # A CUDA driver initialised before fork() is unusable in the children: refuse, and the parent spawns instead.
    with open("/proc/self/maps") as fh:
        driver_loaded = "libcuda.so" in fh.read()
    sock.send(b"nofork" if driver_loaded else b"ready")
    if driver_loaded:
        os._exit(0)
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 4)
        except OSError:
            break
        if not msg:
            break
        job = json.loads(msg)
        pid = os.fork()
        if pid == 0:
            _job_leader(job, fds, sock)
        for fd in fds:
            os.close(fd)
        try:
            sock.send(json.dumps({"pid": pid}).encode())
        except OSError:
            break
    os._exit(0)


def _job_leader(job: dict[str, Any], fds: list[int], sock: socket.socket) -> None:
    """Session leader of one job: forks the worker, waits for it, reports how it ended."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        sock.close()
        cfg_r, res_w, log_fd, status_w = fds
        child = os.fork()
        if child == 0:
            os.close(status_w)
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            os.close(log_fd)
            os.chdir(job["cwd"])
            os.environ.update(job["env"])
            _child(cfg_r, res_w)
        for fd in (cfg_r, res_w, log_fd):
            os.close(fd)
        _, status = os.waitpid(child, 0)
        os.write(status_w, json.dumps({"status": status}).encode())
    finally:
        os._exit(0)


def spawn_main(cfg_fd: int, res_fd: int) -> None:
    """Entry of a freshly spawned worker (``D2KGRADE_EVAL_MODE=spawn``)."""
    _child(cfg_fd, res_fd)


def _child(cfg_fd: int, res_fd: int) -> None:
    code = 0
    chan: ChannelWriter | None = None
    try:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        cfg = json.loads(read_all(cfg_fd))
        chan = ChannelWriter(res_fd, bytes.fromhex(cfg.pop("channel_key")))
        apply_limits(cfg.pop("limits", {}))
        if cfg.get("mode") == "prebuild":
            _prebuild(cfg, chan)
        else:
            Job(cfg, chan).run()
    except BaseException as exc:  # noqa: BLE001 - whatever happens is reported, then the process ends
        code = 1
        if chan is not None:
            try:
                chan.send("harness_error", message="".join(traceback.format_exception(exc))[-4000:])
            except OSError:
                pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _prebuild(cfg: dict[str, Any], chan: ChannelWriter) -> None:
    """Import a CUDA submission with no GPU visible, so its top-level ``load_inline`` builds into the cache."""
    from runner.loading import load_module

    path = Path.cwd() / f"submission_{cfg['source_sha'][:12]}.py"
    path.write_text(cfg["source"])
    try:
        load_module(path, prefix="d2k_build")
        chan.send("prebuilt", error=None)
    except BaseException as exc:  # noqa: BLE001 - GPU code at import fails here by design; the build may be done
        chan.send("prebuilt", error=f"{type(exc).__name__}: {exc}"[:2000])


# --------------------------------------------------------------------------------------------- the job


class Stop(Exception):
    """The evaluation cannot go on (a reject flag, a dead CUDA context); already reported."""


class Job:
    """One evaluation inside the worker."""

    def __init__(self, cfg: dict[str, Any], chan: ChannelWriter) -> None:
        self.cfg = cfg
        self.chan = chan

    # ------------------------------------------------------------------------------------- setup

    def run(self) -> None:
        import torch

        from d2kgrade.schema import Task, Workload
        from runner.inputs import WorkloadSpec, distributions
        from runner.loading import load_module

        cfg = self.cfg
        self.torch = torch
        cuda = cfg["device"] == "cuda"
        self.device = torch.device("cuda", 0) if cuda else torch.device("cpu")
        if cuda:
            torch.cuda.set_device(self.device)
            torch.cuda.init()
        else:
            torch.set_num_threads(1)  # see runner.sandbox._device_env
        self.chan.send("ready", environment=_environment(self.device))
        self.task = Task.model_validate(cfg["task"])
        self.ref = load_module(Path(cfg["reference_py"]), prefix="d2k_ref")
        self.dists = distributions(self.ref)
        self.seed = int(cfg["seed"])
        from runner.huge_inputs import HUGE_INPUT_BYTES

        self.huge_bytes = int(cfg.get("huge_input_bytes") or HUGE_INPUT_BYTES)
        self.workloads = []
        for w in cfg["workloads"]:
            wl = Workload(name=w["name"], params=w["params"], dtype=w["dtype"])
            self.workloads.append((wl, WorkloadSpec.resolve(self.task, wl), bool(w.get("hidden")),
                                   bool(w.get("timed"))))
        timing = cfg.get("timing", {})
        # host_backend: tests drive the timing path on a CPU with the host clock (never a published figure).
        self.timing_on = bool(timing.get("enabled")) and (cuda or bool(timing.get("host_backend")))
        job_triton_cache = os.environ.get("TRITON_CACHE_DIR", "")
        if self.timing_on:
            from runner.timing import flush_buffer

            if cfg.get("trusted_cache_dir"):
                os.environ["TRITON_CACHE_DIR"] = str(Path(cfg["trusted_cache_dir"]) / "triton")
                os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(cfg["trusted_cache_dir"]) / "inductor"))
            if not cfg.get("ceilings") and cuda:
                from runner.roofline import measure_ceilings

                self.chan.send("ceilings", ceilings=measure_ceilings(self.device))
            self.flush = flush_buffer(self.device)
            for wl, spec, hidden, timed in self.workloads:
                if timed and not hidden:
                    self._baselines(wl, spec)
            if cuda:
                torch.cuda.empty_cache()
        os.environ["TRITON_CACHE_DIR"] = job_triton_cache
        try:
            self._import_submission()
            for wl, spec, hidden, timed in self.workloads:
                self.chan.send("workload_start", name=wl.name)
                passed = self._correctness(wl, spec, hidden)
                if passed and not hidden:
                    if self.timing_on and timed:
                        self._time_submission(wl, spec)
                    else:
                        self._recheck_rotation(wl, spec)
                    self._profile(wl, spec)
                self.chan.send("workload_end", name=wl.name)
        except Stop:
            pass
        self.chan.send("done")

    def _import_submission(self) -> None:
        from runner.integrity import Guard, harness_objects
        from runner.loading import load_module

        cfg = self.cfg
        path = Path.cwd() / f"submission_{cfg['source_sha'][:12]}.py"
        path.write_text(cfg["source"])
        os.chmod(path, 0o400)
        self.source_file = str(path.resolve())
        self.launches = _LaunchCounter(self.source_file) if self.device.type == "cpu" else None
        _warm_up(self.device)
        import runner.checks  # noqa: F401 - imported before the snapshot, so the guard watches it
        self.guard = Guard(harness_objects(self.ref, interpreter=self.device.type == "cpu"))
        self.chan.send("import_start")
        t0 = time.perf_counter()
        try:
            module = load_module(path, prefix="d2k_sub")
        except BaseException as exc:  # noqa: BLE001 - the submission's own failure at import
            from runner.trials import classify_exception, format_exception

            status = "compile_error" if isinstance(exc, (SyntaxError, ImportError)) else classify_exception(exc)[0]
            if isinstance(exc, SystemExit):
                status = "runtime_error"
            self.chan.send("import_error", status=status, message=format_exception(exc))
            self._check_guard("import")
            raise Stop from None
        self._check_guard("import")
        kernel = module.__dict__.get("kernel")
        if not callable(kernel):
            self.chan.send("import_error", status="compile_error", message="the file defines no callable kernel(...)")
            raise Stop
        self.kernel = kernel
        self._freeze_state()
        self.chan.send("imported", seconds=time.perf_counter() - t0)

    # ------------------------------------------------------------------------------------- checks

    def _flag(self, code: str, message: str, workload: str | None = None) -> None:
        self.chan.send("flag", code=code, message=message, workload=workload)

    def _freeze_state(self) -> None:
        """Remember what this job object holds: a frame walker could swap the reference module, the kernel or the
        task (its tolerances) on the instance, which the module-level guard does not see."""
        self._state = {k: id(v) for k, v in vars(self).items() if k != "_state"}
        self._task_json = self.task.model_dump_json()

    def _check_guard(self, where: str, workload: str | None = None) -> None:
        bad = self.guard.violations()
        state = getattr(self, "_state", None)
        if state is not None:
            now = {k: id(v) for k, v in vars(self).items() if k not in ("_state", "_task_json")}
            if now != {k: v for k, v in state.items() if k != "_task_json"} or (
                    self.task.model_dump_json() != self._task_json):
                bad = [*bad, "the evaluator's own state (reference, kernel, task or tolerances) was changed"]
        if bad:
            self._flag("harness_patched", f"after {where}: " + "; ".join(bad[:6]), workload)
            raise Stop
        n = self.guard.new_threads()
        if n:
            self._flag("thread_started", f"after {where}: {n} thread(s) started by the submission are running",
                       workload)
            raise Stop

    def _call(self, args: tuple[Any, ...], scalars: dict[str, Any], wl: str, what: str) -> Any:
        """Call the kernel; on an exception report it (status by kind) and raise Stop or return None."""
        from runner.trials import classify_exception, context_alive, format_exception

        try:
            out = self.kernel(*args, **scalars)
            if self.device.type == "cuda":
                self.torch.cuda.synchronize()
        except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt included
            status, fatal = classify_exception(exc)
            if not fatal and not context_alive(self.device):
                status, fatal = "crashed", True
            self._check_guard(what, wl)
            self.chan.send("call_error", workload=wl, what=what, status=status, fatal=fatal,
                           message=format_exception(exc))
            if fatal:
                raise Stop from None
            return None
        self._check_guard(what, wl)
        return out

    def _outputs_ok(self, out: Any, wl: str) -> tuple[Any, ...]:
        from runner.trials import bad_output, output_tuple

        outs = output_tuple(out)
        for o in outs:
            why = bad_output(o, self.device)
            if why:
                self._flag("output_not_plain_tensor", why, wl)
                raise Stop
        return outs

    def _compare(self, spec: Any, outs: tuple[Any, ...], expected: Any,
                 inputs: tuple[Any, ...]) -> list[dict[str, Any]]:
        """Judge the outputs (:func:`runner.checks.judge`); ``inputs`` are the pristine inputs, for a task's own
        ``check``. Callers verify the guard first."""
        from runner.checks import judge

        return [m.to_dict() for m in judge(self.task, spec, self.ref, outs, expected, inputs, self.device)]

    # ------------------------------------------------------------------------------------- correctness

    def _correctness(self, wl: Any, spec: Any, hidden: bool) -> bool:
        from runner.huge_inputs import huge_mask, pass_inputs
        from runner.inputs import make_inputs
        from runner.stats import derive_seed
        from runner.trials import perturb_

        huge = huge_mask(self.task, spec, self.huge_bytes)
        n = max(int(self.cfg.get("trials", 3)), len(self.dists))
        if hidden:
            n = min(n, int(self.cfg.get("hidden_trials", 2)))
        all_ok = True
        originals: tuple[Any, ...] = ()
        given: tuple[Any, ...] = ()
        for i in range(n):
            dist = self.dists[i % len(self.dists)]
            originals = given = ()  # a huge input of the last trial is freed before the next one is made
            try:
                originals = make_inputs(self.ref, spec, seed=derive_seed(self.seed, wl.name, i), device=self.device,
                                        dist=dist)
            except Exception as exc:
                if not hidden:
                    raise
                # The drawn shape breaks a constraint of the task's input maker: the task's fault, not the kernel's.
                self.chan.send("workload_skipped", workload=wl.name, reason=f"{type(exc).__name__}: {exc}"[:500])
                return False
            given = pass_inputs(originals, huge)  # huge inputs: the tensor itself, fingerprinted in _trial
            ok = self._trial(spec, wl.name, i, dist, originals, given)
            if ok is None:
                return False
            all_ok &= ok
        if all_ok and not hidden:
            # The same buffers again with a few values changed: a pointer- or sample-keyed cache answers stale.
            gen = self.torch.Generator(device=self.device)
            gen.manual_seed(derive_seed(self.seed, wl.name, "repeat"))
            fresh = pass_inputs(originals, huge)  # a huge input is perturbed in place (given is that tensor)
            perturb_(fresh, gen)
            for g, f in zip(given, fresh, strict=True):
                g.copy_(f)
            ok = self._trial(spec, wl.name, n, "repeat", fresh, given)
            all_ok &= bool(ok)
        return all_ok

    def _trial(self, spec: Any, wl: str, index: int, dist: str, originals: tuple[Any, ...],
               given: tuple[Any, ...]) -> bool | None:
        from runner.huge_inputs import changed, fingerprints, shared
        from runner.trials import digest, poison, same_bits, sponge

        key = self.seed ^ index
        same = shared(given, originals)  # huge inputs: the kernel got the harness's own tensor
        kept = tuple(o for o, s in zip(originals, same, strict=True) if not s)
        passed = [g for g, s in zip(given, same, strict=True) if s]
        before = digest(kept, key)
        prints = fingerprints(passed, key)
        sponge(self.device)
        out = self._call(given, spec.scalars, wl, f"trial {index} ({dist})")
        if out is None:
            return None
        if digest(kept, key) != before:
            self._flag("harness_patched", f"trial {index} ({dist}): the evaluator's private copy of the inputs "
                       "changed during the call (frame walking)", wl)
            raise Stop
        outs = self._outputs_ok(out, wl)
        mutated = [t.name for t, g, o, s in zip(self.task.inputs, given, originals, same, strict=True)
                   if not s and not same_bits(g, o)]
        huge_names = [t.name for t, s in zip(self.task.inputs, same, strict=True) if s]
        mutated += [huge_names[i] for i in changed(prints, fingerprints(passed, key))]
        if mutated:
            self._flag("input_mutated", f"trial {index} ({dist}): the kernel wrote to its input(s) "
                       f"{', '.join(mutated)}", wl)
            raise Stop
        expected = self.ref.reference(*originals, **spec.scalars)  # after the call: nothing freed holds it
        self._check_guard("the reference", wl)
        res = self._compare(spec, outs, expected, originals)
        from runner.trials import output_tuple

        for t in (*outs, *output_tuple(expected)):
            poison(t)
        del out, outs, expected
        ok = all(r["ok"] for r in res)
        self.chan.send("trial", workload=wl, index=index, dist=dist, ok=ok, outputs=res)
        return ok

    # ------------------------------------------------------------------------------------- rotation

    def _rotation(self, wl: Any, spec: Any, salt: str, sets: int, with_refs: bool) -> Any:
        from runner.huge_inputs import huge_mask, rotation_buffers, rotation_contents
        from runner.inputs import make_inputs
        from runner.stats import derive_seed
        from runner.timing import Rotation
        from runner.trials import output_tuple

        # Huge inputs do not rotate: every set shares set 0's, and the kernel gets them as they are.
        huge = huge_mask(self.task, spec, self.huge_bytes)
        contents = rotation_contents(lambda j: make_inputs(
            self.ref, spec, seed=derive_seed(self.seed, wl.name, salt, j), device=self.device,
            dist=self.dists[j % len(self.dists)]), sets, huge)
        refs = [tuple(r.clone() for r in output_tuple(self.ref.reference(*c, **spec.scalars))) for c in contents] \
            if with_refs else None
        return Rotation(contents, rotation_buffers(contents, huge), list(refs or []))

    def _n_sets(self, spec: Any) -> int:
        """Input sets to rotate: 2-4 as memory allows (each set costs its inputs twice and its outputs three times:
        the reference, the kernel's own, the recheck's copy of the first one);
        1 only when two do not fit in 40% of free memory (then timing cannot vary the content at a pointer, and
        pointer-keyed caches are left to the correctness trials, which allocate fresh inputs each time)."""
        from runner.huge_inputs import huge_mask

        torch = self.torch
        elt = {name: torch.empty((), dtype=dt).element_size() for name, dt in spec.dtypes.items()}
        huge = huge_mask(self.task, spec, self.huge_bytes)  # shared by every set, so not counted per set
        per_set = sum(2 * _numel(spec.shapes[t.name]) * elt[t.name] for t, h in zip(self.task.inputs, huge,
                                                                                    strict=True) if not h) + sum(
            3 * _numel(spec.shapes[t.name]) * elt[t.name] for t in self.task.outputs)
        if self.device.type != "cuda":
            return 2
        free, _total = torch.cuda.mem_get_info(self.device)
        return max(1, min(4, int(0.4 * free // max(per_set, 1))))

    def _recheck(self, spec: Any, rotation: Any, full: bool = False) -> Any:
        """A :class:`runner.timing.Recheck` of this workload's outputs against the rotation's references; with the
        task's own ``check`` and the huge inputs' fingerprints when it has them (:mod:`runner.checks`)."""
        from runner.checks import Watch, make_recheck
        from runner.huge_inputs import huge_mask
        from runner.stats import derive_seed

        dtypes = self.task.tensor_dtypes(spec.workload)
        tols = [self.task.tolerance_for(dtypes[t.name]) for t in self.task.outputs]
        wl = spec.workload.name
        huge = huge_mask(self.task, spec, self.huge_bytes)
        watch = Watch.of([t.name for t, h in zip(self.task.inputs, huge, strict=True) if h],
                         [c for c, h in zip(rotation.contents[0], huge, strict=True) if h],
                         derive_seed(self.seed, wl, "huge"))

        def on_mutation(names: list[str]) -> None:
            self._flag("input_mutated", f"rotated calls: the kernel wrote to its input(s) {', '.join(names)}", wl)
            raise Stop

        return make_recheck(rotation.refs, tols, self.device, full=full, ref=self.ref, spec=spec,
                            contents=rotation.contents, verify=lambda: self._check_guard("rotated calls", wl),
                            watch=watch, on_mutation=on_mutation)

    def _recheck_rotation(self, wl: Any, spec: Any) -> None:
        """Untimed runs (CPU, or --no-timing): a few calls on rotated buffers, every output checked (what the timing
        loop does on the GPU)."""
        from runner.trials import sponge

        rot = self._rotation(wl, spec, "rotation", 2, with_refs=True)
        check = self._recheck(spec, rot, full=True)
        reps = int(self.cfg.get("cpu_rotation_reps", 4))
        for r in range(reps):
            args, content = rot.prepare(r)
            sponge(self.device)
            out = self._call(args, spec.scalars, wl.name, f"rotation call {r}")
            if out is None:
                return
            self._outputs_ok(out, wl.name)
            check(content, out)
            del out
        check.settle()
        self.chan.send("rotation", workload=wl.name, calls=reps, problems=check.problems[:5],
                       n_problems=len(check.problems))

    # ------------------------------------------------------------------------------------- timing (CUDA)

    def _baselines(self, wl: Any, spec: Any) -> None:
        from runner.timing import timed_reps

        torch = self.torch
        t = self.cfg["timing"]
        warm = float(t.get("warmup_ms", 100.0))
        msg: dict[str, Any] = {"workload": wl.name}
        try:
            rot = self._rotation(wl, spec, "baseline", self._n_sets(spec), with_refs=False)

            def eager(args: tuple[Any, ...]) -> Any:
                return self.ref.baseline(*args, **spec.scalars)

            reps, pad = self._probe(eager, rot, None)
            first = rot.size + PROBE_REPS
            msg["eager"] = timed_reps(eager, rot, reps, self.flush, start_rep=first, warmup_ms=warm, pad_ms=pad)
            if t.get("compile", True):
                import torch._inductor.config as inductor_config

                # Compile in this thread: inductor's worker pool leaves pool threads that it starts lazily, at times
                # only after the guard has counted this process's threads (then blamed on the submission: seen on
                # the H200 in a softmax evaluation with the compiled baseline).
                inductor_config.compile_threads = 1
                torch._dynamo.reset()
                compiled_fn = torch.compile(self.ref.baseline, dynamic=False)

                def compiled(args: tuple[Any, ...]) -> Any:
                    return compiled_fn(*args, **spec.scalars)

                t0 = time.perf_counter()
                compiled(rot.buffers[0])
                torch.cuda.synchronize()
                msg["compile_warmup_s"] = time.perf_counter() - t0
                creps, cpad = self._probe(compiled, rot, None)
                msg["compiled"] = timed_reps(compiled, rot, creps, self.flush, start_rep=first, warmup_ms=warm,
                                             pad_ms=cpad)
            del rot
        except Exception as exc:  # noqa: BLE001 - a baseline that fails is reported, not fatal
            msg["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        self.chan.send("baseline", **msg)

    def _probe(self, call: Any, rot: Any, check: Any) -> tuple[int, float]:
        """One call per input set (first-call costs, the full checks), then :data:`PROBE_REPS` calls whose pace
        gives the repetitions that fill ``target_s`` and whose host time gives the pad
        (:func:`runner.timing.pad_for`). Uses rotation slots ``0 .. rot.size + PROBE_REPS``."""
        from runner.timing import choose_reps, pad_for, timed_reps

        t = self.cfg["timing"]
        timed_reps(call, rot, rot.size, self.flush, check, warmup_ms=0)
        stats: dict[str, float] = {}
        t0 = time.perf_counter()
        timed_reps(call, rot, PROBE_REPS, self.flush, check, start_rep=rot.size, warmup_ms=0, stats=stats)
        per_rep = (time.perf_counter() - t0) / PROBE_REPS
        pad = pad_for(stats.get("host_ms_per_rep", 0.0))
        return choose_reps(per_rep + pad / 1e3, t["target_s"], t["min_reps"], t["max_reps"]), pad

    def _time_submission(self, wl: Any, spec: Any) -> None:
        from runner.timing import timed_reps, wall_batch
        from runner.trials import sponge

        t = self.cfg["timing"]
        try:
            rot = self._rotation(wl, spec, "timing", self._n_sets(spec), with_refs=True)
        except self.torch.OutOfMemoryError:
            self.chan.send("timing", workload=wl.name, skipped="not enough GPU memory for the rotated input sets")
            return
        sponge(self.device)
        check = self._recheck(spec, rot)

        def call(args: tuple[Any, ...]) -> Any:
            return self.kernel(*args, **spec.scalars)

        from runner.trials import classify_exception, context_alive, format_exception

        try:
            reps, pad = self._probe(call, rot, check)
            first = rot.size + PROBE_REPS
            samples = timed_reps(call, rot, reps, self.flush, check, start_rep=first,
                                 warmup_ms=float(t.get("warmup_ms", 100.0)), pad_ms=pad)
            self._check_guard("timing", wl.name)
            batch = wall_batch(call, rot, max(1, min(8, reps // rot.size)), check, start_rep=first + 2 * reps)
            self._check_guard("the wall-clock cross-check", wl.name)
        except Stop:
            raise
        except BaseException as exc:  # noqa: BLE001
            status, fatal = classify_exception(exc)
            if not fatal and not context_alive(self.device):
                status, fatal = "crashed", True
            self._check_guard("timing", wl.name)
            self.chan.send("call_error", workload=wl.name, what="timing", status=status, fatal=fatal,
                           message=format_exception(exc))
            if fatal:
                raise Stop from None
            return
        self.chan.send("timing", workload=wl.name, samples=samples, batch=batch, sets=rot.size,
                       checked=check.calls, problems=check.problems[:5], n_problems=len(check.problems),
                       bitwise_repeatable=not check.full, pad_ms=pad)

    # ------------------------------------------------------------------------------------- profile

    def _profile(self, wl: Any, spec: Any) -> None:
        from runner.huge_inputs import changed, fingerprints, huge_mask, pass_inputs
        from runner.inputs import make_inputs
        from runner.profile_proof import profile_call
        from runner.stats import derive_seed
        from runner.trials import poison, sponge

        inputs = make_inputs(self.ref, spec, seed=derive_seed(self.seed, wl.name, "profile"), device=self.device,
                             dist=self.dists[0])
        huge = huge_mask(self.task, spec, self.huge_bytes)
        given = pass_inputs(inputs, huge)
        passed = [t for t, h in zip(inputs, huge, strict=True) if h]
        key = derive_seed(self.seed, wl.name, "profile-huge")
        prints = fingerprints(passed, key)
        sponge(self.device)
        if self.launches is not None:
            self.launches.count = 0
        try:
            out, summary = profile_call(lambda: self.kernel(*given, **spec.scalars), self.device)
        except BaseException as exc:  # noqa: BLE001
            from runner.trials import format_exception

            self._check_guard("the profiled call", wl.name)
            self.chan.send("call_error", workload=wl.name, what="profiled call", status="runtime_error",
                           fatal=False, message=format_exception(exc))
            return
        self._check_guard("the profiled call", wl.name)
        outs = self._outputs_ok(out, wl.name)
        bad = changed(prints, fingerprints(passed, key))
        if bad:
            names = [t.name for t, h in zip(self.task.inputs, huge, strict=True) if h]
            self._flag("input_mutated", f"profiled call: the kernel wrote to its input(s) "
                       f"{', '.join(names[i] for i in bad)}", wl.name)
            raise Stop
        expected = self.ref.reference(*inputs, **spec.scalars)
        res = self._compare(spec, outs, expected, inputs)
        for o in outs:
            poison(o)
        data_numel = max(_numel(s) for s in spec.shapes.values())
        self.chan.send("profile", workload=wl.name, summary=summary, data_numel=data_numel,
                       own_launches=None if self.launches is None else self.launches.count,
                       ok=all(r["ok"] for r in res))


# --------------------------------------------------------------------------------------------- helpers


def _warm_up(device: Any) -> None:
    """Run once what rebinds torch or triton attributes lazily, so the guard's snapshot sees the settled state:
    importing torch._dynamo (the profiler does) wraps ``torch.manual_seed`` and friends, and a first Triton
    compile and launch, under the profiler, sets up the rest."""
    import torch
    import torch._dynamo  # noqa: F401

    from runner import warmup_kernel
    from runner.profile_proof import profile_call

    x = torch.zeros(200, device=device)
    profile_call(lambda: warmup_kernel.run(x), device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    if float(x.sum()) != 200.0:
        raise RuntimeError("the warm-up Triton kernel computed a wrong result: this machine's Triton is broken")


def _numel(shape: tuple[int, ...] | list[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


class _LaunchCounter:
    """Counts interpreter launches of Triton kernels defined in the submission's file (CPU)."""

    def __init__(self, source_file: str) -> None:
        from triton.runtime.interpreter import InterpretedFunction

        self.count = 0
        original = InterpretedFunction.run
        counter = self

        from torch.autograd.profiler import record_function

        from runner.profile_proof import INTERPRETER_RANGE

        def run(fn_self: Any, *args: Any, **kwargs: Any) -> Any:
            code = getattr(getattr(fn_self, "fn", None), "__code__", None)
            if code is not None and code.co_filename == source_file:
                counter.count += 1
            # The interpreter copies tensors to and from the host with ATen ops; the profile proof skips what
            # runs inside this range (it is the launch, not the submission's own PyTorch code).
            with record_function(INTERPRETER_RANGE):
                return original(fn_self, *args, **kwargs)

        InterpretedFunction.run = run  # type: ignore[method-assign]


def _environment(device: Any) -> dict[str, Any]:
    import platform

    import torch

    env: dict[str, Any] = {"device": device.type, "torch": torch.__version__, "python": platform.python_version(),
                           "cuda": torch.version.cuda, "interpreter": os.environ.get("TRITON_INTERPRET") == "1"}
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
    return env
