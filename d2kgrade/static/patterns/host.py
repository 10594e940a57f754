"""Values the host computes: the alternatives an if-chain or a conditional picks between, and the constexpr
"modes" a launcher selects (one kernel specialised per mode is one path of the design).
"""

from __future__ import annotations

from typing import Any

from d2kgrade.static.dataflow import Flow
from d2kgrade.static.ir import Expr, Function

BOTH = frozenset({True, False})
MAX_ALTERNATIVES = 16


def alternatives(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> frozenset[Any] | None:
    """The constant values a host expression can take, or None when one of them is not known: a constant, both
    arms of ``a if c else b``, every definition of a name (``mode = 0`` / ``if big: mode = 1``), every return of
    an inlined helper, both outcomes of a comparison of run-time values."""
    if depth > 8:
        return None
    v = fl.fold(e, fn)
    if v is not None:
        return frozenset({v})
    if e.kind == "const":
        return frozenset({e.value})
    if e.kind == "name" and e.op in fl.facts.consts:
        return frozenset({fl.facts.consts[e.op]})
    if e.kind == "ternary" and len(e.args) == 3:
        return _union([alternatives(fl, x, fn, depth + 1) for x in e.args[1:]])
    if e.kind == "other" and e.op == "returns":
        return _union([alternatives(fl, x, fn, depth + 1) for x in e.args])
    if e.kind == "cmp":
        return BOTH
    if e.kind == "name":
        defs = fl.defs(e.op, fn)
        if not defs or any(d.index is not None or d.loops for d in defs):
            return None
        return _union([alternatives(fl, d.value, fn, depth + 1) for d in defs])
    return None


def _union(parts: list[frozenset[Any] | None]) -> frozenset[Any] | None:
    if any(p is None for p in parts):
        return None
    out: frozenset[Any] = frozenset().union(*parts)  # type: ignore[arg-type]
    return out if len(out) <= MAX_ALTERNATIVES else None


def branch_params(kfn: Function) -> set[str]:
    """Constexpr parameters of a jit kernel that its ``if`` conditions test (``if MODE == 0:``, ``if USE_DOT:``)."""
    out: set[str] = set()
    for x in list(kfn.assigns) + list(kfn.calls) + list(kfn.loops):
        for g in x.guards:
            out |= {n.op for n in g.walk() if n.kind == "name" and n.op in kfn.constexprs}
    return out


def constexpr_modes(fl: Flow, kfn: Function) -> dict[str, frozenset[Any]]:
    """The constexpr parameters a kernel branches on that its launches set to two or more known values: each value
    compiles a different path of the kernel (a mode the launcher selects)."""
    out: dict[str, frozenset[Any]] = {}
    for p in sorted(branch_params(kfn)):
        values: set[Any] = set()
        for la in fl.launches_of(kfn):
            caller = fl.facts.functions.get(la.caller)
            arg = fl.launch_arg(la, kfn, p)
            alts = alternatives(fl, arg, caller) if arg is not None and caller is not None else None
            if alts is None:
                values = set()
                break
            values |= alts
        if len(values) >= 2:
            out[p] = frozenset(values)
    return out
