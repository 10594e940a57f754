"""Address-pattern checks: tile indices permuted per element, run-time element offsets inside a row, and gathers
done in PyTorch around the kernel."""

from __future__ import annotations

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function
from d2kgrade.static.patterns.access import access_base, arange_size, aranges, unit_arange
from d2kgrade.static.patterns.config import launch_values
from d2kgrade.static.patterns.roles import input_loads
from d2kgrade.static.registry import CheckResult, check, found, missing


def _per_thread(fl: Flow, fn: Function, ptr: Expr, inner: Expr) -> tuple[list[int], list[int]]:
    """(inner sizes, contiguous elements per thread) of an address's unit-stride arange, per known launch."""
    inners, per = [], []
    others = [a for a in aranges(fl, ptr, fn) if a is not inner]
    for b in launch_values(fl, fn) or [{}]:
        iv = arange_size(fl, fn, inner.args[1], b)
        if iv is None:
            continue
        inners.append(iv)
        rest = 1
        for o in others:
            ov = arange_size(fl, fn, o.args[1], b)
            rest = rest * ov if rest is not None and ov is not None else None
        nw = b.get("num_warps")
        if rest is not None and isinstance(nw, int):
            per.append(int(min(iv, iv * rest / (32 * nw))))
    return inners, per


@check("contiguous_input_access")
def contiguous_input_access(facts: Facts, lang: str, *, inputs: list[int], min_per_thread: int = 1,
                            min_inner: int = 1, stores: bool = False) -> CheckResult:
    """Every load of the given ``inputs`` of ``kernel(...)`` (positions) is a tile whose innermost index is a
    unit-stride ``tl.arange`` (``row * L + l0 + tl.arange(0, BLOCK_L)``), at least one such load exists, and at
    every launch whose sizes are compile-time constants the arange spans >= ``min_inner`` elements and each thread
    holds >= ``min_per_thread`` contiguous ones (``min(BLOCK, tile / (32 * num_warps))``). ``stores``: the
    stores of the kernels that load them satisfy the same. Per-element scalar loads, loads along a strided
    dimension, and loads of other tensors (weights, states) do not make it pass."""

    fl = flow(facts)
    ok: list[Call] = []
    for fn in code(facts, "triton"):
        calls = input_loads(fl, fn, inputs)
        if not calls:
            continue
        if stores:
            calls += [c for kind, c, _ in fl.memory_ops(fn) if kind == "store"]
        for c in calls:
            ptr = access_base(c)
            if c.name.startswith("."):
                ok.append(c)
                continue
            ar = unit_arange(fl, ptr, fn) if ptr is not None else None
            if ar is None or len(ar.args) != 2:
                return missing(f"the access at line {c.line} of {fn.name} has no unit-stride tl.arange innermost "
                               "index", [span(c, "strided or scalar access")], 0.8)
            inners, per = _per_thread(fl, fn, ptr, ar)
            if inners and min(inners) < min_inner:
                return missing(f"the access at line {c.line} of {fn.name} spans {min(inners)} contiguous elements "
                               f"(< {min_inner})", [span(c, "narrow tile")], 0.8)
            if per and min(per) < min_per_thread:
                return missing(f"the access at line {c.line} of {fn.name} gives each thread {min(per)} contiguous "
                               f"elements (< {min_per_thread})", [span(c, "narrow per thread")], 0.8)
            ok.append(c)
    if ok:
        return found(f"{len(ok)} contiguous tile access(es) of the input(s)", [span(c, "contiguous") for c in ok[:4]],
                     0.8)
    return missing("no kernel loads the input(s)", confidence=0.8)
