"""Run a kernel in this process and compare it with the reference: the unsandboxed core of evaluation.

Used by the suite's own tests (trusted reference kernels on the smoke workload) and inside the evaluator's
sandboxed worker. Never call it on an untrusted submission outside that sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from d2kgrade.schema import Task
from runner.compare import Mismatch, check_dtype, compare_tensor
from runner.inputs import WorkloadSpec, as_tuple, distributions, make_inputs


@dataclass
class TrialResult:
    """One call of the kernel on one input draw."""

    dist: str
    seed: int
    outputs: list[Mismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(m.ok for m in self.outputs)


def checked_outputs(ref: ModuleType | None) -> tuple[str, ...]:
    """Outputs that the reference module's own ``check`` validates instead of an elementwise comparison.

    A task whose outputs are not unique (top-k indices among tied values) defines in ``reference.py``::

        CHECKED_OUTPUTS = ("indices",)       # outputs not compared elementwise with reference()'s
        def check(inputs, outputs, expected, scalars) -> list[str]: ...

    ``check`` gets the original inputs, the kernel's outputs and the reference's outputs (tuples, in task
    order; every output already has the right dtype and shape) and the scalar arguments, and returns the
    problems it finds (empty: valid). Outputs not named in ``CHECKED_OUTPUTS`` are still compared elementwise.
    """
    if ref is None or not callable(getattr(ref, "check", None)):
        return ()
    return tuple(getattr(ref, "CHECKED_OUTPUTS", ()))


def custom_check(ref: ModuleType, spec: WorkloadSpec, inputs: tuple[Any, ...], got: tuple[Any, ...],
                 expected: tuple[Any, ...]) -> Mismatch:
    """Run ``ref.check`` and fold its problems into one :class:`Mismatch` named after the checked outputs."""
    name = "+".join(checked_outputs(ref))
    try:
        problems = [str(p) for p in ref.check(inputs, got, expected, dict(spec.scalars))]
    except Exception as exc:  # noqa: BLE001 - a malformed output that breaks the check is a wrong output
        problems = [f"the task's check failed on these outputs: {type(exc).__name__}: {exc}"]
    if problems:
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        return Mismatch(name, False, "; ".join(problems[:3]) + more)
    return Mismatch(name, True)


def compare_outputs(spec: WorkloadSpec, got: Any, expected: Any, *, inputs: tuple[Any, ...] | None = None,
                    ref: ModuleType | None = None) -> list[Mismatch]:
    """Compare a kernel's outputs with the reference's, output by output.

    With ``ref`` (the task's reference module) and ``inputs``, the outputs named by :func:`checked_outputs`
    are validated by ``ref.check`` instead of elementwise; without them every output is compared elementwise
    (so a kernel that reproduces the reference's canonical choice always passes).
    """
    got_t, exp_t = as_tuple(got), as_tuple(expected)
    names = spec.output_names
    if len(got_t) != len(names):
        return [Mismatch("(outputs)", False, f"returned {len(got_t)} outputs, expected {len(names)} ({names})")]
    custom = checked_outputs(ref) if inputs is not None else ()
    out = []
    for name, g, e in zip(names, got_t, exp_t, strict=True):
        bad = check_dtype(name, g, spec.dtypes[name])
        if bad is None and name in custom:
            bad = compare_tensor(name, g, e, (float("inf"), 0.0))  # type, shape and finiteness only
        elif bad is None:
            tol = spec.task.tolerance_for(_catalog(spec, name))
            bad = compare_tensor(name, g, e, tol)
        out.append(bad)
    if custom and all(m.ok for m in out):
        assert ref is not None and inputs is not None
        out.append(custom_check(ref, spec, inputs, got_t, exp_t))
    return out


def _catalog(spec: WorkloadSpec, name: str) -> str:
    return spec.task.tensor_dtypes(spec.workload)[name]


def run_trials(task: Task, ref: ModuleType, kernel: Any, workload: str = "smoke", *, seed: int = 0,
               device: str = "cpu", dists: tuple[str, ...] | None = None) -> list[TrialResult]:
    """Call ``kernel`` once per input distribution and compare each result with ``ref.reference``."""
    spec = WorkloadSpec.resolve(task, task.workload(workload))
    results = []
    for i, dist in enumerate(dists or distributions(ref)):
        inputs = make_inputs(ref, spec, seed=seed + i, device=device, dist=dist)
        expected = ref.reference(*inputs, **spec.scalars)
        got = kernel(*[t.clone() for t in inputs], **spec.scalars)
        results.append(TrialResult(dist, seed + i, compare_outputs(spec, got, expected, inputs=inputs, ref=ref)))
    return results


def load_reference(task_dir: Path) -> ModuleType:
    """Load ``tasks/<id>/reference.py``."""
    from runner.loading import load_module

    return load_module(task_dir / "reference.py", prefix="d2k_ref")


__all__ = ["TrialResult", "checked_outputs", "compare_outputs", "custom_check", "run_trials", "load_reference"]
