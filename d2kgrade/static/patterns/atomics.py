"""Atomic operations and values published through memory (a carried value stored once)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from d2kgrade.static.dataflow import Flow
from d2kgrade.static.ir import Call, Expr, Function, Loop, end_pos, pos
from d2kgrade.static.patterns.liveness import live_calls
from d2kgrade.static.patterns.names import ATOMIC_ADDS


def publishes(fn: Function, c: Call) -> bool:
    return c.name in ("tl.store", "store") or c.name in ATOMIC_ADDS


def published_value(c: Call) -> Expr | None:
    return c.expr.kw("val", 1) if c.name in ATOMIC_ADDS else c.expr.kw("value", 1)


def carry_published_after(fl: Flow, fn: Function, feeds: Callable[[Any], bool]) -> tuple[Loop, str, Call] | None:
    """The first (loop, variable, call) where ``fn`` carries ``variable`` across ``loop``, one of its updates
    satisfies ``feeds``, and a live call after the loop publishes (stores or atomically adds) a value that reads it."""
    for lid, by_var in fl.carried(fn).items():
        lp = fn.loop(lid)
        if lp is None:
            continue
        for var, ups in by_var.items():
            if not any(feeds(u) for u in ups):
                continue
            for c in live_calls(fl, fn):
                if not publishes(fn, c) or lid in c.loops or pos(c) <= end_pos(lp):
                    continue
                v = published_value(c)
                if v is not None and fl.refs(v, fn, var):
                    return lp, var, c
    return None
