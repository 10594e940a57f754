"""Helpers of the episode tests: a fake evaluator returning real EvalResult records, kernels, a config builder.

``marker_evaluate`` decides by a marker in the source (fast, no torch) and records its calls: the episode loop's
logic. The real evaluator runs in ``test_real_evaluator.py`` on a real Triton kernel with a real bug.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from d2kgrade.records import Environment, EvalResult, OutputError, WorkloadResult

ROOT = Path(__file__).resolve().parents[2]

SOFTMAX_TEMPLATE = '''import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=PAD).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_y + cols, (e / s).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x):
    M, N = x.shape
    y = torch.empty_like(x)
    _softmax_kernel[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(N))
    return y
'''
# Padding lanes loaded as 0.0 add exp(0 - max) to every row's sum: wrong normalization (a classic mask bug).
BUGGY_SOFTMAX = SOFTMAX_TEMPLATE.replace("PAD", "0.0")
FIXED_SOFTMAX = SOFTMAX_TEMPLATE.replace("PAD", "-float('inf')")


def _env() -> Environment:
    return Environment(device="cpu", interpreter=True)


def marker_evaluate(task_id: str, submission: Path, **kw: Any) -> EvalResult:
    """Passes unless the source holds ``BUG``; adds a ``hidden`` workload when asked; records its calls."""
    src = Path(submission).read_text()
    ok = "BUG" not in src
    CALLS.append({"task": task_id, "name": Path(submission).name, "source": src, **kw})
    status = "passed" if ok else "incorrect"
    err = OutputError(name="y", ok=ok, reason="" if ok else "12 of 37000 elements out of tolerance",
                      max_abs_err=0.0 if ok else 0.25, max_rel_err=0.0 if ok else 3.0, n_bad=0 if ok else 12,
                      n_total=37000, first_bad_index=None if ok else [4, 999])
    wls = [WorkloadResult(name="smoke", status=status, trials=3, errors=[err], params={"M": 37, "N": 1000})]
    if kw.get("hidden"):
        wls.append(WorkloadResult(name="hidden", status=status, params={"M": 53, "N": 611}))
    return EvalResult(task=task_id, status=status, correct=ok, workloads=wls, environment=_env(),
                      message="" if ok else "incorrect on smoke")


CALLS: list[dict[str, Any]] = []


def tool_call(name: str, cid: str | None = None, **args: Any) -> dict[str, Any]:
    call = {"name": name, "arguments": json.dumps(args)}
    if cid:
        call["id"] = cid
    return call


def step(*calls: dict[str, Any], content: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"content": content, "tool_calls": list(calls), **extra}


def config(base_url: str | None = None, **kw: Any):
    from runner.agent.config import RunConfig

    base = dict(model="fake-model", base_url=base_url, tasks=["softmax"], arms=["guided"], device="cpu",
                backoff_s=0.01, backoff_max_s=0.05, api_retries=3, request_timeout_s=5.0)
    base.update(kw)
    return RunConfig(**base)
