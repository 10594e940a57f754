"""Reductions and online normalisers: a running max that rescales a running sum."""

from __future__ import annotations

from d2kgrade.static.checkutil import matches
from d2kgrade.static.dataflow import EXPS, MAXES, Flow
from d2kgrade.static.ir import Assign, Expr, Function, Loop


def online(fl: Flow, fn: Function, lp: Loop) -> tuple[str, str] | None:
    """(running max, rescaled sum) carried by ``lp``: an online softmax in that loop."""
    by_var = fl.carried(fn).get(lp.id, {})
    for m, ups in by_var.items():
        if not any(is_max_update(fl, fn, a, m, lp) for a in ups):
            continue
        for s, ups_s in by_var.items():
            if s != m and any(rescale(fl, fn, a, s, m, lp) is not None for a in ups_s):
                return m, s
    return None


def is_max_update(fl: Flow, fn: Function, a: Assign, var: str, loop) -> bool:
    e, f, env, _ = fl.def_value(a, fn, None, 0)
    for node, nf, nenv in fl.walk(e, f, env, within=loop):
        if node.kind == "call" and node.op in MAXES:
            if any(fl.refs(arg, nf, var, fn, nenv, within=loop) for arg in node.args):
                return True
        if node.kind == "ternary" and node.args and node.args[0].kind == "cmp" and node.args[0].op in (">", "<"):
            if fl.refs(node.args[0], nf, var, fn, nenv, within=loop):
                return True
    return False


def rescale(fl: Flow, fn: Function, a: Assign, s: str, m: str, loop) -> Expr | None:
    """A product ``s * exp(... m ...)`` in the update of ``s``."""
    e, f, env, _ = fl.def_value(a, fn, None, 0)
    for node, nf, nenv in fl.walk(e, f, env, within=loop):
        if node.kind != "bin" or node.op != "*" or len(node.args) != 2:
            continue
        for x, y in (node.args, reversed(node.args)):
            if not fl.refs(x, nf, s, fn, nenv, within=loop):
                continue
            for sub, sf, senv in fl.walk(y, nf, nenv, within=loop):
                if sub.kind == "call" and (sub.op in EXPS or matches(sub.op, EXPS)) and any(
                        fl.refs(arg, sf, m, fn, senv, within=loop) for arg in sub.args):
                    return node
    return None


def reduced_value(fl: Flow, e: Expr, fn: Function) -> Expr | None:
    """The reduction ``e`` is derived from: in this kernel (:meth:`Flow.reduction_derived`), or in an earlier
    kernel that stored a reduced value to the buffer this kernel loads ``e`` from (a row sum reduced by a stats
    kernel, then inverted by the normalising kernel)."""
    red = fl.reduction_derived(e, fn)
    if red is not None:
        return red
    for n, f, _ in fl.walk(e, fn, depth=4):
        if f is not fn or n.kind != "call" or n.op not in ("tl.load", "load"):
            continue
        ptr = n.kw("pointer", 0)
        for p in fl.bases(ptr, fn) if ptr is not None else set():
            for k, st in fl.producers(fn, p):
                v = fl.stored_value(st)
                if v is not None and fl.reduction_derived(v, k) is not None:
                    return n
    return None
