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


def compare_outputs(spec: WorkloadSpec, got: Any, expected: Any) -> list[Mismatch]:
    """Compare a kernel's outputs with the reference's, output by output."""
    got_t, exp_t = as_tuple(got), as_tuple(expected)
    names = spec.output_names
    if len(got_t) != len(names):
        return [Mismatch("(outputs)", False, f"returned {len(got_t)} outputs, expected {len(names)} ({names})")]
    out = []
    for name, g, e in zip(names, got_t, exp_t, strict=True):
        bad = check_dtype(name, g, spec.dtypes[name])
        if bad is None:
            tol = spec.task.tolerance_for(_catalog(spec, name))
            bad = compare_tensor(name, g, e, tol)
        out.append(bad)
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
        results.append(TrialResult(dist, seed + i, compare_outputs(spec, got, expected)))
    return results


def load_reference(task_dir: Path) -> ModuleType:
    """Load ``tasks/<id>/reference.py``."""
    from runner.loading import load_module

    return load_module(task_dir / "reference.py", prefix="d2k_ref")


__all__ = ["TrialResult", "compare_outputs", "run_trials", "load_reference"]
