"""An in-process evaluator for the ablation of the team's own references: the ``Evaluate`` of
:mod:`d2kgrade.ablate.driver`, without the sandbox.

The sandboxed evaluator pays a process start, a kernel host, fresh float64 references and a calibration for every
evaluation: 1000 of them for the 26 references' ablation (5 rounds), 1.5-4 hours on the H200 (docs/ablation.md).
The references and their codemod variants are code the team wrote and the transforms made, not submissions, so
``benchmarks/ablate_references.py --in-process`` runs them here instead:

* correctness: one checked call per input distribution (at least two) on every chosen workload and, with
  ``hidden``, one on the hidden workload the evaluator would draw from the same seed, judged by
  :func:`runner.checks.judge` (the task's tolerances and ``check``); a timed evaluation (an ablation round, after
  the variant passed that check) checks one call per workload, on the inputs it times. Inputs and reference
  outputs are made once per task and kept for every variant (the same seed gives the same draws);
* timing: :func:`runner.timing.timed_reps`, the evaluator's batch (warm-up, an L2 flush and a host pad before every
  call, CUDA events around the call alone), on inputs copied into fresh buffers before each call, for about
  ``target_s`` of calls per workload; each kernel module is loaded once, so its Triton kernels compile and autotune
  once and every later round times the same binaries;
* on the CPU (``TRITON_INTERPRET=1``), the kernel host's interpreter patches (:func:`runner.interp_compat.install`:
  bf16 arithmetic, autotune, libdevice) and its verdict on a known interpreter limitation (``unsupported_on_cpu``).

Never give it a file the team did not write: nothing here is contained.
"""

from __future__ import annotations

import hashlib
import platform
import random
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from d2kgrade.records import Environment, EvalResult, OutputError, Timing, WorkloadResult
from d2kgrade.schema import Task
from runner import hidden as hidden_mod
from runner.checks import judge
from runner.direct import load_reference
from runner.evaluate import gpu_info, load_task, resolve_device, resolve_workloads
from runner.inputs import WorkloadSpec, distributions, make_inputs
from runner.loading import load_module
from runner.stats import derive_seed, summarize
from runner.timing import Rotation, choose_reps, flush_buffer, pad_for, timed_reps
from runner.trials import output_tuple

SANDBOX = "none: in-process, trusted references and their ablated variants only (benchmarks/inprocess_eval.py)"
MIN_TRIALS = 2
"""Correctness calls per catalog workload (more when the task has more input distributions)."""
DRAW_SHARE = 0.3
"""The kept draws (inputs and float64-checked reference outputs) may hold this share of the GPU's memory; past it
the oldest are dropped and made again when needed (round 16: paged_attention_decode's 17 GB KV pools, two
distributions on three workloads and the hidden one, ran the H200 out of memory when all were kept)."""


class InProcessEvaluator:
    """``evaluate(task_id, path, *, device, workloads, seed, timeout_s, hidden, timing) -> EvalResult`` in this
    process (module docstring). ``timeout_s`` is not enforced: a reference that hangs hangs the run."""

    def __init__(self, suite_root: Path, *, target_s: float = 0.05, min_reps: int = 10, max_reps: int = 200,
                 warmup_ms: float = 25.0) -> None:
        self.root = Path(suite_root)
        self.target_s, self.min_reps, self.max_reps, self.warmup_ms = target_s, min_reps, max_reps, warmup_ms
        self._task: tuple[str, Task, ModuleType] | None = None
        self._modules: dict[str, ModuleType] = {}
        self._draws: dict[tuple[str, int, int], tuple[tuple[Any, ...], Any]] = {}
        self._draw_bytes: dict[tuple[str, int, int], int] = {}
        self.draw_budget: int | None = None
        """Bytes the kept draws may hold (None: :data:`DRAW_SHARE` of the GPU's memory; unbounded on the CPU)."""
        self.draws_made = 0
        self._flush: torch.Tensor | None = None

    # ------------------------------------------------------------------ state kept across calls of one task

    def _load_task(self, task_id: str) -> tuple[Task, ModuleType]:
        if self._task is None or self._task[0] != task_id:
            self._modules.clear()
            self._draws.clear()
            self._draw_bytes.clear()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            self._task = (task_id, load_task(self.root, task_id), load_reference(self.root / "tasks" / task_id))
        return self._task[1], self._task[2]

    def _module(self, path: Path, dev: str) -> ModuleType:
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        if sha not in self._modules:
            if dev == "cpu":
                from runner import interp_compat

                interp_compat.install(str(path.resolve()))
            self._modules[sha] = load_module(path, prefix="d2k_ablate_" + sha[:12])
        return self._modules[sha]

    def _draw(self, ref: ModuleType, spec: WorkloadSpec, seed: int, i: int, device: str
              ) -> tuple[tuple[Any, ...], Any]:
        key = (spec.workload.name + repr(sorted(spec.workload.params.items())) + spec.workload.dtype, seed, i)
        if key in self._draws:
            self._draws[key] = self._draws.pop(key)  # most recently used last
            return self._draws[key]
        budget = self.draw_budget
        if budget is None and device == "cuda":
            budget = int(DRAW_SHARE * torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
        if budget is not None:
            # Make room before making the draw: its size is not known yet, so keep at most budget minus the largest
            # draw kept so far (draws of one task are of similar sizes).
            while self._draws and sum(self._draw_bytes.values()) + max(self._draw_bytes.values()) > budget:
                oldest = next(iter(self._draws))
                del self._draws[oldest], self._draw_bytes[oldest]
            if device == "cuda":
                torch.cuda.empty_cache()
        dists = distributions(ref)
        inputs = make_inputs(ref, spec, seed=derive_seed(seed, spec.workload.name, i), device=device,
                             dist=dists[i % len(dists)])
        self._draws[key] = (inputs, ref.reference(*inputs, **spec.scalars))
        self._draw_bytes[key] = _nbytes(self._draws[key])
        self.draws_made += 1
        return self._draws[key]

    # ------------------------------------------------------------------ one evaluation

    def __call__(self, task_id: str, path: Path, *, device: str | None, workloads: str | list[str],
                 seed: int | None, timeout_s: float | None = None, hidden: bool = True,
                 timing: bool = False) -> EvalResult:
        t0 = time.monotonic()
        dev, _index = resolve_device(device)
        task, ref = self._load_task(task_id)
        seed = 0 if seed is None else seed
        env = _environment(dev)
        result = EvalResult(task=task_id, submission=str(path), status="passed", correct=True, environment=env)
        try:
            mod = self._module(Path(path), dev)
            kernel = mod.kernel
        except Exception as exc:  # noqa: BLE001 - a variant that does not import is a compile error
            return _done(result, t0, "compile_error", f"{type(exc).__name__}: {exc}")
        chosen = [(w, False) for w in resolve_workloads(task, workloads, dev)]
        if hidden:
            wl = hidden_mod.draw(task, random.Random(derive_seed(seed, "hidden")), dev)
            if wl is not None:
                chosen.append((wl, True))
        for wl, is_hidden in chosen:
            spec = WorkloadSpec.resolve(task, wl)
            w = WorkloadResult(name="hidden" if is_hidden else wl.name, status="passed", params=dict(wl.params),
                               hidden=is_hidden)
            result.workloads.append(w)
            t1 = time.monotonic()
            try:
                self._check(task, ref, spec, kernel, seed, dev, w, trials=1 if is_hidden or timing else None)
                if w.status == "passed" and timing and dev == "cuda" and not is_hidden:
                    w.time = self.time(kernel, self._draw(ref, spec, seed, 0, dev)[0], spec)
            except Exception as exc:  # noqa: BLE001 - the variant raised: a wrong kernel, reported as such
                w.status = "unsupported_on_cpu" if dev == "cpu" and _limitation(exc) else "runtime_error"
                w.message = f"{type(exc).__name__}: {exc}"[:2000]
                result.log += traceback.format_exc(limit=4)[-2000:]
                if dev == "cuda":
                    torch.cuda.synchronize()  # a CUDA fault raises here too: the process cannot go on
            w.wall_s = round(time.monotonic() - t1, 3)
        bad = [w for w in result.workloads if w.status != "passed"]
        if bad:
            status = next((s for s in ("runtime_error", "incorrect", "unsupported_on_cpu")
                           if any(w.status == s for w in bad)))
            return _done(result, t0, status, f"{len(bad)} workload(s) failed: " + ", ".join(w.name for w in bad))
        return _done(result, t0, "passed", "")

    def _check(self, task: Task, ref: ModuleType, spec: WorkloadSpec, kernel: Any, seed: int, dev: str,
               w: WorkloadResult, *, trials: int | None) -> None:
        """``trials`` calls, or one per input distribution (at least :data:`MIN_TRIALS`)."""
        for i in range(trials or max(MIN_TRIALS, len(distributions(ref)))):
            inputs, expected = self._draw(ref, spec, seed, i, dev)
            got = output_tuple(kernel(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs],
                                      **spec.scalars))
            mismatches = judge(task, spec, ref, got, expected, inputs, torch.device(dev))
            w.trials += 1
            w.errors = [OutputError(**{k: v for k, v in m.to_dict().items() if k in OutputError.model_fields})
                        for m in mismatches]
            bad = [m for m in mismatches if not m.ok]
            if bad:
                w.status = "incorrect"
                w.message = f"trial {i}: {bad[0].name}: {bad[0].reason}"[:2000]
                return

    def time(self, kernel: Any, inputs: tuple[Any, ...], spec: WorkloadSpec) -> Timing:
        """The kernel's median over about ``target_s`` of calls on ``inputs`` (on the CPU with the host clock:
        only the tests time there)."""
        dev = next(t.device for t in inputs if isinstance(t, torch.Tensor))
        if self._flush is None or self._flush.device != dev:
            self._flush = flush_buffer(dev)
        tensors = tuple(t for t in inputs if isinstance(t, torch.Tensor))
        if len(tensors) != len(inputs):
            raise TypeError("in-process timing needs tensor inputs only")
        rotation = Rotation.make([tensors])
        scalars = spec.scalars

        def call(args: tuple[torch.Tensor, ...]) -> Any:
            return kernel(*args, **scalars)

        stats: dict[str, float] = {}
        probe = timed_reps(call, rotation, 3, self._flush, warmup_ms=self.warmup_ms, stats=stats)
        per_rep_s = max(min(probe), 1e-3) / 1e3
        reps = choose_reps(per_rep_s, self.target_s, self.min_reps, self.max_reps)
        samples = timed_reps(call, rotation, reps, self._flush, warmup_ms=self.warmup_ms,
                             pad_ms=pad_for(stats.get("host_ms_per_rep", 0.0)))
        return Timing(**summarize(samples))


def _nbytes(obj: Any) -> int:
    """Bytes of the tensors in ``obj`` (nested tuples and lists)."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (tuple, list)):
        return sum(_nbytes(o) for o in obj)
    return 0


def _limitation(exc: BaseException) -> str | None:
    from runner import interp_compat

    return interp_compat.limitation(exc)


def _environment(dev: str) -> Environment:
    info = gpu_info(0) if dev == "cuda" else None
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return Environment(device=dev, gpu=info["name"] if info else None, driver=info["driver"] if info else None,
                       cuda=torch.version.cuda, torch=torch.__version__, triton=triton_version,
                       python=platform.python_version(), interpreter=dev == "cpu", sandbox=SANDBOX)


def _done(result: EvalResult, t0: float, status: str, message: str) -> EvalResult:
    result.status = status  # type: ignore[assignment]
    result.correct = status == "passed"
    result.message = message
    result.wall_s = round(time.monotonic() - t0, 3)
    return result


__all__ = ["InProcessEvaluator", "SANDBOX"]
