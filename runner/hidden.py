"""The hidden workload: a shape (and dtype) drawn per run from the secret seed, not listed in the task, so a
kernel that hard-codes the catalog's or the smoke workload's sizes, handles only small rows or only one dtype
fails.

It is the smoke workload with some integer parameters redrawn. Which parameters: the task's ``hidden.vary``, or
by default every integer parameter that is a whole dimension of an input and whose smoke value is not a power
of two (smoke sizes are deliberately irregular, 37 x 1000; structural constants such as a head dim of 64 are
powers of two and stay fixed). Each drawn value **crosses a power of two and the usual block thresholds**: it
lies in ``(T, 1.25 T]`` with ``T`` the smallest power of two at least twice the smoke value and at least
:data:`MIN_THRESHOLD_CPU` (256: more rows than a first-128-rows kernel writes) on CPU or
:data:`MIN_THRESHOLD_GPU` on CUDA; so softmax's 37 x 1000 becomes (256, 320] x (2048, 2560] on CPU. When the
cost model says the draw would be too slow for the device (:data:`BUDGET_CPU`: a multiple of the smoke cost the
interpreter runs in seconds), the largest dimensions fall back, one at a time, to a perturbation of the smoke
value (``U(0.5, 1.5)`` x it). Values are clamped to the task's ``hidden`` bounds and rounded up to its
``multiple_of``.

The dtype is drawn among the task's workload dtypes other than the smoke's (the smoke's when there is no other),
on CPU too: the kernel host's interpreter
patches (:mod:`runner.interp_compat`) make bf16 arithmetic right there. Pure Python.
"""

from __future__ import annotations

import math
import random

from d2kgrade import formulas
from d2kgrade.schema import HiddenDim, Task, Workload

RANGE = (0.5, 1.5)
"""The fallback perturbation of a smoke value."""
MIN_THRESHOLD_CPU = 256
MIN_THRESHOLD_GPU = 1024
BUDGET_CPU = 24.0
"""On CPU a draw may cost at most this many times the smoke workload (flops and bytes of the cost model)."""
BUDGET_GPU = 4096.0
INTERPRETER_SAFE = frozenset({"fp32", "fp16", "bf16", "fp64", "int64", "int32", "int16", "int8", "uint8", "bool",
                              "fp8_e4m3", "fp8_e5m2"})
"""bf16 included: :mod:`runner.interp_compat` decodes the interpreter's bf16 arithmetic to fp32 and rounds back."""


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
    cpu = device == "cpu"
    floor = MIN_THRESHOLD_CPU if cpu else MIN_THRESHOLD_GPU
    budget = BUDGET_CPU if cpu else BUDGET_GPU
    dtypes = _dtypes(task, cpu)
    try:
        base_cost = task.cost_of(task.smoke)
    except (ValueError, KeyError, ZeroDivisionError, formulas.FormulaError):
        base_cost = None
    # Another dtype than the smoke workload's where the task has one: the smoke covers its own, so a kernel that
    # handles one dtype only (always returns fp32) fails in every run, not in half of them.
    others = [d for d in dtypes if d != task.smoke.dtype] or dtypes
    for _attempt in range(20):
        dtype = rng.choice(others)
        crossing = {name: _crossing(int(task.smoke.params[name]), dim, floor, rng) for name, dim in vary.items()}
        perturbed = {name: _perturbed(int(task.smoke.params[name]), dim, rng) for name, dim in vary.items()}
        chosen = dict(crossing)
        # Too costly for this device: the largest dimensions fall back to a perturbation, one at a time.
        for name in sorted(vary, key=lambda n: -crossing[n]):
            w = _workload(task, chosen, dtype)
            if w is not None and _within(task, w, base_cost, budget):
                break
            chosen[name] = perturbed[name]
        w = _workload(task, chosen, dtype)
        if w is not None and _within(task, w, base_cost, budget):
            return w
    return None


def _dtypes(task: Task, cpu: bool) -> list[str]:
    """Dtypes a hidden workload may take: the catalog workloads' and the smoke's, whose tolerances resolve."""
    out = []
    for d in sorted({w.dtype for w in task.workloads} | {task.smoke.dtype}):
        if cpu and d not in INTERPRETER_SAFE:
            continue
        w = Workload(name="hidden", params=dict(task.smoke.params), dtype=d)
        try:
            for t, name in task.tensor_dtypes(w).items():
                if t in {o.name for o in task.outputs}:
                    task.tolerance_for(name)
        except (ValueError, KeyError):
            continue
        out.append(d)
    return out or [task.smoke.dtype]


def _clamp(value: int, dim: HiddenDim) -> int:
    value = max(dim.min, value)
    if dim.max is not None:
        value = min(value, dim.max)
    value = math.ceil(value / dim.multiple_of) * dim.multiple_of
    if dim.max is not None and value > dim.max:
        value -= dim.multiple_of
    return max(value, dim.min)


def _crossing(base: int, dim: HiddenDim, floor: int, rng: random.Random) -> int:
    """A value in (T, 1.25 T]: T the smallest power of two >= max(2 x base, floor)."""
    t = 1 << max(1, math.ceil(math.log2(max(2 * base, floor))))
    return _clamp(t + 1 + rng.randrange(max(1, t // 4)), dim)


def _perturbed(base: int, dim: HiddenDim, rng: random.Random) -> int:
    value = base
    for _ in range(20):
        value = _clamp(round(base * rng.uniform(*RANGE)), dim)
        if value != base:
            break
    return value


def _workload(task: Task, values: dict[str, int], dtype: str) -> Workload | None:
    w = Workload(name="hidden", params={**task.smoke.params, **values}, dtype=dtype,
                 why="Drawn per run from the smoke workload; not listed in the task.")
    try:
        task.shapes(w)
        task.tensor_dtypes(w)
    except (ValueError, KeyError, ZeroDivisionError, formulas.FormulaError):
        return None
    return w


def _within(task: Task, w: Workload, base: dict[str, float] | None, budget: float) -> bool:
    if base is None:
        return True
    try:
        cost = task.cost_of(w)
    except (ValueError, KeyError, ZeroDivisionError, formulas.FormulaError):
        return False
    return all(cost[k] <= budget * max(base[k], 1.0) for k in ("flops", "bytes"))
