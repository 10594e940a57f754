"""Small helpers the check modules share: which code a check reads, spans, name matching, exclusivity."""

from __future__ import annotations

from collections.abc import Iterable

from d2kgrade.static.dataflow import Flow, matches
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function, Loop
from d2kgrade.static.registry import Span

__all__ = ["as_list", "code", "exclusive", "grid_sized", "is_persistent", "matches", "span", "tile_loop_refs"]


def as_list(x: str | Iterable[str] | None) -> list[str]:
    """A check argument that may be one name or a list of names."""
    if x is None:
        return []
    return [x] if isinstance(x, str) else list(x)


def code(facts: Facts, lang: str) -> list[Function]:
    """Reachable device functions of the rubric entry's language (``any``: both)."""
    return facts.kernels(None if lang == "any" else lang)


def span(x: Call | Expr | Loop | Function, note: str = "") -> Span:
    """The span of a call, expression, loop or function."""
    return Span(x.line, x.end_line if x.end_line >= x.line else x.line, note)


def deciding_condition(g1: tuple[Expr, ...], g2: tuple[Expr, ...]) -> Expr | None:
    """The condition ``c`` when one guard stack sits under ``if c`` and the other under its ``else``; else None."""
    for a in g1:
        for b in g2:
            if b.kind == "unary" and b.op == "not" and b.args and b.args[0] is a:
                return a
            if a.kind == "unary" and a.op == "not" and a.args and a.args[0] is b:
                return b
    return None


def exclusive(g1: tuple[Expr, ...], g2: tuple[Expr, ...]) -> bool:
    """Are two guard stacks mutually exclusive (one sits under ``if c``, the other under its ``else``)?"""
    return deciding_condition(g1, g2) is not None


def is_persistent(fl: Flow, fn: Function, loop: Loop) -> bool:
    """A loop that walks work items from the program id with a stride of the program count:
    ``for t in tl.range(pid, n, NUM_SMS)``, ``for (i = blockIdx.x; ...; i += gridDim.x)``, or a while loop whose
    carried index starts at the program id and advances by a non-constant stride."""
    if loop.kind in ("range", "tl.range") and loop.start is not None and loop.step is not None:
        return fl.pid_derived(loop.start, fn) and grid_sized(fl, fn, loop.step)
    if loop.kind in ("for", "while"):
        var = loop.var
        carried = fl.carried(fn).get(loop.id, {})
        cands = [var] if var else list(carried)
        for v in cands:
            if v is None:
                continue
            init = [a for a in fn.defs().get(v, []) if loop.id not in a.loops]
            if loop.start is not None and var == v:
                init_exprs = [loop.start]
            else:
                init_exprs = [a.value for a in init]
            if not any(fl.pid_derived(e, fn) for e in init_exprs):
                continue
            steps = [loop.step] if loop.step is not None and var == v else [a.value for a in carried.get(v, [])]
            for st in steps:
                if st is not None and st.kind == "bin" and st.op == "+" and len(st.args) == 2:
                    # tile += NUM_SMS (tile = tile + NUM_SMS): the increment is the other operand
                    st = next((b for a, b in (st.args, st.args[::-1]) if a.kind == "name" and a.op == v), st)
                if st is not None and grid_sized(fl, fn, st):
                    return True
    return False


def grid_sized(fl: Flow, fn: Function, step: Expr) -> bool:
    """Is ``step`` the number of programs: ``tl.num_programs``/``gridDim``, or a kernel parameter that every launch
    sets from the same host value as the grid (``k[(P,)](..., NUM_PROGS=P)``)?"""
    for n, f, _ in fl.walk(step, fn, depth=4):
        if (n.kind == "call" and n.op == "tl.num_programs") or (n.kind == "name" and n.op.startswith("gridDim")):
            return True
    root = fl.root(step, fn)
    if root.kind != "name" or root.op not in fn.params:
        return False
    for la in fl.launches_of(fn):  # one launch whose grid is sized by the value passed as the stride
        caller = fl.facts.functions.get(la.caller)
        arg = fl.launch_arg(la, fn, root.op)
        if caller is None or arg is None or la.grid is None:
            continue
        const = fl.fold(arg, caller)
        if const is not None:  # a compile-time stride (BK = 64) is the program count only if the grid is that value
            dims = la.grid.args if la.grid.kind == "tuple" else (la.grid,)
            if any(fl.fold(d, caller) == const for d in dims):
                return True
            continue
        arg_names = {n.op for n, _, _ in fl.walk(arg, caller, depth=1) if n.kind == "name"}
        grid_names = {n.op for n, _, _ in fl.walk(la.grid, caller, depth=1) if n.kind == "name"}
        grid_names -= {"triton.cdiv", "min", "max", "triton.next_power_of_2"}
        if arg_names & grid_names:
            return True
        # a grid closure reads the launcher's local by its plain name (num_sms) where the flattened launch has
        # the renamed local (num_sms@__call__3)
        if {n.split("@")[0] for n in arg_names} & {n.split("@")[0] for n in grid_names if "@" not in n}:
            return True
        if arg.kind == "name" and any(_is_value(fl, caller, d, arg.op, 0) for d in _grid_dims(la.grid)):
            return True  # a grid extent is the value passed as the stride (min(meta["NUM_PROGS"], bound))
    return False


def control_names(fl: Flow, e: Expr, fn: Function, depth: int = 3) -> set[str]:
    """Names (and callee names) read by the ``if`` conditions under which the definitions of the names in ``e``
    are made: what an if-chain of literals (``num_warps = 4; if BLOCK >= 2048: num_warps = 8``) depends on."""
    out: set[str] = set()
    for n, f, _ in fl.walk(e, fn, depth=depth):
        if n.kind != "name" or f is not fn:
            continue
        for d in fl.defs(n.op, fn):
            for g in d.guards:
                out |= {x.op for x, _, _ in fl.walk(g, fn, depth=depth) if x.kind in ("name", "call")}
    return out


def _grid_dims(grid: Expr) -> tuple[Expr, ...]:
    return grid.args if grid.kind == "tuple" else (grid,)


def _is_value(fl: Flow, fn: Function, e: Expr, name: str, depth: int) -> bool:
    """Is ``e`` the value of ``name`` (through plain copies, ``min(...)`` caps and constant-key dict lookups)?"""
    if depth > 6:
        return False
    if e.kind == "name":
        if e.op == name:
            return True
        defs = fl.defs(e.op, fn)
        return len(defs) == 1 and _is_value(fl, fn, defs[0].value, name, depth + 1)
    if e.kind == "call" and e.op == "min":
        return any(_is_value(fl, fn, a, name, depth + 1) for a in e.args)
    if e.kind == "sub" and len(e.args) == 2 and e.args[1].kind == "const" and isinstance(e.args[1].value, str):
        table = e.args[0]
        for _ in range(6):  # through copies of the dict (meta@grid = meta)
            defs = fl.defs(table.op, fn) if table.kind == "name" else []
            if len(defs) != 1:
                break
            table = defs[0].value
        if table.kwargs and e.args[1].value in table.kwargs:
            return _is_value(fl, fn, table.kwargs[e.args[1].value], name, depth + 1)
    return False


def tile_loop_refs(fl: Flow, fn: Function, loop: Loop, name: str) -> bool:
    """Does the loop's range (start, stop, step) read ``name``?"""
    for e in (loop.start, loop.stop, loop.step):
        if e is not None and fl.refs(e, fn, name):
            return True
    return False
