"""How an episode gets its kernels evaluated: requests, evaluation lanes, and the call into the evaluator.

An episode never runs a kernel itself. It hands the source text to an :class:`Evaluator`, which writes it to a
fresh folder of its own (so the agent's later writes cannot race the evaluation, and the evaluator's sandbox
sees nothing of the workspace) and calls :func:`runner.evaluate.evaluate` on one *lane*.

A lane is one GPU (or, on CPU, one slot of ``cpu_lanes``) guarded by a lock: every evaluation and every profile
holds its lane's lock for its whole duration, so a timing never overlaps other work of this run on that GPU.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from d2kgrade.errors import UserError
from d2kgrade.io import private_tempdir
from d2kgrade.records import EvalResult

log = logging.getLogger(__name__)

EvaluateFn = Callable[..., EvalResult]
"""The evaluator's API: ``evaluate(task_id, submission, *, suite_root, device, workloads, seed, timeout_s, hidden,
timing) -> EvalResult``."""


class EvaluatorFault(RuntimeError):
    """The evaluator itself failed (not the kernel): an exception out of ``evaluate``."""


class EvaluationRefused(ValueError):
    """The evaluator refused the request (a ``UserError``: a workload the task lacks, one too large for CPU...)."""


@dataclass(frozen=True)
class EvalRequest:
    """One evaluation of one kernel source."""

    task_id: str
    source: str
    filename: str = "kernel.py"
    workloads: str | list[str] = "all"
    seed: int | None = None
    hidden: bool = False
    timing: bool = False
    timeout_s: float | None = None


@dataclass(frozen=True)
class ProfileRequest:
    """One ncu profile of one kernel source on one workload."""

    task_id: str
    source: str
    filename: str = "kernel.py"
    workload: str | None = None


@dataclass(frozen=True)
class SanitizeRequest:
    """One NVIDIA compute-sanitizer run of one kernel source on a small workload."""

    task_id: str
    source: str
    filename: str = "kernel.py"
    tool: str = "memcheck"
    """``memcheck`` (out-of-bounds and misaligned accesses) or ``racecheck`` (shared-memory races)."""
    timeout_s: float | None = None


SANITIZE_KEYS = ("available", "reason", "tool", "errors", "report")


class Evaluator(Protocol):
    """What an episode calls; local lanes and Ray tasks both implement it."""

    device: str

    def evaluate(self, req: EvalRequest) -> EvalResult: ...

    def profile(self, req: ProfileRequest) -> str: ...

    def sanitize(self, req: SanitizeRequest) -> dict[str, Any]: ...


def default_evaluate_fn() -> EvaluateFn:
    """``runner.evaluate.evaluate``, imported when first needed (it imports torch)."""
    try:
        from runner.evaluate import evaluate
    except ImportError as exc:
        raise EvaluatorFault(f"the evaluator (runner.evaluate) cannot be imported: {exc}") from exc
    return evaluate


@dataclass
class Lanes:
    """A pool of evaluation lanes, each a device string with its own lock (handed out through a queue)."""

    devices: list[str]
    _free: queue.Queue[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.devices:
            raise ValueError("no evaluation lane")
        self._free = queue.Queue()
        for d in self.devices:
            self._free.put(d)

    @contextlib.contextmanager
    def acquire(self) -> Iterator[str]:
        """Hold one free lane (blocking until one is free)."""
        device = self._free.get()
        try:
            yield device
        finally:
            self._free.put(device)


def lane_devices(device: str, gpus: list[int] | None, cpu_lanes: int) -> list[str]:
    """``cuda:<i>`` per GPU to use, or ``cpu`` repeated ``cpu_lanes`` times."""
    if device == "cpu":
        return ["cpu"] * cpu_lanes
    if gpus is None:
        import torch

        gpus = list(range(torch.cuda.device_count()))
    if not gpus:
        raise RuntimeError("device cuda was asked for, but no GPU is visible")
    return [f"cuda:{i}" for i in gpus]


@contextlib.contextmanager
def submission_file(source: str, filename: str) -> Iterator[Path]:
    """The source written to a fresh private folder, removed afterwards."""
    name = Path(filename).name if filename.endswith(".py") else "kernel.py"
    tmp = private_tempdir("sub")
    try:
        path = tmp / name
        path.write_text(source, encoding="utf-8")
        yield path
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def call_evaluate(fn: EvaluateFn, req: EvalRequest, *, suite_root: Path, device: str) -> EvalResult:
    """Run ``fn`` on ``req`` on ``device``; an exception out of the evaluator becomes :class:`EvaluatorFault`."""
    with submission_file(req.source, req.filename) as path:
        kwargs: dict[str, Any] = dict(suite_root=suite_root, device=device, workloads=req.workloads, seed=req.seed,
                                      timeout_s=req.timeout_s, hidden=req.hidden, timing=req.timing)
        try:
            result = fn(req.task_id, path, **kwargs)
        except UserError as exc:
            raise EvaluationRefused(str(exc)) from exc
        except Exception as exc:
            log.exception("evaluator fault on %s", req.task_id)
            raise EvaluatorFault(f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(result, EvalResult):
        raise EvaluatorFault(f"the evaluator returned {type(result).__name__}, not an EvalResult")
    return result


def call_sanitize(req: SanitizeRequest, *, suite_root: Path, device: str) -> dict[str, Any]:
    """``runner.sanitize.sanitize`` on ``req`` (the submission written to a private folder); its dict, checked.

    Raises:
        EvaluatorFault: the sanitizer raised, or answered something other than its documented dict.
    """
    try:
        from runner.sanitize import sanitize
    except ImportError as exc:
        return {"available": False, "reason": f"the sanitizer is not part of this installation ({exc})",
                "tool": req.tool, "errors": 0, "report": ""}
    with submission_file(req.source, req.filename) as path:
        try:
            out = sanitize(req.task_id, path, tool=req.tool, suite_root=suite_root, device=device,
                           timeout_s=req.timeout_s)
        except UserError as exc:
            raise EvaluationRefused(str(exc)) from exc
        except Exception as exc:
            log.exception("sanitizer fault on %s", req.task_id)
            raise EvaluatorFault(f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(out, dict) or any(k not in out for k in SANITIZE_KEYS):
        raise EvaluatorFault(f"the sanitizer returned {out!r:.200}, not a dict with keys {SANITIZE_KEYS}")
    return out


class LaneEvaluator:
    """Evaluations on local lanes (threads share it)."""

    def __init__(self, lanes: Lanes, suite_root: Path, evaluate_fn: EvaluateFn | None = None,
                 profile_fn: Callable[[ProfileRequest, Path, str], str] | None = None) -> None:
        self.lanes = lanes
        self.suite_root = suite_root
        self._fn = evaluate_fn
        self._profile_fn = profile_fn
        self._lock = threading.Lock()
        self.device = "cpu" if lanes.devices[0] == "cpu" else "cuda"

    def _evaluate_fn(self) -> EvaluateFn:
        with self._lock:
            if self._fn is None:
                self._fn = default_evaluate_fn()
            return self._fn

    def evaluate(self, req: EvalRequest) -> EvalResult:
        fn = self._evaluate_fn()
        with self.lanes.acquire() as device:
            return call_evaluate(fn, req, suite_root=self.suite_root, device=device)

    def profile(self, req: ProfileRequest) -> str:
        if self._profile_fn is None:
            from runner.agent.profile import profile_source

            self._profile_fn = profile_source
        with self.lanes.acquire() as device:
            return self._profile_fn(req, self.suite_root, device)

    def sanitize(self, req: SanitizeRequest) -> dict[str, Any]:
        with self.lanes.acquire() as device:  # a lane, like an evaluation: it runs kernels on that GPU
            return call_sanitize(req, suite_root=self.suite_root, device=device)
