"""The hidden workload: a shape drawn per run, not listed in the task, so a kernel that hard-codes the catalog's
(or the smoke workload's) sizes fails.

It is the smoke workload with some integer parameters redrawn: each becomes ``round(value * U(0.5, 2.0))``
(``U(0.5, 1.5)`` on CPU, where the Triton interpreter is slow), clamped to the task's ``hidden`` bounds, rounded
up to its ``multiple_of`` and different from the smoke value. Which parameters: the task's ``hidden.vary``, or by
default every integer parameter that is a whole dimension of an input and whose smoke value is not a power of two
(smoke sizes are deliberately irregular, 37 x 1000; structural constants such as a head dim of 64 are powers of
two and stay fixed). On CUDA the workload dtype is drawn among the catalog workloads' dtypes. Pure Python.
"""

from __future__ import annotations

import math
import random

from d2kgrade import formulas
from d2kgrade.schema import HiddenDim, Task, Workload

RANGE_GPU = (0.5, 2.0)
RANGE_CPU = (0.5, 1.5)


def default_vary(task: Task) -> dict[str, HiddenDim]:
    """Parameters perturbed when the task gives no ``hidden`` spec."""
    dims: set[str] = set()
    for t in task.inputs:
        dims |= {d.strip() for d in formulas.shape_dims(t.shape)}
    out = {}
    for name, value in task.smoke.params.items():
        if isinstance(value, bool) or not isinstance(value, int) or name not in dims or name in task.scalar_args:
            continue
        if value > 1 and value & (value - 1) == 0:
            continue
        out[name] = HiddenDim()
    return out


def draw(task: Task, rng: random.Random, device: str) -> Workload | None:
    """The hidden workload of one run, or None when the task varies nothing (or no draw resolves)."""
    vary = task.hidden.vary if task.hidden is not None else default_vary(task)
    if not vary:
        return None
    lo, hi = RANGE_CPU if device == "cpu" else RANGE_GPU
    dtypes = [task.smoke.dtype] if device == "cpu" else sorted({w.dtype for w in task.workloads})
    for _attempt in range(20):
        params = dict(task.smoke.params)
        for name, dim in vary.items():
            base = int(task.smoke.params[name])
            value = base
            for _ in range(20):
                value = max(dim.min, round(base * rng.uniform(lo, hi)))
                if dim.max is not None:
                    value = min(value, dim.max)
                value = math.ceil(value / dim.multiple_of) * dim.multiple_of
                if dim.max is not None and value > dim.max:
                    value -= dim.multiple_of
                if value != base and value >= dim.min:
                    break
            params[name] = value
        w = Workload(name="hidden", params=params, dtype=rng.choice(dtypes),
                     why="Drawn per run from the smoke workload; not listed in the task.")
        try:
            task.shapes(w)
            task.tensor_dtypes(w)
        except (ValueError, KeyError, ZeroDivisionError, formulas.FormulaError):
            continue
        return w
    return None
