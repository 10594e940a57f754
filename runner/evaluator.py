"""The evaluator: the trusted process of an evaluation. It never imports or runs submission code.

It is forked by the job leader (:mod:`runner.worker`) after the kernel host, reads its configuration (the secret
seed among it) from a pipe only it holds, and reports to the caller over an authenticated channel whose key only
it holds. It owns everything a verdict stands on: the task and its reference module, the inputs and their
pristine copies, the float64 references, the baselines, every comparison, the thread and process counts of the
host (read from ``/proc``, not asked), and the clock around each timed batch. The kernel host only calls
``kernel(...)`` on buffers the evaluator filled and copies what it returned into the evaluator's output slots
(:mod:`runner.kernel_host`, :mod:`runner.host_client`).

Per workload:

1. trials over the reference module's distributions (secret per-trial seeds): write the set into the shared
   input buffers, poison the output slots, ask for a call, then, before anything else, copy the outputs and the
   inputs out of shared memory; the inputs must equal the pristine copies (an input the task declares in place,
   ``Task.inplace``, may instead hold exactly its output); outputs must be what the task declares, then they are
   compared with the reference computed here;
2. a repeat trial on the same buffers with a few values changed (a pointer-keyed cache answers stale);
3. CPU: a secret number of rotated calls, each on a fresh draw, each checked; CUDA: the timed batches
   (:mod:`runner.eval_timing`), every timed output checked;
4. profiled calls at secret positions (and every call of the hidden workload), beside the always-on op record
   of every call.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

from runner.host_client import HostClient, HostFailure
from runner.sandbox import ChannelWriter

CPU_ROTATION_RANGE = (7, 40)
CPU_ROTATION_MORE = 0.75
"""Rotated calls on CPU: at least 7, then one more with probability 3/4 each time (drawn per workload from the
secret seed), up to 40: 11 on average. With the 4 trials, a kernel sees at least 11 checked calls on the smoke
workload, so one that goes stale after its 10th call (or any earlier one) always fails, and one that goes stale
later fails in a share of runs it cannot predict (after its 20th: about 1 run in 18): there is no fixed last call
to aim past."""
PROFILE_SHARE = 0.25
"""Share of checked calls also run under the profiler (CUDA), at positions drawn from the secret seed; at least
one per workload, and every call of the hidden workload."""
THREAD_SLACK = 0
"""Native threads the host may gain during a call beyond its count after the warm-up."""


class Stop(Exception):
    """The evaluation cannot go on (already reported)."""


class Evaluator:
    """One evaluation, driven from the trusted side."""

    def __init__(self, cfg: dict[str, Any], chan: ChannelWriter, host: HostClient) -> None:
        self.cfg = cfg
        self.chan = chan
        self.host = host
        self._buf_id = 0

    # ------------------------------------------------------------------------------------------ setup

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
            torch.set_num_threads(1)
        self.chan.send("ready", environment=_environment(self.device))
        self.task = Task.model_validate(cfg["task"])
        try:
            self.ref = load_module(Path(cfg["reference_py"]), prefix="d2k_ref")
        except BaseException as exc:  # noqa: BLE001 - the task's fault, reported as such
            self._task_fault(f"{cfg['reference_py']}: failed to import: {type(exc).__name__}: {exc}")
            return
        self.dists = distributions(self.ref)
        self.seed = int(cfg["seed"])
        self.rng = random.Random(self.seed ^ 0x5EED)
        self.workloads = []
        for w in cfg["workloads"]:
            wl = Workload(name=w["name"], params=w["params"], dtype=w["dtype"])
            try:
                spec = WorkloadSpec.resolve(self.task, wl)
            except Exception as exc:  # noqa: BLE001 - a shape or dtype formula that does not resolve
                self._task_fault(f"task {self.task.id}: workload {wl.name!r} does not resolve: {exc}")
                return
            self.workloads.append((wl, spec, bool(w.get("hidden")), bool(w.get("timed"))))
        try:
            ready = self.host.ready()
        except HostFailure as exc:
            self.chan.send("harness_error", message=f"the kernel host did not start: {exc.message}")
            return
        self.base_threads = ready.threads
        self.chan.send("sandbox", description=ready.sandbox, uid=ready.uid)
        from runner import eval_timing

        self.timer = eval_timing.Timer(self)
        self.timer.before_import()
        try:
            self._import()
            for wl, spec, hidden, timed in self.workloads:
                self.chan.send("workload_start", name=wl.name)
                self._workload(wl, spec, hidden, timed)
                self.chan.send("workload_end", name=wl.name)
        except Stop:
            pass
        except HostFailure as exc:
            if exc.flag:
                self._flag(exc.flag, exc.message, getattr(self, "current", None))
            else:
                self.chan.send("call_error", workload=getattr(self, "current", None), what="the kernel host",
                               status=exc.status, fatal=True, message=exc.message)
        self.host.close()
        self.chan.send("done")

    def _task_fault(self, message: str) -> None:
        self.chan.send("task_fault", message=message[:2000])

    def _import(self) -> None:
        cfg = self.cfg
        self.chan.send("import_start")
        limit = float(cfg.get("stall_s") or 300.0) + 600.0  # a first import may build a CUDA extension
        try:
            loaded = self.host.load(cfg["source"], cfg["source_sha"], timeout_s=limit)
        except HostFailure as exc:
            if exc.flag:
                self._flag(exc.flag, exc.message, None)
            else:
                self.chan.send("import_error", status=exc.status, message=exc.message)
            raise Stop from None
        self._violations(None)
        if not loaded.ok:
            err = loaded.error
            self.chan.send("import_error", status=err.status, message=err.message, limitation=err.limitation)
            raise Stop
        self._check_host("import", None)
        self.chan.send("imported", seconds=loaded.seconds)

    # ------------------------------------------------------------------------------------------ host checks

    def _flag(self, code: str, message: str, workload: str | None) -> None:
        self.chan.send("flag", code=code, message=message, workload=workload)

    def _violations(self, wl: str | None) -> None:
        if self.host.violations:
            found, self.host.violations = self.host.violations, []
            self._flag("sandbox.refused", "the kernel host's audit hook refused: " + "; ".join(found[:5]), wl)
            raise Stop

    def _check_host(self, where: str, wl: str | None) -> None:
        """What the evaluator sees of the host from outside: its native threads and its processes."""
        from runner import containment

        n = self.host.threads()
        if n is not None and n > self.base_threads + THREAD_SLACK:
            self._flag("thread_started", f"after {where}: the kernel host runs {n} native threads, "
                       f"{n - self.base_threads} more than before the submission was loaded", wl)
            raise Stop
        kids = containment.children(self.host.pid)
        if kids:
            self._flag("process_started", f"after {where}: the kernel host has {len(kids)} child process(es)", wl)
            raise Stop

    # ------------------------------------------------------------------------------------------ buffers

    def new_buffers(self, shapes_dtypes: list[tuple[tuple[int, ...], Any]], *, mirror: bool = True,
                    contents: list[Any] | None = None, on_device: bool = False) -> list[Any]:
        """Shared buffers, registered with the host. ``mirror=False``: the host makes no GPU copy (a timed batch's
        output slots, which it fills from its own staging); ``contents``: written into the buffers before they are
        registered, and uploaded by the host to its mirrors then (a timed batch's input sets); ``on_device``: GPU
        buffers the host maps as they are (:mod:`runner.cuda_share`; only once the timer's probe has shown that
        the host can)."""
        from runner.cuda_share import DeviceBuffer
        from runner.shm import SharedBuffer

        bufs: list[Any] = []
        try:
            for shape, dtype in shapes_dtypes:
                self._buf_id += 1
                bufs.append(DeviceBuffer.create(self._buf_id, dtype, shape, self.device) if on_device else
                            SharedBuffer.create(self._buf_id, dtype, shape))
            for b, t in zip(bufs, contents, strict=True) if contents is not None else ():
                b.tensor.copy_(t)
            if on_device:
                self.torch.cuda.synchronize(self.device)  # the host's stream must see the contents
            got = self.host.register(bufs, mirror=mirror, upload=contents is not None)
        except BaseException:
            for b in bufs:
                b.close()
            raise
        if got != [b.id for b in bufs]:
            for b in bufs:
                b.close()
            self._flag("protocol.malformed", f"the kernel host mapped buffers {got[:8]}, not the "
                       f"{len(bufs)} it was given", self.current)
            raise Stop
        return bufs

    def io_buffers(self, spec: Any) -> tuple[list[Any], list[Any]]:
        """One call's shared inputs and output slots: on the GPU with ``gpu_call_buffers`` once the timer's probe
        has shown that the host maps them (the kernel then gets the shared inputs themselves), else in shared host
        memory."""
        dev = self._gpu_calls()
        ins = self.new_buffers([(spec.shapes[t.name], spec.dtypes[t.name]) for t in self.task.inputs], on_device=dev)
        outs = self.new_buffers([(spec.shapes[t.name], spec.dtypes[t.name]) for t in self.task.outputs],
                                on_device=dev)
        return ins, outs

    def _gpu_calls(self) -> bool:
        """Whether the correctness calls' buffers are shared GPU buffers (see :meth:`io_buffers`)."""
        return self.timer.on_device and bool(self.cfg.get("gpu_call_buffers"))

    # ------------------------------------------------------------------------------------------ one call

    def checked_call(self, spec: Any, wl: str, what: str, originals: tuple[Any, ...], ins: list[Any],
                     outs: list[Any], *, profile: bool = False) -> tuple[Any, list[Any]] | None:
        """Fill the shared inputs with ``originals``, call, and return (the reply, private copies of the outputs
        on the evaluator's device); None when the call raised (reported). Raises Stop on a rule break."""
        from runner.trials import poison

        for buf, t in zip(ins, originals, strict=True):
            buf.tensor.copy_(t)
        for buf in outs:
            poison(buf.tensor)
        if self._gpu_calls():
            self.torch.cuda.synchronize(self.device)  # the host's stream must see them
        self.current = wl
        huge = self.huge(spec)
        fp = None
        back = None
        if self.device.type == "cuda" and any(huge):
            from runner.stats import derive_seed

            key = derive_seed(self.seed, wl, what, "huge")
            fp = {"ids": [b.id for b, h in zip(ins, huge, strict=True) if h], "key": key}
            back = [b.id for b, h in zip(ins, huge, strict=True) if not h]
        reply = self.host.call([b.id for b in ins], spec.scalars, [b.id for b in outs], profile=profile,
                               back=back, fingerprint=fp)
        self._violations(wl)
        self._check_host(what, wl)
        self.timer.record_call(wl, reply)
        if not reply.ok:
            err = reply.error
            status = err.status if err.status != "unsupported_on_cpu" or self.device.type == "cpu" else \
                "runtime_error"
            self.chan.send("call_error", workload=wl, what=what, status=status, fatal=err.fatal,
                           message=err.message, limitation=err.limitation)
            if err.fatal:
                raise Stop
            return None
        copies = [buf.tensor.clone().to(self.device) for buf in outs]
        after = [buf.tensor.clone() for buf in ins]
        if fp is not None:
            self._huge_unchanged(wl, what, [o for o, h in zip(originals, huge, strict=True) if h],
                                 [t.name for t, h in zip(self.task.inputs, huge, strict=True) if h], fp["key"],
                                 reply.fingerprints)
        self._mutations(spec, wl, what, originals, after, copies, reply)
        return reply, copies

    def huge(self, spec: Any) -> tuple[bool, ...]:
        """Inputs of at least ``huge_input_bytes`` (:mod:`runner.huge_inputs`): on CUDA they are checksummed by
        the host after a call instead of copied back, and shared by every input set of a timed batch."""
        from runner.huge_inputs import HUGE_INPUT_BYTES, huge_mask

        return huge_mask(self.task, spec, int(self.cfg.get("huge_input_bytes") or HUGE_INPUT_BYTES))

    def _huge_unchanged(self, wl: str, what: str, originals: list[Any], names: list[str], key: int,
                        got: list[int] | None) -> None:
        """The host's checksums of huge inputs must equal the evaluator's of the pristine tensors."""
        from runner.huge_inputs import fingerprints

        # Checksums cover a tensor's whole storage: the host's copy holds just the tensor, so must ours.
        exact = [t if t.is_contiguous() and t.untyped_storage().nbytes() == t.numel() * t.element_size()
                 else t.contiguous().clone() for t in originals]
        want = fingerprints(exact, key).tolist()
        if got is None or len(got) != len(want):
            self._flag("protocol.malformed", f"{what}: the kernel host did not checksum the huge inputs asked", wl)
            raise Stop
        bad = [n for n, a, b in zip(names, want, got, strict=True) if a != b]
        if bad:
            self._flag("input_mutated", f"{what}: the kernel wrote to its input(s) {', '.join(bad)}", wl)
            raise Stop

    def _mutations(self, spec: Any, wl: str, what: str, originals: tuple[Any, ...], after: list[Any],
                   copies: list[Any], reply: Any) -> None:
        """Inputs must hold their pristine bytes; an input the task declares in place for an output may instead
        hold exactly that output."""
        from runner.trials import same_bits

        out_index = {t.name: i for i, t in enumerate(self.task.outputs)}
        inplace_for = {inp: out_index[out] for out, inp in self.task.inplace.items()}
        mutated = []
        huge = self.huge(spec) if self.device.type == "cuda" else (False,) * len(originals)
        for t, orig, now, h in zip(self.task.inputs, originals, after, huge, strict=True):
            if h or same_bits(now, orig.to(now.device)):
                continue
            o = inplace_for.get(t.name)
            if o is not None and o < len(reply.outputs) and reply.outputs[o].copied and \
                    same_bits(now.to(copies[o].device), copies[o]):
                continue
            mutated.append(t.name)
        if mutated:
            allowed = (f"; the task allows only {', '.join(f'{v} <- {k}' for k, v in self.task.inplace.items())} in "
                       "place") if self.task.inplace else ""
            self._flag("input_mutated", f"{what}: the kernel wrote to its input(s) {', '.join(mutated)}{allowed}",
                       wl)
            raise Stop

    def _no_subclasses(self, reply: Any, wl: str) -> None:
        """A tensor subclass, lazy or meta tensor returned as an output is an evasion, not a wrong answer."""
        odd = [o for o in reply.outputs if o.kind == "tensor" and not o.plain]
        if odd:
            self._flag("output_not_plain_tensor", f"returned {odd[0].type_name}, not a plain strided torch.Tensor "
                       "(subclasses, lazy, meta and nested tensors are rejected)", wl)
            raise Stop

    def screen(self, reply: Any) -> list[str]:
        """Why the returned objects are not exactly what the task declares (empty: they are)."""
        names = [t.name for t in self.task.outputs]
        n = len(names)
        if n == 1 and reply.returned != "tensor":
            what = {"none": "None", "tuple": f"a tuple of {len(reply.outputs)}", "list": "a list"}.get(
                reply.returned, reply.outputs[0].type_name if reply.outputs else "nothing")
            return [f"returned {what}, expected one tensor ({names[0]})"]
        if n > 1 and (reply.returned != "tuple" or len(reply.outputs) != n):
            what = {"tensor": "one tensor", "none": "None", "list": f"a list of {len(reply.outputs)}",
                    "tuple": f"a tuple of {len(reply.outputs)}"}.get(reply.returned, reply.outputs[0].type_name
                                                                     if reply.outputs else "nothing")
            return [f"returned {what}, expected the tuple ({', '.join(names)})"]
        problems = []
        from runner.inputs import dtype_name

        for t, info, dtype in zip(self.task.outputs, reply.outputs, self._declared_dtypes(), strict=True):
            if info.kind != "tensor":
                problems.append(f"{t.name}: returned {'None' if info.kind == 'none' else info.type_name}, "
                                "expected a torch.Tensor")
            elif not info.plain:
                problems.append(f"{t.name}: returned {info.type_name}, not a plain strided torch.Tensor")
            elif info.dtype != dtype_name(dtype[0]):
                problems.append(f"{t.name}: dtype {dtype[1](info.dtype)}, expected {dtype[1](dtype_name(dtype[0]))}")
            elif info.device != self.device.type:
                problems.append(f"{t.name}: on {info.device}, expected {self.device.type}")
            elif not info.copied:
                problems.append(f"{t.name}: shape {tuple(info.shape or ())}, expected {tuple(dtype[2])}")
        return problems

    def _declared_dtypes(self) -> list[tuple[Any, Any, tuple[int, ...]]]:
        from runner.compare import catalog_dtype
        from runner.inputs import dtype_from_name

        spec = self._spec

        def cat(name: str) -> str:
            try:
                return catalog_dtype(dtype_from_name(name))
            except ValueError:
                return name

        return [(spec.dtypes[t.name], cat, spec.shapes[t.name]) for t in self.task.outputs]

    # ------------------------------------------------------------------------------------------ a workload

    def _workload(self, wl: Any, spec: Any, hidden: bool, timed: bool) -> None:
        self._spec = spec
        self.current = wl.name
        # Two sets of shared buffers, used in turn: a kernel that keys anything on the address of its input (or
        # works on the previous call's input object late) meets another buffer, holding another draw, each call.
        self._io = [self.io_buffers(spec) for _ in range(2)]
        self._turn = 0
        try:
            passed = self._correctness(wl, spec, hidden)
            if passed and not hidden:
                if self.timer.enabled and timed:
                    self.timer.time_submission(wl, spec)
                else:
                    self._rotation(wl, spec)
            if passed:
                self.timer.send_profile(wl)
        finally:
            bufs = [b for ins, outs in self._io for b in (*ins, *outs)]
            if not self.host.dead:  # the host's maps (and, on the GPU, the memory) go with the workload
                from runner.host_client import HostFailure

                try:
                    self.host.release([b.id for b in bufs])
                except HostFailure:
                    pass  # the failure is the host's; what it reported has been handled where it happened
            for b in bufs:
                b.close()

    def next_io(self) -> tuple[list[Any], list[Any]]:
        """The input and output buffers of the next call (the two sets in turn)."""
        pair = self._io[self._turn % 2]
        self._turn += 1
        return pair

    def _make(self, spec: Any, *parts: Any, dist: str) -> tuple[Any, ...]:
        from runner.inputs import make_inputs
        from runner.stats import derive_seed

        return make_inputs(self.ref, spec, seed=derive_seed(self.seed, spec.workload.name, *parts),
                           device=self.device, dist=dist)

    def _correctness(self, wl: Any, spec: Any, hidden: bool) -> bool:
        from runner.trials import perturb_

        n = max(int(self.cfg.get("trials", 3)), len(self.dists))
        if hidden:
            n = min(n, int(self.cfg.get("hidden_trials", 2)))
        all_ok = True
        originals: tuple[Any, ...] = ()
        for i in range(n):
            dist = self.dists[i % len(self.dists)]
            try:
                originals = self._make(spec, i, dist=dist)
            except Exception as exc:  # noqa: BLE001 - the task's input maker failed on this shape
                if hidden:
                    self.chan.send("workload_skipped", workload=wl.name, reason=f"{type(exc).__name__}: {exc}"[:500])
                    return False
                self._task_fault(f"tasks/{self.task.id}/reference.py: make_inputs failed on workload "
                                 f"{wl.name!r}: {type(exc).__name__}: {exc}")
                raise Stop from None
            ok = self._trial(spec, wl.name, i, dist, originals, profile=hidden or self.timer.profile_now())
            if ok is None:
                return False
            all_ok &= ok
        if all_ok and not hidden:
            gen = self.torch.Generator(device=self.device)
            from runner.stats import derive_seed

            gen.manual_seed(derive_seed(self.seed, wl.name, "repeat"))
            fresh = tuple(t.clone() for t in originals)
            perturb_(fresh, gen)
            ok = self._trial(spec, wl.name, n, "repeat", fresh, profile=self.timer.profile_now(), same_buffers=True)
            all_ok &= bool(ok)
        return all_ok

    def _trial(self, spec: Any, wl: str, index: int, dist: str, originals: tuple[Any, ...], *, profile: bool,
               same_buffers: bool = False) -> bool | None:
        """One checked call on a fresh draw; ``same_buffers``: on the buffers of the call before (the repeat
        trial: the same addresses, a few values changed)."""
        from runner.checks import judge
        from runner.trials import output_tuple, poison

        if same_buffers:
            self._turn -= 1
        ins, outs = self.next_io()
        got = self.checked_call(spec, wl, f"trial {index} ({dist})", originals, ins, outs, profile=profile)
        if got is None:
            return None
        reply, copies = got
        self._no_subclasses(reply, wl)
        problems = self.screen(reply)
        if problems:
            res = [{"name": "(outputs)", "ok": False, "reason": "; ".join(problems)}]
        else:
            expected = self.ref.reference(*originals, **spec.scalars)
            res = [m.to_dict() for m in judge(self.task, spec, self.ref, tuple(copies), expected, originals,
                                              self.device)]
            for t in output_tuple(expected):
                poison(t)
        for c in copies:
            poison(c)
        ok = all(r["ok"] for r in res)
        self.chan.send("trial", workload=wl, index=index, dist=dist, ok=ok, outputs=res)
        return ok

    def _rotation(self, wl: Any, spec: Any) -> None:
        """Untimed runs (CPU, or timing off): a secret number of calls on the same buffers, each on a fresh draw,
        each output copied out and compared before the next set is written."""
        from runner.checks import judge
        from runner.trials import output_tuple, poison

        reps = rotation_calls(self.rng, *(self.cfg.get("rotation_range") or CPU_ROTATION_RANGE))
        problems: list[str] = []
        for r in range(reps):
            dist = self.dists[r % len(self.dists)]
            originals = self._make(spec, "rotation", r, dist=dist)
            ins, outs = self.next_io()
            got = self.checked_call(spec, wl.name, f"rotated call {r}", originals, ins, outs,
                                    profile=self.timer.profile_now())
            if got is None:
                return
            reply, copies = got
            self._no_subclasses(reply, wl.name)
            bad = self.screen(reply)
            if not bad:
                expected = self.ref.reference(*originals, **spec.scalars)
                bad = [f"{m.name}: {m.reason}" for m in judge(self.task, spec, self.ref, tuple(copies), expected,
                                                            originals, self.device) if not m.ok]
                for t in output_tuple(expected):
                    poison(t)
            if bad:
                problems.append(f"call {r} ({dist}): {bad[0]}")
        self.chan.send("rotation", workload=wl.name, calls=reps, problems=problems[:5], n_problems=len(problems))


def rotation_calls(rng: random.Random, lo: int, hi: int, more: float = CPU_ROTATION_MORE) -> int:
    """How many rotated calls a workload gets: ``lo``, then one more with probability ``more`` each, up to ``hi``."""
    n = int(lo)
    while n < int(hi) and rng.random() < more:
        n += 1
    return n


def _environment(device: Any) -> dict[str, Any]:
    import platform

    import torch

    env: dict[str, Any] = {"device": device.type, "torch": torch.__version__, "python": platform.python_version(),
                           "cuda": torch.version.cuda, "interpreter": device.type == "cpu"}
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
    return env


def evaluator_main(cfg: dict[str, Any], chan: ChannelWriter, host: HostClient) -> None:
    """Run one evaluation (the job leader's evaluator child); under ``cProfile`` when the caller asked for a
    profile (``cfg["profile_dir"]``, benchmarks only)."""
    out = cfg.get("profile_dir")
    if not out:
        Evaluator(cfg, chan, host).run()
        return
    import cProfile

    prof = cProfile.Profile()
    try:
        prof.runcall(Evaluator(cfg, chan, host).run)
    finally:
        task = str(cfg.get("task", {}).get("id", "task"))
        prof.dump_stats(os.path.join(out, f"evaluator-{task}-{os.getpid()}.pstats"))


__all__ = ["Evaluator", "evaluator_main", "Stop"]
