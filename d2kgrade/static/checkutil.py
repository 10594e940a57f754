"""Small helpers the check modules share: which code a check reads, spans, name matching, exclusivity."""

from __future__ import annotations

from collections.abc import Iterable

from d2kgrade.static.dataflow import Flow, matches
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function, Loop
from d2kgrade.static.registry import Span

__all__ = ["as_list", "code", "exclusive", "is_persistent", "matches", "span", "tile_loop_refs"]


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


def exclusive(g1: tuple[Expr, ...], g2: tuple[Expr, ...]) -> bool:
    """Are two guard stacks mutually exclusive (one sits under ``if c``, the other under its ``else``)?"""
    for a in g1:
        for b in g2:
            if b.kind == "unary" and b.op == "not" and b.args and b.args[0] is a:
                return True
            if a.kind == "unary" and a.op == "not" and a.args and a.args[0] is b:
                return True
    return False


def is_persistent(fl: Flow, fn: Function, loop: Loop) -> bool:
    """A loop that walks work items from the program id with a stride of the program count:
    ``for t in tl.range(pid, n, NUM_SMS)``, ``for (i = blockIdx.x; ...; i += gridDim.x)``, or a while loop whose
    carried index starts at the program id and advances by a non-constant stride."""
    if loop.kind in ("range", "tl.range") and loop.start is not None and loop.step is not None:
        if fl.pid_derived(loop.start, fn):
            v = fl.fold(loop.step, fn)
            return v is None or (isinstance(v, int) and v > 1 and loop.step.kind != "const")
        return False
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
                if st is None:
                    continue
                names = {n.op for n, _, _ in fl.walk(st, fn, depth=2) if n.kind in ("name", "call")}
                if names & {"gridDim.x", "gridDim.y", "tl.num_programs"} or any(
                        p in names for p in fn.params if p != v):
                    return True
    return False


def tile_loop_refs(fl: Flow, fn: Function, loop: Loop, name: str) -> bool:
    """Does the loop's range (start, stop, step) read ``name``?"""
    for e in (loop.start, loop.stop, loop.step):
        if e is not None and fl.refs(e, fn, name):
            return True
    return False
