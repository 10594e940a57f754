"""Inputs for a workload, made by the task's ``reference.py`` from resolved shapes and dtypes.

The contract of ``tasks/<id>/reference.py``::

    DISTRIBUTIONS = ("normal", ...)      # input distributions; the first is the catalog's
    def make_inputs(params, shapes, dtypes, *, generator, device, dist) -> tuple[Tensor, ...]
    def reference(*inputs, **scalars)    # exact semantics computed in float64, outputs in their storage dtypes
    def baseline(*inputs, **scalars)     # the fastest thing PyTorch offers (cuBLAS, FlashAttention...)

``shapes`` and ``dtypes`` come from task.yaml (one source of truth); ``scalars`` are the task's
``scalar_args`` taken from the workload's parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from d2kgrade.dtypes import TORCH_NAMES
from d2kgrade.schema import Task, Workload


def torch_dtype(name: str) -> torch.dtype:
    """torch dtype of a catalog dtype name."""
    return getattr(torch, TORCH_NAMES[name])  # type: ignore[no-any-return]


@dataclass(frozen=True)
class WorkloadSpec:
    """A workload resolved against its task: concrete shapes, torch dtypes and scalar arguments."""

    task: Task
    workload: Workload
    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, torch.dtype]
    scalars: dict[str, Any]

    @classmethod
    def resolve(cls, task: Task, workload: Workload) -> WorkloadSpec:
        names = task.tensor_dtypes(workload)
        return cls(task, workload, task.shapes(workload), {k: torch_dtype(v) for k, v in names.items()},
                   {a: workload.params[a] for a in task.scalar_args})

    @property
    def output_names(self) -> list[str]:
        return [t.name for t in self.task.outputs]


def distributions(ref: ModuleType) -> tuple[str, ...]:
    """The input distributions a reference module offers (at least one)."""
    dists = tuple(getattr(ref, "DISTRIBUTIONS", ("normal",)))
    return dists or ("normal",)


def make_inputs(ref: ModuleType, spec: WorkloadSpec, *, seed: int, device: str | torch.device,
                dist: str | None = None) -> tuple[torch.Tensor, ...]:
    """Call the reference module's input maker with a seeded generator on ``device``."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    dist = dist or distributions(ref)[0]
    inputs = ref.make_inputs(dict(spec.workload.params), spec.shapes, spec.dtypes, generator=gen, device=device,
                             dist=dist)
    inputs = tuple(inputs)
    names = [t.name for t in spec.task.inputs]
    if len(inputs) != len(names):
        raise RuntimeError(f"make_inputs returned {len(inputs)} tensors, task {spec.task.id} has {len(names)} inputs")
    for name, tensor in zip(names, inputs, strict=True):
        if tuple(tensor.shape) != spec.shapes[name] or tensor.dtype != spec.dtypes[name]:
            raise RuntimeError(f"make_inputs: {name} is {tuple(tensor.shape)} {tensor.dtype}, task.yaml says "
                               f"{spec.shapes[name]} {spec.dtypes[name]}")
    return inputs


def as_tuple(out: Any) -> tuple[Any, ...]:
    """Normalize a kernel's return value to a tuple of outputs."""
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)
