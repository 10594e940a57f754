"""``evaluate()``: one submission on one task, in the sandbox, as an :class:`~d2kgrade.records.EvalResult`.

The caller's process never imports torch or the submission. It reads the source, runs the static tripwires
(:mod:`runner.tripwires`), draws the secret seed and the hidden workload, starts the worker
(:mod:`runner.sandbox`, :mod:`runner.worker`) and turns the worker's authenticated messages into statuses:
pass/fail, statistics, the roofline check, the wall-clock cross-check and the profiler proof are all decided
here, where the submission cannot reach. A bad submission never raises: it gets a status. Unknown tasks and
missing files raise :class:`~d2kgrade.errors.UserError`.

Statuses: ``passed``; ``incorrect`` (an output out of tolerance, NaN/Inf, wrong dtype/shape/count, or right only
on some calls); ``rejected`` (a ``reject`` flag: a tripwire, mutated inputs, a patched harness, a non-tensor
output, a forged message, a time under the roofline floor, hidden work, the profile showing PyTorch or a library
did the work); ``compile_error``; ``runtime_error``; ``timeout`` (the whole run, or no progress for 120 s on cpu /
300 s on cuda once the submission is loaded); ``crashed`` (a signal, an exit before the end, a dead CUDA
context, the memory limit).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from d2kgrade.errors import UserError
from d2kgrade.io import load_model
from d2kgrade.records import BaselineTiming, EvalResult, Environment, Flag, OutputError, Timing, WorkloadResult
from d2kgrade.schema import TASK_ID_RE, Task, Workload
from runner import cuda_cache, hidden as hidden_mod, profile_proof, roofline, stats, tripwires
from runner.sandbox import JobOutcome, JobSpec, run_job

log = logging.getLogger(__name__)

MAX_SOURCE_BYTES = 1 << 20
STATUS_ORDER = ("crashed", "timeout", "compile_error", "runtime_error", "incorrect")


@dataclass(frozen=True)
class EvalOptions:
    """Knobs beyond the public signature (the benchmark script and the tests set them)."""

    trials: int = 3
    """Correctness trials per workload (at least one per input distribution), plus one repeat trial."""
    hidden_trials: int = 2
    """Trials on the hidden workload."""
    target_s: float = 0.4
    """Timed wall time to aim for per timed function and workload."""
    min_reps: int = 20
    max_reps: int = 500
    compile_baseline: bool = True
    """Time the torch.compile candidates too (off: only the eager and peer candidates)."""
    baselines: bool = True
    """Check and time the task's baseline candidates at all (ablation rounds and tests turn them off)."""
    live_baselines: bool = False
    """Measure every baseline again instead of taking cached figures (``--live-baselines``)."""
    rotation_range: tuple[int, int] | None = None
    """Rotated calls on CPU, drawn per workload from the secret seed (default
    :data:`runner.evaluator.CPU_ROTATION_RANGE`)."""
    warmup_ms: float = 25.0  # runner.timing.WARMUP_MS (not imported here: it imports torch)
    """GPU work (L2 flushes) queued before each timed batch, so the SM clock has left idle (see runner.timing)."""
    tripwires: bool = True
    """Static tripwires. Off only in tests that exercise the runtime defences behind them."""
    stall_s: float | None = None
    """Seconds without a message from the worker, once the submission is loaded, that count as a hang (default
    120 s on cpu; 300 s on cuda, where a first call may compile and autotune for minutes)."""
    mem_limit_bytes: int | None = None
    """Host memory limit of the worker (default: 16 GiB on CPU, half the RAM on CUDA)."""
    mode: str | None = None
    """``zygote`` or ``spawn`` (default: ``D2KGRADE_EVAL_MODE`` or zygote)."""
    keep_triton_cache: bool | None = None
    """Keep the kernel host's Triton cache per source across evaluations (:func:`runner.cuda_cache.triton_dir`:
    an unchanged submission's kernels are not compiled again, and ``@triton.autotune`` keeps the configuration its
    first evaluation chose, so that repeated evaluations time the same kernel); None: on CUDA, where kernels
    compile. False: a fresh cache per evaluation, compiled and autotuned afresh every time."""
    ceilings: dict[str, Any] | None = None
    """Roofline ceilings to use instead of the cached or measured ones."""
    huge_input_bytes: int = 1 << 30
    """Inputs of at least this many bytes are passed as they are and fingerprinted after each call instead of
    cloned and rotated (:mod:`runner.huge_inputs`; a 17 GB page pool cannot be cloned per call)."""
    candidates: tuple[str, ...] | None = None
    """Only these baseline candidates (by name); None: all of the task's."""
    forge_events: float | None = None
    """Tests only: the kernel host scales the event times it reports by this factor, as a compromised host
    would; the evaluator's clock must flag it (``timing.untrusted``)."""
    launcher: tuple[str, ...] = ()
    """A command the evaluation runs under (spawn mode): :func:`runner.sanitize.sanitize` passes
    ``compute-sanitizer``."""
    env: tuple[tuple[str, str], ...] = ()
    """Environment variables of the evaluator and the kernel host beyond the sandbox's own (the sanitizer's
    ``PYTORCH_NO_CUDA_MEMORY_CACHING=1``)."""
    budget_bytes: int | None = None
    """Tests only: the bytes of outputs one timed batch may stage and one verify step may fetch, instead of 30% of
    the GPU's free memory (at most 32 GB), so that chunked batches and verify steps run on a CPU."""
    host_timing: bool = False
    """Tests only: run the timing path on a CPU with the host clock, so its plumbing is exercised without a GPU.
    The figures mean nothing and are never published."""
    gpu_call_buffers: bool = False
    """The correctness calls' inputs and outputs in shared GPU buffers too, as the timed batches' are once the
    host maps them (:mod:`runner.cuda_share`; the correctness phase took 12-51 s of each evaluation in round 12's
    full run, on shared host memory). Off by default until the GPU tests have run with it on: the benchmark rounds
    use it (rounds 13 and 14: every task passed once spmv_csr's reference was fixed; its scaled_rows failures were
    the kernel's fp32 window scan, not these buffers)."""
    profile_dir: str | None = None
    """Benchmarks only: the evaluator (trusted; never the kernel host) runs under ``cProfile`` and writes its
    statistics to ``<profile_dir>/evaluator-<task>-<pid>.pstats`` (where its own seconds go, beside
    :attr:`EvalResult.phase_detail`)."""


def evaluate(task_id: str, submission: Path, *, suite_root: Path | None = None, device: str | None = None,
             workloads: str | list[str] = "all", seed: int | None = None, timeout_s: float | None = None,
             hidden: bool = True, timing: bool = True) -> EvalResult:
    """Evaluate ``submission`` on ``task_id``.

    Args:
        task_id: A task of the suite.
        submission: The Python file defining ``kernel(...)``.
        suite_root: Suite folder (default: ``D2KGRADE_SUITE``, else the shipped suite).
        device: ``cuda`` (or ``cuda:N``) or ``cpu``; default cuda when a GPU is present. On cpu only the smoke
            workload runs, under the Triton interpreter, and timing is unavailable.
        workloads: ``"all"``, ``"smoke"`` or a list of workload names.
        seed: Fixes the per-run seed (default: a fresh secret one; only its hash is recorded).
        timeout_s: Wall limit of the evaluation (default 300 s on cpu, 1200 s on cuda).
        hidden: Add the per-run hidden workload (correctness only).
        timing: Time the submission and the baselines (cuda only).

    Raises:
        UserError: unknown task, missing submission file, a workload name the task lacks, no GPU for cuda.
    """
    return run_evaluation(task_id, submission, suite_root=suite_root, device=device, workloads=workloads,
                          seed=seed, timeout_s=timeout_s, hidden=hidden, timing=timing, options=EvalOptions())


# --------------------------------------------------------------------------------------------- resolution


def default_suite_root() -> Path:
    """``D2KGRADE_SUITE``, else the checkout this package sits in, else the suite inside the wheel."""
    if os.environ.get("D2KGRADE_SUITE"):
        return Path(os.environ["D2KGRADE_SUITE"]).expanduser()
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "tasks").is_dir():
        return checkout
    import d2kgrade

    return Path(d2kgrade.__file__).resolve().parent / "_suite"


def load_task(root: Path, task_id: str) -> Task:
    """Load a task of the suite at ``root``; UserError for an unknown id."""
    tasks = root / "tasks"
    if not tasks.is_dir():
        raise UserError(f"{root}: not a suite (no tasks/ folder); pass --suite DIR or set D2KGRADE_SUITE")
    if not TASK_ID_RE.match(task_id) or not (tasks / task_id / "task.yaml").is_file():
        known = sorted(p.name for p in tasks.iterdir() if (p / "task.yaml").is_file())
        raise UserError(f"unknown task {task_id!r}; known tasks: {', '.join(known) or '(none)'}")
    task = load_model(Task, tasks / task_id / "task.yaml")
    if not (tasks / task_id / "reference.py").is_file():
        raise UserError(f"task {task_id!r} has no reference.py yet, so nothing can be checked against it")
    return task


@lru_cache(maxsize=8)
def gpu_info(index: int = 0) -> dict[str, str] | None:
    """Name, driver and compute capability of a visible GPU from nvidia-smi, or None (no torch, no CUDA init)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return None
    if shutil.which("nvidia-smi") is None:
        return None
    physical = str(index)
    if visible:
        ids = [v.strip() for v in visible.split(",") if v.strip()]
        if index >= len(ids):
            return None
        physical = ids[index]
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader",
                              "-i", physical], capture_output=True, text=True, timeout=30, check=True).stdout
        name, driver, cap = (x.strip() for x in out.strip().splitlines()[0].split(","))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    return {"name": name, "driver": driver, "compute_cap": cap, "physical": physical}


def resolve_device(device: str | None) -> tuple[str, int]:
    """(``cuda`` | ``cpu``, GPU index) from the argument; UserError for an unusable choice."""
    if device is None:
        return ("cuda", 0) if gpu_info(0) else ("cpu", 0)
    dev = device.strip().lower()
    if dev == "cpu":
        return "cpu", 0
    if dev == "cuda" or dev.startswith("cuda:"):
        index = int(dev.split(":", 1)[1]) if ":" in dev and dev.split(":", 1)[1].isdigit() else 0
        if gpu_info(index) is None:
            raise UserError(f"--device {device}: no such CUDA GPU here; use --device cpu")
        return "cuda", index
    raise UserError(f"--device must be cuda, cuda:N or cpu, got {device!r}")


def resolve_workloads(task: Task, workloads: str | list[str], device: str) -> list[Workload]:
    """The named workloads (``all`` on cpu is the smoke workload only)."""
    names = [workloads] if isinstance(workloads, str) else list(workloads)
    names = [n.strip() for item in names for n in str(item).split(",") if n.strip()] or ["all"]
    if names == ["all"]:
        return [task.smoke] if device == "cpu" else list(task.workloads)
    if names == ["smoke"]:
        return [task.smoke]
    known = {w.name: w for w in [*task.workloads, task.smoke]}
    out = []
    for n in names:
        if n not in known:
            raise UserError(f"task {task.id!r} has no workload {n!r}; workloads: {', '.join(known)}")
        if device == "cpu" and n != "smoke":
            raise UserError(f"workload {n!r} is too large for the CPU interpreter; on cpu only 'smoke' runs")
        out.append(known[n])
    return out


def read_submission(path: Path) -> str | None:
    """The source text, or None when the file is not text (a compile error, not a user error)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    data = path.read_bytes()
    if len(data) > MAX_SOURCE_BYTES or b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# --------------------------------------------------------------------------------------------- the run


def run_evaluation(task_id: str, submission: Path, *, suite_root: Path | None = None, device: str | None = None,
                   workloads: str | list[str] = "all", seed: int | None = None, timeout_s: float | None = None,
                   hidden: bool = True, timing: bool = True, options: EvalOptions | None = None) -> EvalResult:
    """:func:`evaluate` with :class:`EvalOptions`."""
    opts = options or EvalOptions()
    t0 = time.monotonic()
    root = Path(suite_root) if suite_root is not None else default_suite_root()
    task = load_task(root, task_id)
    dev, index = resolve_device(device)
    chosen = resolve_workloads(task, workloads, dev)
    source = read_submission(Path(submission))
    run_seed = seed if seed is not None else secrets.randbits(62)
    gpu = gpu_info(index) if dev == "cuda" else None
    env = Environment(device=dev, gpu=gpu["name"] if gpu else None, driver=gpu["driver"] if gpu else None,
                      interpreter=dev == "cpu")
    result = EvalResult(task=task.id, submission=str(submission), status="passed", correct=False,
                        environment=env, seed_hash=stats.seed_hash(run_seed))
    if source is None:
        return _finish(result, t0, status="compile_error", message="the submission is not a UTF-8 text file of at "
                       f"most {MAX_SOURCE_BYTES} bytes")
    result.submission_sha256 = hashlib.sha256(source.encode()).hexdigest()
    err = tripwires.syntax_error(source)
    if err:
        return _finish(result, t0, status="compile_error", message=f"syntax error: {err}")
    if opts.tripwires:
        result.flags = tripwires.scan(source, task.forbidden_ops)
        rejects = [f for f in result.flags if f.severity == "reject"]
        if rejects:
            return _finish(result, t0, status="rejected", message=f"{len(rejects)} static tripwire(s): "
                           + "; ".join(f.message for f in rejects[:3]))

    rng = random.Random(stats.derive_seed(run_seed, "hidden"))
    hidden_wl = hidden_mod.draw(task, rng, dev) if hidden else None
    do_timing = timing and (dev == "cuda" or opts.host_timing)
    entries = [{"name": w.name, "params": dict(w.params), "dtype": w.dtype, "hidden": False, "timed": do_timing}
               for w in chosen]
    if hidden_wl is not None:
        entries.append({"name": "hidden", "params": dict(hidden_wl.params), "dtype": hidden_wl.dtype,
                        "hidden": True, "timed": False})
    ceilings = opts.ceilings or (roofline.load_ceilings(gpu["name"]) if (gpu and do_timing) else None)
    job_env: dict[str, str] = dict(opts.env)
    host_env: dict[str, str] = {}
    host_write: list[str] = []
    if dev == "cuda":
        job_env["CUDA_VISIBLE_DEVICES"] = gpu["physical"] if gpu else str(index)
    if tripwires.uses_load_inline(source):
        sha = cuda_cache.source_hash(source)
        host_env.update(cuda_cache.build_env(sha))
        host_write.append(str(cuda_cache.extensions_dir(sha)))
        result.prebuild_s = 0.0
        if dev == "cuda" and not cuda_cache.is_built(sha):
            built = cuda_cache.prebuild(source)
            result.prebuild_s = built["seconds"]
            log.info("prebuild of %s: %s in %.1f s", task.id, "built" if built["built"] else "no top-level build",
                     built["seconds"])
    keep = opts.keep_triton_cache if opts.keep_triton_cache is not None else dev == "cuda"
    host_triton = str(cuda_cache.triton_dir(result.submission_sha256)) if keep else None
    limit = timeout_s if timeout_s is not None else (300.0 if dev == "cpu" else 1200.0)
    stall = opts.stall_s if opts.stall_s is not None else (120.0 if dev == "cpu" else 300.0)
    config = {
        "task": task.model_dump(mode="json"),
        "reference_py": str((root / "tasks" / task.id / "reference.py").resolve()),
        "source": source, "source_sha": result.submission_sha256, "seed": run_seed, "device": dev,
        "workloads": entries, "trials": opts.trials, "hidden_trials": opts.hidden_trials,
        "rotation_range": list(opts.rotation_range) if opts.rotation_range else None, "ceilings": ceilings,
        "huge_input_bytes": opts.huge_input_bytes, "stall_s": stall, "driver": gpu["driver"] if gpu else None,
        "profile_dir": opts.profile_dir, "gpu_call_buffers": opts.gpu_call_buffers,
        "trusted_cache_dir": str(roofline.cache_dir() / "trusted"),
        "timing": {"enabled": do_timing, "target_s": opts.target_s, "min_reps": opts.min_reps,
                   "max_reps": opts.max_reps, "compile": opts.compile_baseline, "host_backend": opts.host_timing,
                   "warmup_ms": opts.warmup_ms, "baselines": opts.baselines, "budget_bytes": opts.budget_bytes,
                   "live_baselines": opts.live_baselines,
                   "candidates": list(opts.candidates) if opts.candidates is not None else None},
    }
    mem = opts.mem_limit_bytes or (16 << 30 if dev == "cpu" else max(8 << 30, _ram_bytes() // 2))
    deny = sorted({str(root.resolve()), str(Path(__file__).resolve().parent.parent), str(roofline.cache_dir()),
                   os.getcwd(), str(Path.home())} - {"/"})
    outcome = run_job(JobSpec(config=config, device=dev, env=job_env, host_env=host_env, host_write=host_write,
                              deny=deny, timeout_s=limit, stall_s=stall + 60.0, mem_limit_bytes=mem,
                              launcher=list(opts.launcher), host_extra={"forge_events": opts.forge_events},
                              triton_cache=str(roofline.cache_dir() / "trusted" / "triton"),
                              host_triton_cache=host_triton),
                      mode=opts.mode)
    return _aggregate(result, task, outcome, chosen, hidden_wl, ceilings, gpu, dev, source, t0)


PHASE_OF = {"ready": "start", "sandbox": "host_start", "ceilings": "ceilings", "baseline": "baselines",
            "calibration": "calibration", "imported": "import", "import_error": "import", "trial": "correctness",
            "rotation": "rotation", "timing": "timing", "profile": "profile", "sharing": "setup",
            "import_start": "setup", "workload_end": "release"}
"""The phase a worker message closes: the time since the message before it is spent on that phase."""


def phase_split(messages: list[tuple[float, dict[str, Any]]], t0: float, end: float) -> dict[str, float]:
    """Seconds per phase of one evaluation, from the arrival times of the worker's messages (the evaluator sends
    them in order: ready, sandbox, ceilings, per workload baseline and calibration, import, then per workload
    trials, rotation or timing, profile): each gap goes to the phase of the message that ends it (the sharing
    probe and the calibration's end to ``setup``, a workload's buffer release to ``release``), the rest to
    ``other``, and the time after the last message to ``teardown``. Measured in this process, on its clock."""
    split: dict[str, float] = {}
    last = t0
    for arrived, msg in messages:
        phase = PHASE_OF.get(str(msg.get("kind")), "other")
        split[phase] = split.get(phase, 0.0) + max(0.0, arrived - last)
        last = max(last, arrived)
    split["teardown"] = max(0.0, end - last)
    return {k: round(v, 4) for k, v in split.items()}


def phase_detail(messages: list[tuple[float, dict[str, Any]]]) -> dict[str, float]:
    """The evaluator's own breakdown of its baselines, calibration and timing (:attr:`runner.eval_timing.Timer.cost`,
    cumulative: the last calibration or timing message carries the total)."""
    cost = next((m["cost"] for _, m in reversed(messages) if isinstance(m.get("cost"), dict)), {})
    return {str(k): round(float(v), 4) for k, v in cost.items() if isinstance(v, int | float)}


def _ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 64 << 30


def _finish(result: EvalResult, t0: float, *, status: str, message: str) -> EvalResult:
    result.status = status  # type: ignore[assignment]
    result.correct = status == "passed"
    result.message = message
    result.wall_s = time.monotonic() - t0
    return result


# --------------------------------------------------------------------------------------------- aggregation


@dataclass
class _WL:
    result: WorkloadResult
    worst: float = -1.0
    failed: bool = False
    started: float | None = None
    samples: list[float] | None = None
    dists: list[str] | None = None
    eager: list[float] | None = None
    compiled: list[float] | None = None
    batch_event_ms: float | None = None
    candidates: list[dict[str, Any]] | None = None
    clock: dict[str, Any] | None = None


def _timing(samples: list[float] | None) -> Timing | None:
    if not samples:
        return None
    return Timing(**stats.summarize(samples))


def _timing_by_dist(samples: list[float] | None, dists: list[str] | None) -> dict[str, Timing]:
    """The samples grouped by the input distribution of their set, where the sets drew more than one (a kernel
    whose time depends on its inputs makes the pooled median flip between the groups: round 17's histogram
    vocab_bins, 0.79 ms in round 14 and 6.82 ms in round 17, with an IQR of 12 ms both times)."""
    if not samples or not dists or len(dists) != len(samples) or len(set(dists)) < 2:
        return {}
    groups: dict[str, list[float]] = {}
    for x, d in zip(samples, dists, strict=True):
        groups.setdefault(str(d), []).append(x)
    return {d: Timing(**stats.summarize(xs)) for d, xs in groups.items()}


def _aggregate(result: EvalResult, task: Task, out: JobOutcome, chosen: list[Workload], hidden_wl: Workload | None,
               ceilings: dict[str, Any] | None, gpu: dict[str, str] | None, dev: str, source: str,
               t0: float) -> EvalResult:
    wls: dict[str, _WL] = {}
    for w in [*chosen, *([hidden_wl] if hidden_wl else [])]:
        wls[w.name] = _WL(WorkloadResult(name=w.name, status="passed", params=dict(w.params),
                                         hidden=w.name == "hidden"))
    flags = list(result.flags)
    own_names = tripwires.own_kernel_names(source)
    current: str | None = None
    task_fault: str | None = None
    done = imported = False
    import_status: tuple[str, str] | None = None
    harness_error: str | None = None

    def fail(name: str | None, status: str, message: str) -> None:
        if name is None or name not in wls:
            return
        w = wls[name]
        if not w.failed:
            w.failed = True
            w.result.status = status  # type: ignore[assignment]
            w.result.message = message[:4000]

    for arrived, msg in out.messages:
        kind = msg.get("kind")
        wl = msg.get("workload")
        if kind == "ready":
            envd = msg.get("environment", {})
            result.environment = result.environment.model_copy(update={
                k: envd.get(k) for k in ("torch", "triton", "cuda", "python", "interpreter") if k in envd}
                | ({"gpu": envd["gpu"]} if envd.get("gpu") else {}))
        elif kind == "ceilings":
            ceilings = msg.get("ceilings")
            if gpu and ceilings:
                roofline.save_ceilings(gpu["name"], ceilings)
        elif kind == "sandbox":
            result.environment = result.environment.model_copy(update={"sandbox": str(msg.get("description", ""))})
        elif kind == "sharing":
            how = "gpu" if msg.get("on_device") is True else f"host memory ({str(msg.get('why', ''))[:200]})"
            result.environment = result.environment.model_copy(update={"buffers": how})
        elif kind == "task_fault":
            task_fault = str(msg.get("message", "the task failed"))
        elif kind == "baseline":
            w = wls.get(wl)
            if w is not None:
                w.candidates = list(msg.get("candidates", []))
        elif kind == "import_start":
            imported = True
        elif kind == "imported":
            result.import_s = msg.get("seconds")
        elif kind == "import_error":
            text = msg.get("message", "")
            if msg.get("limitation"):
                text = f"the Triton interpreter cannot run this: {msg['limitation']}\n{text}"
            import_status = (msg.get("status", "compile_error"), text)
        elif kind == "flag":
            flags.append(Flag(code=msg["code"], message=msg["message"]))
            fail(wl or current, "rejected", msg["message"])
        elif kind == "workload_start":
            current = msg["name"]
            if current in wls:
                wls[current].started = arrived
        elif kind == "trial":
            w = wls.get(wl)
            if w is None:
                continue
            w.result.trials += 1
            errs = [OutputError(**{k: v for k, v in o.items() if k in OutputError.model_fields}) for o in
                    msg.get("outputs", [])]
            score = sum(e.n_bad for e in errs) * 1e9 + max([e.max_rel_err for e in errs] or [0.0])
            if not msg.get("ok"):
                if not w.failed:
                    w.result.errors = errs
                first = next((e for e in errs if not e.ok), None)
                fail(wl, "incorrect", f"trial {msg.get('index')} ({msg.get('dist')}): {first.name}: {first.reason}"
                     if first else "incorrect")
            elif not w.failed and score > w.worst:
                w.worst, w.result.errors = score, errs
        elif kind == "call_error":
            why = f"the Triton interpreter cannot run this: {msg['limitation']}; " if msg.get("limitation") else ""
            fail(wl or current, msg.get("status", "runtime_error"), f"{msg.get('what')}: {why}{msg.get('message', '')}")
        elif kind == "rotation":
            w = wls.get(wl)
            if w is not None:
                w.result.checked_calls += int(msg.get("calls", 0))
                if msg.get("n_problems"):
                    fail(wl, "incorrect", f"{msg['n_problems']} of {msg.get('calls')} repeated calls on rotated "
                         f"inputs were wrong (a cache, or right only on early calls): {msg['problems'][0]}")
        elif kind == "timing":
            w = wls.get(wl)
            if w is None:
                continue
            if msg.get("skipped"):
                w.result.message = f"timing skipped: {msg['skipped']}"
                continue
            w.samples = msg.get("samples")
            w.dists = msg.get("dists")
            w.clock = msg.get("clock") or {}
            w.result.checked_calls += int(msg.get("checked", 0))
            batch = msg.get("batch") or {}
            w.result.host_ms = batch.get("wall_ms")
            w.batch_event_ms = batch.get("event_ms")
            if msg.get("n_problems"):
                fail(wl, "incorrect", f"{msg['n_problems']} of {msg.get('checked')} timed calls returned a wrong "
                     f"output (a cache, or right only on early calls): {msg['problems'][0]}")
        elif kind == "profile":
            w = wls.get(wl)
            if w is None:
                continue
            if not msg.get("ok", True):
                fail(wl, "incorrect", "the profiled call returned a wrong output")
            for f in _judge_profile(msg, task, own_names, dev, wl):
                flags.append(f)
                fail(wl, "rejected", f.message)
        elif kind == "workload_end":
            w = wls.get(msg.get("name"))
            if w is not None and w.started is not None:
                w.result.wall_s = arrived - w.started
            current = None
        elif kind == "workload_skipped" and wl in wls:
            del wls[wl]
            flags.append(Flag(code="hidden.unavailable", severity="warning",
                              message=f"the hidden workload was skipped: the task's input maker rejected the drawn "
                              f"shape ({msg.get('reason', '')}); give the task a `hidden` spec"))
        elif kind == "harness_error":
            harness_error = msg.get("message", "")
        elif kind == "done":
            done = True

    # Timing statistics, speedups, roofline, hidden work: decided here, from raw samples. The evidence of faked
    # speed (under the roofline floor, hidden work) is weighed even when a timed output was also wrong: work left
    # on a side stream usually fails the in-stream recheck as well, and "rejected" says more than "incorrect".
    if task_fault is not None:
        raise UserError(f"task {task.id}: {task_fault} (a fault of the task, not of the submission)")
    for name, w in wls.items():
        r = w.result
        _baselines_into(r, w.candidates)
        r.time = _timing(w.samples)
        if r.time is None:
            continue
        r.time_by_dist = _timing_by_dist(w.samples, w.dists)
        passed = r.status == "passed"
        med = r.time.median_ms
        if passed and r.eager and med > 0:
            r.speedup_eager = r.eager.median_ms / med
        if passed and r.compiled and med > 0:
            r.speedup_compiled = r.compiled.median_ms / med
        best = next((b for b in r.baselines if b.name == r.best_baseline), None)
        if passed and best is not None and best.time and med > 0:
            r.speedup_best = best.time.median_ms / med
        clock = w.clock or {}
        if clock.get("available"):
            r.evaluator_ms = float(clock["implied_ms"])
            r.clock = {k: v for k, v in clock.items() if isinstance(v, (int, float, bool))}
            if clock.get("untrusted"):
                msg = (f"{name}: the kernel host's CUDA events say {clock['events_mean_ms'] * 1e3:.1f} us per call, "
                       f"but the evaluator's own clock implies {clock['implied_ms'] * 1e3:.1f} us "
                       f"(margin {clock['margin_ms'] * 1e3:.1f} us): the timing was under-reported")
                flags.append(Flag(code="timing.untrusted", message=msg))
                fail(name, "rejected", msg)
        wobj = next((x for x in chosen if x.name == name), None)
        if ceilings and wobj is not None:
            try:
                r.roofline_floor_ms = roofline.floor_ms(task.cost_of(wobj), ceilings, wobj.dtype)
            except (ValueError, ZeroDivisionError) as exc:  # a cost formula that does not evaluate: no floor
                flags.append(Flag(code="roofline.unavailable", severity="warning", message=f"{name}: {exc}"))
            if r.roofline_floor_ms and med > 0:
                r.roofline_fraction = r.roofline_floor_ms / med if passed else None
                if med < roofline.FLOOR_MARGIN * r.roofline_floor_ms:
                    msg = (f"{name}: median {med * 1e3:.1f} us is under {roofline.FLOOR_MARGIN:.0%} of the roofline "
                           f"floor {r.roofline_floor_ms * 1e3:.1f} us: impossible on this GPU")
                    flags.append(Flag(code="timing.below_roofline", message=msg))
                    fail(name, "rejected", msg)
        if r.host_ms is not None and w.batch_event_ms is not None and stats.hidden_work(w.batch_event_ms, r.host_ms):
            msg = (f"{name}: back to back, {r.host_ms * 1e3:.1f} us per call on the host clock but "
                   f"{w.batch_event_ms * 1e3:.1f} us on CUDA events: work ran outside the timed stream (a side "
                   "stream or a thread)")
            flags.append(Flag(code="timing.hidden_work", message=msg))
            fail(name, "rejected", msg)

    if out.forged:
        flags.append(Flag(code="forged_message", message=f"the result channel carried a forged frame: {out.forged}"))
    result.flags = flags
    result.ceilings = ceilings
    result.log = out.log
    started = [w for w in wls.values() if w.started is not None]
    stop_reason: tuple[str, str] | None = None
    if out.forged:
        stop_reason = ("rejected", "forged message on the result channel")
    elif out.mem_exceeded:
        stop_reason = ("crashed", "the worker went over the host memory limit")
    elif out.stalled:
        stop_reason = ("timeout", "no progress for too long once the submission was loaded (an infinite loop?)")
    elif out.timed_out:
        stop_reason = ("timeout", "the evaluation ran past its time limit")
    elif import_status:
        stop_reason = import_status
    elif harness_error and imported:
        stop_reason = ("crashed", "the evaluator failed after the submission was loaded: "
                       + harness_error.strip().splitlines()[-1][:500])
    elif not done:
        rc = out.returncode
        how = f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exited with code {rc}"
        stop_reason = ("crashed", f"the evaluator {how} before finishing".replace("evaluator killed",
                                                                                  "evaluator was killed"))
    if harness_error and not imported:
        raise RuntimeError(f"evaluator fault before the submission was loaded: {harness_error}\n--- log ---\n"
                           f"{out.log[-3000:]}")
    if stop_reason:
        for w in wls.values():
            if w.started is not None and not w.failed and w.result.name == current:
                fail(w.result.name, *stop_reason)
        for w in wls.values():
            if w.started is None and not w.failed:
                fail(w.result.name, stop_reason[0], f"not run: {stop_reason[1]}"[:4000])
    rejects = [f for f in flags if f.severity == "reject"]
    if rejects:
        status, message = "rejected", "; ".join(f.message for f in rejects[:3])
    elif stop_reason and (stop_reason[0] in ("timeout", "crashed") or import_status):
        status, message = stop_reason[0], stop_reason[1][:2000]
    else:
        bad = [w.result for w in wls.values() if w.result.status != "passed"]
        if bad:
            status, message = bad[0].status, f"{bad[0].name}: {bad[0].message}"
        else:
            n = len(started)
            message = f"passed {n} workload(s) ({', '.join(w.result.name for w in started)})"
            if dev == "cpu" and not any(w.result.time for w in started):
                message += "; timing unavailable on cpu (Triton interpreter)"
            status = "passed"
    for w in wls.values():
        if w.started is None and not w.failed:  # never reached: the run stopped earlier
            fail(w.result.name, status, f"not run: {message}"[:4000])
    result.workloads = [w.result for w in wls.values()]
    result = _finish(result, t0, status=status, message=message)
    end = time.monotonic()
    return redact_result(result.model_copy(update={"wall_s": end - t0, "phases": phase_split(out.messages, t0, end),
                                                      "phase_detail": phase_detail(out.messages)}))


def redact_result(result: EvalResult) -> EvalResult:
    """The result with the caller's secret values replaced in every text (:mod:`runner.redact`)."""
    from runner.redact import MARK, redact, secret_values

    values = secret_values()
    if not values:
        return result
    text = result.model_dump_json()
    clean = redact(text, [json.dumps(v)[1:-1] for v in values])
    if clean == text:
        return result
    log.warning("a secret value of this process's environment appeared in the evaluation's output; replaced by %s",
                MARK)
    return EvalResult.model_validate_json(clean)


def _baselines_into(r: WorkloadResult, candidates: list[dict[str, Any]] | None) -> None:
    """Every candidate's record, the eager and compile columns, and the best (fastest ``ok``) candidate."""
    if not candidates:
        return
    out = []
    for c in candidates:
        samples = c.get("samples")
        timing = _timing(samples)
        fields = {k: c.get(k) for k in ("name", "kind", "status", "reason", "vendor", "max_tol_ratio", "cached",
                                        "measured_at", "cache_key", "compile_warmup_s") if c.get(k) is not None}
        out.append(BaselineTiming(**fields, time=timing))
    r.baselines = out
    by_name = {b.name: b for b in out}
    eager, compiled = by_name.get("eager"), by_name.get("compile")
    r.eager = eager.time if eager and eager.status == "ok" else None
    r.compiled = compiled.time if compiled and compiled.status == "ok" else None
    r.compile_warmup_s = compiled.compile_warmup_s if compiled else None
    ok = [b for b in out if b.status == "ok" and b.time is not None]
    if ok:
        r.best_baseline = min(ok, key=lambda b: b.time.median_ms).name  # type: ignore[union-attr]


def _judge_profile(msg: dict[str, Any], task: Task, own_names: list[str], dev: str, wl: str | None) -> list[Flag]:
    """The profile proof of one workload's merged calls (glue ops passed where the judge takes them)."""
    import inspect

    kwargs: dict[str, Any] = {"own_names": own_names, "forbidden_ops": task.forbidden_ops,
                              "allowed_library_ops": task.allowed_library_ops,
                              "data_numel": int(msg.get("data_numel", 1)), "device": dev,
                              "own_launches": msg.get("own_launches"), "workload": wl or ""}
    if "glue_ops" in inspect.signature(profile_proof.judge).parameters:
        kwargs["glue_ops"] = task.glue_ops
    summary = dict(msg.get("summary", {}))
    if dev == "cuda" and not msg.get("profiled"):
        summary.pop("kernels", None)
    return profile_proof.judge(summary, **kwargs)


__all__ = ["evaluate", "run_evaluation", "EvalOptions", "default_suite_root", "load_task", "gpu_info",
           "resolve_device", "resolve_workloads"]
