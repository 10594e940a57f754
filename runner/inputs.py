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


_WIRE_DTYPES = {str(getattr(torch, n)).replace("torch.", ""): getattr(torch, n) for n in
                ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int64", "int32",
                 "int16", "int8", "uint8", "bool")}


def dtype_name(dtype: torch.dtype) -> str:
    """The wire name of a torch dtype (``float32``), as the kernel host reports it."""
    return str(dtype).replace("torch.", "")


def dtype_from_name(name: str) -> torch.dtype:
    """The torch dtype of a wire name; ValueError for anything else."""
    try:
        return _WIRE_DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}") from None


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
