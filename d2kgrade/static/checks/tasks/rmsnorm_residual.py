"""Static checks of task ``rmsnorm_residual``: the ones only its rubric (``rubrics/rmsnorm_residual.yaml``) uses.

- ``partials_in_fp32``
- ``writes_outputs``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.patterns.roles import buffer_dtype, input_params, output_params
from d2kgrade.static.registry import CheckResult, check, found, missing


@check("writes_outputs")
def writes_outputs(facts: Facts, lang: str, *, min: int = 2) -> CheckResult:
    """One kernel stores to at least ``min`` of the tensors ``kernel(...)`` returns (``residual_out`` and ``y``
    from one launch). A CUDA kernel, whose outputs are allocated in C++, counts its distinct stored pointer
    parameters instead."""
    fl = flow(facts)
    best = 0
    for fn in code(facts, lang):
        stores = [(c, bases) for kind, c, bases in fl.memory_ops(fn) if kind == "store"]
        outs = output_params(fl, fn) if fn.lang == "py" else set(fn.pointer_params)
        hit = {b for _, bases in stores for b in bases if b in outs}
        if len(hit) >= min:
            return found(f"{fn.name} writes {len(hit)} outputs ({', '.join(sorted(hit))})",
                         [span(c, "store") for c, bases in stores if bases & hit][:4], 0.85)
        best = max(best, len(hit))
    return missing(f"no kernel writes {min} of the outputs (at most {best})", confidence=0.8)


@check("partials_in_fp32")
def partials_in_fp32(facts: Facts, lang: str) -> CheckResult:
    """Reduced values that a kernel stores to a workspace (not an input, not an output) go to a buffer the host
    allocated in fp32: partial sums rounded to bf16/fp16 before a second kernel adds them lose the fp32
    accumulation. Passes when no reduction is stored to a workspace; cannot tell when a workspace's dtype is not
    visible."""
    fl = flow(facts)
    unknown = ""
    for fn in code(facts, "triton"):
        ins, outs = input_params(fl, fn), output_params(fl, fn)
        for kind, c, bases in fl.memory_ops(fn):
            if kind != "store" or not bases or bases & (ins | outs):
                continue
            value = fl.stored_value(c)
            if value is None or fl.reduction_derived(value, fn) is None:
                continue
            for b in sorted(bases):
                dt = buffer_dtype(fl, fn, b)
                if dt is None:
                    unknown = unknown or f"{fn.name} stores a reduced value to {b}, whose dtype is not visible"
                elif dt != "fp32" and dt != "fp64":
                    return missing(f"{fn.name} stores reduced partials to {b}, allocated as {dt}",
                                   [span(c, f"partial stored to a {dt} buffer")], 0.85)
    if unknown:
        return CheckResult(None, unknown, confidence=0.0)
    return found("every stored reduction goes to an fp32 buffer (or none is stored)", [], 0.7)
