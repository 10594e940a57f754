"""Value-flow checks: gathers, what gets stored (row statistics, several outputs), read-modify-write buffers,
accumulators written out after a loop, and branches on loaded values."""

from __future__ import annotations

from d2kgrade.static.checkutil import code, is_persistent, span
from d2kgrade.static.dataflow import LOADS, Flow, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function, end_pos, pos
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


def _address(c: Call) -> Expr | None:
    return c.expr.kw("pointer", 0) if not c.name.startswith(".") else (c.expr.args[0] if c.expr.args else None)


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
            addr = _address(c)
            if addr is None:
                continue
            for n, f, _ in fl.walk(addr, fn, depth=4):
                if f is fn and ((n.kind == "name" and n.op in loaded) or (n is not c.expr and id(n) in inner)):
                    return found(f"gather in {fn.name}: the address of the load at line {c.line} comes from a load",
                                 span(c, "gather"), 0.85)
    return missing("no load whose address depends on loaded data", confidence=0.8)


@check("stores_row_stats")
def stores_row_stats(facts: Facts, lang: str, *, min: int = 2) -> CheckResult:  # noqa: A002
    """One kernel stores at least ``min`` reduced values (per-row statistics such as mean and rstd, or a loss)."""
    fl = flow(facts)
    best = 0
    for fn in code(facts, lang):
        hits = []
        for kind, c, b in fl.memory_ops(fn):
            if kind != "store":
                continue
            v = fl.stored_value(c)
            if v is not None and fl.reduction_derived(v, fn) is not None and not _elementwise(fl, fn, c, v):
                hits.append(c)
        best = max(best, len(hits))
        if len(hits) >= min:
            return found(f"{fn.name} stores {len(hits)} reduced values", [span(c, "row statistic") for c in hits[:4]],
                         0.85)
    return missing(f"no kernel stores {min} reduced values (best: {best})", confidence=0.8)


def _elementwise(fl: Flow, fn: Function, c: Call, v: Expr) -> bool:
    from d2kgrade.static.checks.reductions import _load_taint

    seeds = {id(x.expr) for kind, x, _ in fl.memory_ops(fn) if kind == "load"}
    return fl.reads_through(v, fn, _load_taint(fl, fn), seeds, site_of(c))


@check("stores_distinct")
def stores_distinct(facts: Facts, lang: str, *, min: int = 2) -> CheckResult:  # noqa: A002
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


@check("read_modify_write")
def read_modify_write(facts: Facts, lang: str, *, in_loop: bool = True) -> CheckResult:
    """A kernel loads and stores the same buffer (``in_loop``: inside one loop): a private partial row updated in
    place (L2-resident), with no atomics."""
    fl = flow(facts)
    for fn in code(facts, lang):
        mem = fl.memory_ops(fn)
        for kind, c, b in mem:
            if kind != "store" or not b or (in_loop and not c.loops):
                continue
            for k2, c2, b2 in mem:
                if k2 == "load" and b2 & b and (not in_loop or set(c.loops) & set(c2.loops)):
                    return found(f"{fn.name} reads and writes {', '.join(sorted(b & b2))}"
                                 + (" in one loop" if in_loop else ""), [span(c2, "load"), span(c, "store")], 0.85)
    return missing("no buffer is loaded and stored back" + (" inside a loop" if in_loop else ""), confidence=0.8)


@check("carried_stored_after_loop")
def carried_stored_after_loop(facts: Facts, lang: str, *, into: str = "persistent", rmw: bool = False) -> CheckResult:
    """Values accumulated across a loop's iterations (``acc += ...``) are stored once after it. ``into:
    persistent`` requires the loop to be a persistent loop over work items (per-program partial sums). ``rmw``: a
    buffer loaded and stored back inside such a loop counts too (partial sums kept in an L2-resident private row,
    read-modify-written for every item, when they do not fit in registers)."""
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


ATOMICS = ("tl.atomic_add", "tl.atomic_xchg", "tl.atomic_cas", "atomicAdd", "atomicInc", "atomicCAS", "atomicExch")


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


@check("dynamic_work_id")
def dynamic_work_id(facts: Facts, lang: str) -> CheckResult:
    """Work items are claimed at run time from an atomic counter (``tile = tl.atomic_add(counter, 1)``) and the
    claimed id addresses the data, instead of taking the program id."""
    fl = flow(facts)
    for fn in code(facts, lang):
        ids = {t: a for a in fn.assigns for t in a.targets
               if any(n.kind == "call" and n.op in ATOMICS and len(n.args) >= 2 and fl.fold(n.args[1], fn) == 1
                      for n in a.value.walk())}
        if not ids:
            continue
        for kind, c, _ in fl.memory_ops(fn):
            addr = _address(c)
            if addr is not None and any(fl.refs(addr, fn, t) for t in ids):
                a = next(iter(ids.values()))
                return found(f"work id claimed with an atomic counter in {fn.name}",
                             [Span(a.line, a.end_line, "atomic work id"), span(c, "addressed by it")], 0.85)
    return missing("no work id taken from an atomic counter", confidence=0.8)


@check("polling_loop")
def polling_loop(facts: Facts, lang: str) -> CheckResult:
    """A ``while`` loop waits on memory written by other programs: its condition depends on a value loaded (or
    atomically read) inside the loop (a decoupled look-back, a flag wait)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for lp in fn.loops:
            if lp.kind != "while" or lp.stop is None:
                continue
            inside = _memory_dependent(fl, fn, lp)
            if lp.stop.names() & inside or any(n.kind == "call" and (n.op in LOADS or n.op in ATOMICS)
                                               for n in lp.stop.walk()):
                return found(f"polling loop in {fn.name}", span(lp, "wait on other programs"), 0.8)
    return missing("no loop that waits on values written by other programs", confidence=0.8)


def _memory_dependent(fl: Flow, fn: Function, lp) -> set[str]:  # noqa: ANN001
    """Names assigned in loop ``lp`` whose values depend, through data or through the ``if`` conditions guarding
    their assignments, on memory read inside the loop."""
    inside = [a for a in fn.assigns if lp.id in a.loops]
    direct = {id(a) for a in inside if any(n.kind == "call" and (n.op in LOADS or n.op in ATOMICS)
                                           for e in (a.value, *a.guards) for n in e.walk())}
    return dependents(inside, {t for a in inside if id(a) in direct for t in a.targets})


def dependents(assigns: list, dep: set[str]) -> set[str]:  # noqa: ANN001
    """``dep`` grown to a fixpoint with the targets of ``assigns`` whose value or guarding ``if`` conditions read
    a name already in it (updated in place and returned)."""
    changed = True
    while changed:
        changed = False
        for a in assigns:
            if set(a.targets) <= dep:
                continue
            names = a.value.names().union(*(g.names() for g in a.guards)) if a.guards else a.value.names()
            if names & dep:
                dep.update(a.targets)
                changed = True
    return dep


@check("conditional_launch")
def conditional_launch(facts: Facts, lang: str, *, min: int = 1) -> CheckResult:  # noqa: A002
    """At least ``min`` kernel launches sit under a host-side ``if`` on run-time values (a split count chosen by a
    heuristic, a combine kernel launched only when needed)."""
    hits = []
    for f in facts.hosts():
        for c in f.calls:
            if c.name == "launch" and c.guards:
                hits.append(c)
    if len(hits) >= min:
        return found(f"{len(hits)} launch(es) under host-side conditions", [span(c, "conditional launch")
                                                                            for c in hits[:4]], 0.75)
    return missing("every launch happens unconditionally", confidence=0.7)
