"""Value-flow checks: gathers, distinct stores, values carried through a loop and stored after it, branches on
loaded data, atomic tickets (the last program to arrive)."""

from __future__ import annotations

from d2kgrade.static.checkutil import code, is_persistent, span
from d2kgrade.static.dataflow import LOADS, Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Function, end_pos, pos
from d2kgrade.static.patterns.access import access_address, shared_accumulate_flush
from d2kgrade.static.patterns.names import ATOMICS
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


def _loaded_names(fl: Flow, fn: Function) -> set[str]:
    """Names assigned directly from a load (indices, targets, positions read from memory)."""
    out = set()
    for a in fn.assigns:
        v = a.value
        while v.kind in ("cast",) and v.args:
            v = v.args[0]
        if v.kind == "call" and (v.op in LOADS or (v.op == ".load" and fn.kind == "jit")):
            out.update(a.targets)
    return out


@check("gather_load")
def gather_load(facts: Facts, lang: str) -> CheckResult:
    """A load whose address depends on a value loaded from memory (``x[col_idx[j]]``, ``logits[row, target]``,
    ``cos[pos[t]]``): a data-dependent gather."""
    fl = flow(facts)
    for fn in code(facts, lang):
        loaded = _loaded_names(fl, fn)
        mem = fl.memory_ops(fn)
        inner = {id(c.expr) for kind, c, _ in mem if kind == "load"}
        for kind, c, _ in mem:
            if kind != "load":
                continue
            addr = access_address(c)
            if addr is None:
                continue
            for n, f, _ in fl.walk(addr, fn, depth=4):
                if f is fn and ((n.kind == "name" and n.op in loaded) or (n is not c.expr and id(n) in inner)):
                    return found(f"gather in {fn.name}: the address of the load at line {c.line} comes from a load",
                                 span(c, "gather"), 0.85)
    return missing("no load whose address depends on loaded data", confidence=0.8)


@check("stores_distinct")
def stores_distinct(facts: Facts, lang: str, *, min: int = 2) -> CheckResult:
    """One kernel writes through at least ``min`` different pointer parameters (several outputs in one pass)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        bases: dict[str, Call] = {}
        for kind, c, b in fl.memory_ops(fn):
            if kind == "store":
                for x in b:
                    bases.setdefault(x, c)
        if len(bases) >= min:
            return found(f"{fn.name} stores to {', '.join(sorted(bases))}",
                         [span(c, f"store to {b}") for b, c in list(bases.items())[:4]], 0.85)
    return missing(f"no kernel stores to {min} different outputs", confidence=0.8)


@check("carried_stored_after_loop")
def carried_stored_after_loop(facts: Facts, lang: str, *, into: str = "persistent", rmw: bool = False) -> CheckResult:
    """Values accumulated across a loop's iterations (``acc += ...``) are stored once after it. ``into:
    persistent`` requires the loop to be a persistent loop over work items (per-program partial sums). ``rmw``: a
    buffer loaded and stored back inside such a loop counts too (partial sums kept in an L2-resident private row,
    read-modify-written for every item, when they do not fit in registers). In CUDA, partials accumulated in a
    ``__shared__`` row inside the loop and flushed to global memory after it count as stored once."""
    fl = flow(facts)
    if rmw:
        for fn in code(facts, lang):
            mem = fl.memory_ops(fn)
            for kind, c, b in mem:
                if kind != "store" or not b or not c.loops:
                    continue
                outer = fn.loop(c.loops[0])
                if outer is None or (into == "persistent" and not is_persistent(fl, fn, outer)):
                    continue
                for k2, c2, b2 in mem:
                    if k2 == "load" and b2 & b and c.loops[0] in c2.loops:
                        return found(f"{fn.name} updates {', '.join(sorted(b & b2))} in place inside the loop at "
                                     f"line {outer.line}", [span(c2, "load"), span(c, "store back")], 0.8)
    for fn in code(facts, lang):
        if fn.lang == "cuda":  # per-CTA partials accumulated in shared memory and flushed once after the loop
            hit = shared_accumulate_flush(fl, facts, fn, persistent=into == "persistent")
            if hit is not None:
                lp, upd, flush = hit
                return found(f"{fn.name} accumulates partials in shared memory over the loop at line {lp.line} and "
                             f"stores them after it", [span(upd, "shared update"), span(flush, "one flush")], 0.8)
        for lid, by_var in fl.carried(fn).items():
            lp = fn.loop(lid)
            if lp is None or (into == "persistent" and not is_persistent(fl, fn, lp)):
                continue
            for kind, c, _ in fl.memory_ops(fn):
                if kind != "store" or lid in c.loops or pos(c) <= end_pos(lp):
                    continue
                v = fl.stored_value(c)
                if v is None:
                    continue
                hit = [var for var in by_var if fl.refs(v, fn, var)]
                if hit:
                    return found(f"{fn.name} accumulates {', '.join(hit)} over the loop at line {lp.line} and "
                                 f"stores after it", [span(lp, "loop"), span(c, "one store")], 0.85)
    return missing("no loop accumulator stored once after its loop", confidence=0.8)


@check("branch_on_loaded")
def branch_on_loaded(facts: Facts, lang: str) -> CheckResult:
    """An ``if`` in a kernel tests a value loaded from memory (a row's target == ignore_index, a flag): a scalar,
    uniform branch instead of per-element masking."""
    fl = flow(facts)
    for fn in code(facts, lang):
        loaded = _loaded_names(fl, fn)
        seen: set[int] = set()
        for a in list(fn.assigns) + list(fn.calls):
            for g in a.guards:
                if id(g) in seen:
                    continue
                seen.add(id(g))
                cond = g.args[0] if g.kind == "unary" and g.op == "not" and g.args else g
                if any(n.kind == "name" and n.op in loaded and f is fn for n, f, _ in fl.walk(cond, fn, depth=3)):
                    return found(f"branch on a loaded value in {fn.name}", Span(cond.line, cond.end_line, "if"), 0.8)
    return missing("no branch on a loaded value", confidence=0.75)


@check("atomic_ticket")
def atomic_ticket(facts: Facts, lang: str) -> CheckResult:
    """The result of an atomic counter update decides a branch (``cnt = tl.atomic_add(counter + t, 1); if cnt ==
    S - 1: merge``): the last program to arrive does the final combine, with no second launch."""
    fl = flow(facts)
    for fn in code(facts, lang):
        tickets = {t for a in fn.assigns for t in a.targets
                   if any(n.kind == "call" and n.op in ATOMICS for n in a.value.walk())}
        if not tickets:
            continue
        for x in list(fn.assigns) + list(fn.calls):
            for g in x.guards:
                cond = g.args[0] if g.kind == "unary" and g.op == "not" and g.args else g
                if any(n.kind == "name" and n.op in tickets for n, f, _ in fl.walk(cond, fn, depth=2) if f is fn):
                    return found(f"atomic ticket decides the combine in {fn.name}",
                                 Span(cond.line, cond.end_line, "last arrival"), 0.85)
    return missing("no branch on the result of an atomic counter", confidence=0.8)
