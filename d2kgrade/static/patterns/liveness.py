"""Which calls and statements run (dead branches, guards on loaded data) and what taints a value."""

from __future__ import annotations

from d2kgrade.static.dataflow import Flow, Taint, site_of
from d2kgrade.static.ir import Call, Expr, Function
from d2kgrade.static.patterns.access import is_global_read, own_loads_feeding


def guard_loaded(fl: Flow, fn: Function, name: str) -> bool:
    """Is some definition of ``name`` made under an ``if`` that compares a loaded value (a binary search step:
    ``if (starts[mid] <= tile) lo = mid;``)?"""
    for d in fn.defs().get(name, []):
        for g in d.guards:
            cond = g.args[0] if g.kind == "unary" and g.op == "not" and g.args else g
            if any(n.kind == "cmp" for n in cond.walk()) and own_loads_feeding(fl, cond, fn, depth=3):
                return True
    return False


def data_dependent(fl: Flow, e: Expr, fn: Function) -> Expr | None:
    """A load that ``e`` depends on, by value or through the guard of a definition it reads, if any."""
    for n, f, _ in fl.walk(e, fn, depth=6):
        if f is not fn:
            continue
        if is_global_read(n, fn):
            return n
        if n.kind == "name" and guard_loaded(fl, fn, n.op):
            return n
    return None


def truth(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> bool | None:
    """The truth value of a host expression when it is a constant (literal, module constant, single-definition
    local, ``not``), else None."""
    if depth > 6 or e is None:
        return None
    if e.kind == "const":
        return bool(e.value) if isinstance(e.value, (bool, int, float, str)) else None
    if e.kind == "unary" and e.op in ("not", "!") and e.args:
        t = truth(fl, e.args[0], fn, depth + 1)
        return None if t is None else not t
    if e.kind == "name":
        if e.op in ("True", "true"):
            return True
        if e.op in ("False", "false"):
            return False
        if e.op in fl.facts.consts and isinstance(fl.facts.consts[e.op], (bool, int, float)):
            return bool(fl.facts.consts[e.op])
        defs = fl.defs(e.op, fn)
        if len(defs) == 1 and not defs[0].loops:
            return truth(fl, defs[0].value, fn, depth + 1)
    return None


def guard_dead(fl: Flow, fn: Function, g: Expr) -> bool:
    """Is guard ``g`` (a kernel parameter, or ``not`` of one) false at every launch?"""
    want = True
    if g.kind == "unary" and g.op in ("not", "!") and g.args:
        g, want = g.args[0], False
    r = fl.root(g, fn)
    if r.kind != "name" or r.op not in fn.params:
        return False
    srcs = fl.param_sources(fn, r.op)
    if not srcs:
        return False
    return all(truth(fl, src, caller) == (not want) for src, caller in srcs)


def dead(fl: Flow, fn: Function, guards: tuple[Expr, ...]) -> bool:
    key = ("qhb-dead", fn.key, id(fn))
    memo = fl.facts.memo(str(key), dict)
    out = False
    for g in guards:
        hit = memo.get(id(g))
        if hit is None:
            hit = memo[id(g)] = guard_dead(fl, fn, g)
        if hit:
            out = True
            break
    return out


def live_calls(fl: Flow, fn: Function) -> list[Call]:
    return [c for c in fn.calls if not dead(fl, fn, c.guards)]


def load_taint_and_seeds(fl: Flow, fn: Function) -> tuple[Taint, set[int]]:
    seeds = {id(c.expr) for kind, c, _ in fl.memory_ops(fn) if kind == "load"}
    taint = fl.facts.memo(f"qhb-load-taint:{fn.key}:{id(fn)}", lambda: fl.taint(fn, None, seeds))
    return taint, seeds


def elementwise(fl: Flow, fn: Function, e: Expr, site=None) -> bool:
    """Does ``e`` carry loaded data element-wise (not only through a reduction)?"""
    taint, seeds = load_taint_and_seeds(fl, fn)
    return fl.reads_through(e, fn, taint, seeds, site)


def is_used(fn: Function, c: Call) -> bool:
    """Is the value of call ``c`` used (inside an assignment or another call's arguments)?"""
    target = c.expr
    for a in fn.assigns:
        if any(n is target for n in a.value.nodes()):
            return True
    for other in fn.calls:
        if other is c or other.expr is target:
            continue
        if any(n is target for n in other.expr.nodes()):
            return True
    return False


def load_taint(fl: Flow, fn: Function) -> Taint:
    def compute() -> Taint:
        seeds = {id(c.expr) for kind, c, _ in fl.memory_ops(fn) if kind == "load"}
        return fl.taint(fn, None, seeds)
    return fl.facts.memo(f"load-taint:{fn.key}", compute)


def evaluated_sites(fn: Function):
    """Every expression of ``fn`` that is evaluated, with where it is read."""
    for a in fn.assigns:
        yield a.value, site_of(a)
    for c in fn.calls:
        if c.name in ("tl.store", "store"):
            yield c.expr, site_of(c)
