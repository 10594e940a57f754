"""Sorts and selections: ``tl.sort`` / ``tl.topk`` calls, and sorting networks written out by hand.

A hand-written bitonic network is a sequence of compare-exchange steps: each element is replaced by the larger
or the smaller of itself and a partner (``tl.where(up, tl.maximum(w, other), tl.minimum(w, other))`` with
``other`` a permuted copy of ``w``, or the xor-swap form ``w ^ tl.where(c, w ^ other, 0)``). Such a step orders
``w`` as a sort call would, so a check that asks "are the packed words sorted?" accepts either.
"""

from __future__ import annotations

from dataclasses import dataclass

from d2kgrade.static.dataflow import Flow
from d2kgrade.static.ir import Expr, Function

SORTS = ("tl.sort", "tl.topk")
MAXES = ("tl.maximum", "fmaxf", "max", "tl.max")
MINS = ("tl.minimum", "fminf", "min", "tl.min")


@dataclass(frozen=True)
class SortSite:
    """Where a value is put in order."""

    node: Expr
    """The call (``tl.sort(x)``) or the compare-exchange expression."""
    operand: Expr
    """What is ordered (the sort's argument, or the compare-exchange's first operand)."""
    network: bool
    """A hand-written compare-exchange, not a library sort."""


def compare_exchange(e: Expr) -> Expr | None:
    """The operand ``w`` of a compare-exchange ``tl.where(c, tl.maximum(w, o), tl.minimum(w, o))`` (either order),
    else None."""
    if e.kind != "call" or e.op != "tl.where" or len(e.args) != 3:
        return None
    a, b = e.args[1], e.args[2]
    for hi, lo in ((a, b), (b, a)):
        if (hi.kind == "call" and hi.op in MAXES and lo.kind == "call" and lo.op in MINS and len(hi.args) == 2
                and len(lo.args) == 2 and _same_pair(hi.args, lo.args)):
            return hi.args[0]
    return None


def _same_pair(x: tuple[Expr, ...], y: tuple[Expr, ...]) -> bool:
    def key(e: Expr) -> str:
        return e.op if e.kind == "name" else str(id(e))

    return {key(x[0]), key(x[1])} == {key(y[0]), key(y[1])}


def sort_sites(fl: Flow, fn: Function) -> list[SortSite]:
    """Every place ``fn`` orders values: sort/top-k calls and hand-written compare-exchange steps."""
    def compute() -> list[SortSite]:
        out: list[SortSite] = []
        for c in fn.calls:
            if c.name in SORTS and c.expr.args:
                out.append(SortSite(c.expr, c.expr.args[0], False))
        for a in fn.assigns:
            for n in a.value.walk():
                w = compare_exchange(n)
                if w is not None:
                    out.append(SortSite(n, w, True))
        return out

    return fl.facts.memo(f"sort-sites:{fn.key}:{id(fn)}", compute)
