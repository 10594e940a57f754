"""CUDA-specific checks: shared memory, unrolling, launch bounds, stride loops, warp-per-row mapping, register
arrays, cooperative groups."""

from __future__ import annotations

import re

from d2kgrade.static.checkutil import code, is_persistent, span
from d2kgrade.static.dataflow import flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


@check("shared_memory")
def shared_memory(facts: Facts, lang: str, *, min_buffers: int = 1) -> CheckResult:
    """Reachable CUDA code declares at least ``min_buffers`` ``__shared__`` buffers (static or ``extern``)."""
    bufs = [b for b in facts.shared if b.func in facts.reachable or (not b.func and "cuda" in facts.languages)]
    if len(bufs) >= min_buffers:
        return found(f"{len(bufs)} __shared__ buffer(s): {', '.join(b.name for b in bufs[:4])}",
                     [Span(b.line, b.line, f"__shared__ {b.type} {b.name}") for b in bufs[:4]], 0.9)
    return missing(f"{len(bufs)} __shared__ buffer(s), fewer than {min_buffers}", confidence=0.9)


@check("pragma_unroll")
def pragma_unroll(facts: Facts, lang: str) -> CheckResult:
    """A loop of reachable CUDA code is unrolled with ``#pragma unroll`` (or a Triton ``tl.static_range``)."""
    for fn in code(facts, lang):
        for lp in fn.loops:
            if lp.unroll:
                return found(f"unrolled loop in {fn.name}", span(lp, "#pragma unroll / static_range"), 0.9)
    return missing("no #pragma unroll / tl.static_range loop", confidence=0.85)


@check("launch_bounds")
def launch_bounds(facts: Facts, lang: str) -> CheckResult:
    """A reachable ``__global__`` function declares ``__launch_bounds__``."""
    for fn in code(facts, "cuda"):
        if fn.launch_bounds is not None:
            return found(f"__launch_bounds__ on {fn.name}", span(fn.launch_bounds, "__launch_bounds__"), 0.95)
    return missing("no __launch_bounds__", confidence=0.9)


def _stride_kind(names: set[str]) -> str | None:
    if any(n.startswith("gridDim") for n in names):
        return "grid"
    if any(n.startswith("blockDim") for n in names):
        return "block"
    return None


@check("stride_loop")
def stride_loop(facts: Facts, lang: str, *, kind: str = "grid") -> CheckResult:
    """A CUDA loop strides by the whole grid (``kind: grid``: ``i += blockDim.x * gridDim.x`` from a global thread
    index, or ``r += gridDim.x`` from ``blockIdx.x``) or by the block (``kind: block``: ``i = threadIdx.x;
    i += blockDim.x``, the threads of one block sweeping a row)."""
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        for lp in fn.loops:
            if lp.step is None:
                continue
            step_names = {n.op for n, _, _ in fl.walk(lp.step, fn, depth=3) if n.kind == "name"}
            start_names = {n.op for n, _, _ in fl.walk(lp.start, fn, depth=3) if n.kind == "name"} if lp.start else set()
            sk = _stride_kind(step_names)
            if kind == "grid" and (sk == "grid" or is_persistent(fl, fn, lp)):
                return found(f"grid-stride loop in {fn.name}", span(lp, "grid-stride loop"), 0.9)
            if kind == "block" and sk == "block" and any(n.startswith("threadIdx") for n in start_names):
                return found(f"block-stride loop in {fn.name}", span(lp, "block-stride loop"), 0.9)
    return missing(f"no {kind}-stride loop in reachable CUDA code", confidence=0.85)


@check("warp_per_row")
def warp_per_row(facts: Facts, lang: str) -> CheckResult:
    """Each warp owns a row: a warp index (``threadIdx.x / 32``, ``>> 5``, ``/ warpSize``) is combined with
    ``blockIdx`` into the row index, and the lane index strides the columns."""
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        warp_vars = set()
        for a in fn.assigns:
            for n in a.value.walk():
                if n.kind == "bin" and len(n.args) == 2 and "threadIdx.x" in n.args[0].names() and (
                        (n.op == "/" and (fl.fold(n.args[1], fn) == 32 or "warpSize" in n.args[1].names()))
                        or (n.op == ">>" and fl.fold(n.args[1], fn) == 5)):
                    warp_vars.update(a.targets)
                    break
        if not warp_vars:
            continue
        for a in fn.assigns:
            names = {n.op for n, _, _ in fl.walk(a.value, fn, depth=3) if n.kind == "name"}
            if names & warp_vars and any(x.startswith("blockIdx") for x in names) and not set(a.targets) & warp_vars:
                return found(f"row index from blockIdx and warp id in {fn.name}",
                             Span(a.line, a.end_line, "row = block * warps + warp"), 0.85)
    return missing("no row index built from a warp index", confidence=0.8)


_ARRAY = re.compile(r"^(?P<type>.+?)\s+(?P<name>\w+)\[(?P<dims>.*)\]$")


@check("register_array")
def register_array(facts: Facts, lang: str, *, min_size: int = 2) -> CheckResult:
    """A reachable CUDA kernel keeps a per-thread array of at least ``min_size`` elements in registers
    (``float v[8];``, a local array of compile-time size, not ``__shared__``)."""
    fl = flow(facts)
    for t in facts.reachable_tokens("array"):
        m = _ARRAY.match(t.text)
        fn = facts.functions.get(t.func)
        if not m or fn is None:
            continue
        size = 1
        for d in m.group("dims").split("]["):
            v = facts.consts.get(d.strip())
            if v is None:
                try:
                    v = int(d.strip().rstrip("uUlL"))
                except ValueError:
                    v = min_size if d.strip() in fn.constexprs else None
            if v is None:
                size = 0
                break
            size *= int(v)
        if size >= min_size:
            return found(f"register array {m.group('name')}[{m.group('dims')}] in {fn.name}",
                         Span(t.line, t.end_line, "per-thread array"), 0.8)
    _ = fl
    return missing(f"no per-thread register array of >= {min_size} elements", confidence=0.75)


@check("cooperative_groups")
def cooperative_groups(facts: Facts, lang: str) -> CheckResult:
    """Reachable CUDA code uses cooperative groups (``cg::this_thread_block``, ``tiled_partition``,
    ``cg::reduce``, grid sync)."""
    hits = [t for t in facts.reachable_tokens("cg") if t.func]
    if hits:
        return found("cooperative groups", [Span(t.line, t.end_line, t.text[:40]) for t in hits[:4]], 0.9)
    return missing("no cooperative groups", confidence=0.85)
