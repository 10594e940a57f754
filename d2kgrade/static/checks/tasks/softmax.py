"""Static checks of task ``softmax``: the ones only its rubric (``rubrics/softmax.yaml``) uses.

- ``reciprocal_multiply``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Assign, Expr
from d2kgrade.static.patterns.liveness import evaluated_sites, load_taint
from d2kgrade.static.patterns.names import DIVISIONS
from d2kgrade.static.patterns.reductions import reduced_value
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

RECIPROCALS = {"__frcp_rn", "__frcp_rz", "tl.math.rcp", "libdevice.rcp_rn", "__hrcp", "hrcp", "__fdividef_rcp"}


@check("reciprocal_multiply")
def reciprocal_multiply(facts: Facts, lang: str, *, any_numerator: bool = False) -> CheckResult:
    """A reciprocal of a reduced value is computed once (``inv = 1.0 / s``, ``__frcp_rn(s)``; with
    ``any_numerator`` any constant over it, ``QMAX / amax``) and then multiplies element-wise values. The sum may
    have been reduced by an earlier kernel that stored it (a split row's stats kernel)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        taint = load_taint(fl, fn)
        seeds = {id(c.expr) for kind, c, _ in fl.memory_ops(fn) if kind == "load"}
        recips: list[tuple[Assign, Expr]] = []
        for a in fn.assigns:
            for n in a.value.walk():
                den = None
                one = (lambda x: fl.is_constexpr(x, fn)) if any_numerator else (lambda x: fl.fold(x, fn) == 1)
                if n.kind == "bin" and n.op == "/" and len(n.args) == 2 and one(n.args[0]):
                    den = n.args[1]
                elif n.kind == "call" and n.op in DIVISIONS and len(n.args) == 2 and one(n.args[0]):
                    den = n.args[1]
                elif n.kind == "call" and n.op in RECIPROCALS and n.args:
                    den = n.args[0]
                if den is not None and reduced_value(fl, den, fn) is not None:
                    recips.append((a, n))
        for a, n in recips:
            names = set(a.targets)
            for e, site in evaluated_sites(fn):
                for m in e.walk():
                    if m.kind == "bin" and m.op == "*" and len(m.args) == 2:
                        x, y = m.args
                        for p, q in ((x, y), (y, x)):
                            if (p.names() & names or any(fl.refs(p, fn, t) for t in names)) \
                                    and fl.reads_through(q, fn, taint, seeds, site):
                                return found(f"reciprocal {', '.join(a.targets)} computed once and multiplied in "
                                             f"{fn.name}", [Span(a.line, a.end_line, "reciprocal"),
                                                            span(m, "multiply")], 0.85)
    return missing("no reciprocal of a reduced value that then multiplies element-wise values", confidence=0.8)
