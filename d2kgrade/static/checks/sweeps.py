"""Sweep checks: loops that re-read the same data, loads hoisted out of loops, kernels that hand data to later
kernels."""

from __future__ import annotations

from d2kgrade.static.checkutil import code, exclusive, is_persistent, span
from d2kgrade.static.dataflow import Flow, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Function, Loop, end_pos, pos
from d2kgrade.static.patterns.access import unit_arange
from d2kgrade.static.patterns.roles import launch_tensors
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


@check("tile_sweeps")
def tile_sweeps(facts: Facts, lang: str, *, min: int = 2, reload: str = "loaded",
                store_in_last: bool = False, max: int | None = None) -> CheckResult:
    """One kernel runs at least ``min`` consecutive loops (siblings, not nested) over the same data: the later loop
    loads a pointer that the first loop loaded (``reload: loaded``), stored (``stored``) or either (``any``).
    ``store_in_last``: the last sweep also stores (it writes the output, e.g. a gradient). ``max``: no more sweeps
    than that over the data (a three-pass max / sum / normalize kernel is not a two-sweep design)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        mem = fl.memory_ops(fn)
        by_loop: dict[int, list[tuple[str, set[str]]]] = {}
        for kind, c, b in mem:
            for lid in c.loops:
                by_loop.setdefault(lid, []).append((kind, b))
        loops = sorted((lp for lp in fn.loops if lp.id in by_loop), key=pos)
        chains: list[tuple[list[Loop], set[str]]] = []
        for i, first in enumerate(loops):
            chain = [first]
            first_bases = {x for kind, b in by_loop[first.id] if reload == "any" or
                           kind == ("load" if reload == "loaded" else "store") for x in b}
            if not first_bases:
                continue
            for later in loops[i + 1:]:
                if later.parent != first.parent or pos(later) <= end_pos(chain[-1]) or exclusive(
                        first.guards, later.guards):
                    continue
                loaded = {x for kind, b in by_loop[later.id] if kind == "load" for x in b}
                if loaded & first_bases:
                    chain.append(later)
            if store_in_last and not any(kind == "store" for kind, _ in by_loop[chain[-1].id]):
                continue
            chains.append((chain, first_bases))
        if max is not None and any(len(chain) > max for chain, _ in chains):
            continue  # this kernel sweeps the data more often than the design does
        for chain, first_bases in chains:
            if len(chain) >= min:
                base = ", ".join(sorted(first_bases & {x for kind, b in by_loop[chain[-1].id] for x in b}))
                return found(f"{len(chain)} sweeps in {fn.name} over {base}",
                             [span(lp, f"sweep {k + 1}") for k, lp in enumerate(chain[:4])], 0.85)
    most = f" and at most {max}" if max is not None else ""
    return missing(f"no kernel with {min}{most} consecutive loops re-reading the same data ({reload})",
                   confidence=0.85)


@check("hoisted_load")
def hoisted_load(facts: Facts, lang: str, *, into: str = "persistent") -> CheckResult:
    """A value loaded before a loop is used inside it (loaded once per program, not per iteration). ``into:
    persistent`` requires the loop to be a persistent loop over work items (``tl.range(pid, n, NUM_PROGS)``);
    ``any`` accepts any loop."""
    fl = flow(facts)
    for fn in code(facts, lang):
        loops = [lp for lp in fn.loops if into == "any" or is_persistent(fl, fn, lp)]
        if not loops:
            continue
        loads = [c for kind, c, _ in fl.memory_ops(fn) if kind == "load"]
        for lp in loops:
            for c in loads:
                if lp.id in c.loops or pos(c) >= pos(lp):
                    continue
                t = fl.taint(fn, None, {id(c.expr)})
                used = [a for a in fn.assigns if lp.id in a.loops and fl.reads_through(a.value, fn, t, set(),
                                                                                       site_of(a))]
                used += [x for x in fn.calls if lp.id in x.loops and x.name in ("tl.store", "store")
                         and fl.reads_through(x.expr, fn, t, set(), site_of(x))]
                if used:
                    return found(f"in {fn.name}, a load at line {c.line} is reused inside the loop at line {lp.line}",
                                 [span(c, "load before the loop"), span(lp, "loop"),
                                  Span(used[0].line, used[0].end_line, "use inside the loop")], 0.85)
    what = "persistent loop" if into == "persistent" else "loop"
    return missing(f"no value loaded before a {what} and reused inside it", confidence=0.8)


@check("producer_consumer_kernels")
def producer_consumer_kernels(facts: Facts, lang: str, *, producer_axis: int | None = None,
                              coalesced_consumer: bool = False) -> CheckResult:
    """Two launched kernels hand data through a buffer: the first stores into a tensor that a later one loads
    (split reductions: partial results, then a combine). ``producer_axis``: the first kernel indexes its grid
    along that axis too (``tl.program_id(1)``, ``blockIdx.y``): the work is split in two dimensions.
    ``coalesced_consumer``: a Triton consumer reads the buffer with a unit-stride innermost ``tl.arange``
    (``p + g*N + cols``), not with lanes across its rows (``p + tl.arange(0, G)*N + col``)."""
    fl = flow(facts)
    launches = [la for la in facts.launches if la.kernel in facts.functions]
    if lang != "any":
        want = "py" if lang == "triton" else "cuda"
        launches = [la for la in launches if facts.functions[la.kernel].lang == want]

    def arg_names(la, params: set[str]) -> dict[str, str]:
        return launch_tensors(fl, la, params)

    for i, la1 in enumerate(launches):
        k1 = facts.functions[la1.kernel]
        if producer_axis is not None and not _uses_axis(fl, k1, producer_axis):
            continue
        stored = {b for kind, _, bs in fl.memory_ops(k1) if kind == "store" for b in bs}
        out1 = arg_names(la1, stored)
        for la2 in launches[i + 1:]:
            k2 = facts.functions[la2.kernel]
            if k2 is k1:
                continue
            loaded = {b for kind, _, bs in fl.memory_ops(k2) if kind == "load" for b in bs}
            in2 = arg_names(la2, loaded)
            shared = {v for v in out1.values() if v in in2.values()}
            if shared and coalesced_consumer and k2.lang == "py":
                params = {p for p, v in in2.items() if v in shared}
                reads = [c for kind, c, bs in fl.memory_ops(k2) if kind == "load" and bs & params]
                if not any((ptr := c.expr.kw("pointer", 0)) is not None and unit_arange(fl, ptr, k2) is not None
                           for c in reads):
                    continue
            if shared:
                return found(f"{k1.name} writes {', '.join(sorted(shared))}, which {k2.name} then reads",
                             [span(la1, f"launch of {k1.name}"), span(la2, f"launch of {k2.name}")], 0.85)
    extra = f" (with a grid axis {producer_axis} in the producer)" if producer_axis is not None else ""
    return missing(f"no kernel stores a buffer that a later kernel loads{extra}", confidence=0.8)


def _uses_axis(fl: Flow, fn: Function, axis: int) -> bool:
    for c in fn.calls:
        if c.name == "tl.program_id":
            a = c.expr.kw("axis", 0)
            if a is not None and fl.fold(a, fn) == axis:
                return True
    dims = {1: "blockIdx.y", 2: "blockIdx.z"}
    if axis in dims:
        return any(dims[axis] in a.value.names() for a in fn.assigns) or any(
            dims[axis] in c.expr.names() for c in fn.calls)
    return False
