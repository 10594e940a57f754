"""Static checks of task ``layernorm``: the ones only its rubric (``rubrics/layernorm.yaml``) uses.

- ``chan_merge``
- ``stores_row_stats``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import Flow, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function
from d2kgrade.static.patterns.liveness import load_taint
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


@check("chan_merge")
def chan_merge(facts: Facts, lang: str) -> CheckResult:
    """A loop merges running (count, mean, M2) statistics with Chan's formula: a carried M2 is updated with the
    square of a difference of means (``m2 += tm2 + delta * delta * n * tn / (n + tn)``, ``delta = tmean - mean``)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for lid, by_var in fl.carried(fn).items():
            loop = fn.loop(lid)
            for v, ups in by_var.items():
                others = [o for o in by_var if o != v]
                for a in ups:
                    for n, f, env in fl.walk(a.value, fn, within=loop, depth=4):
                        if n.kind != "bin" or n.op not in ("*", "**") or len(n.args) != 2:
                            continue
                        ops = n.args if n.op == "*" else (n.args[0],)
                        if all(any(d.kind == "bin" and d.op == "-" and any(
                                fl.refs(s, f, o, fn, env, within=loop) for s in d.args for o in others)
                                for d, _, _ in fl.walk(x, f, env, within=loop, depth=3)) for x in ops):
                            return found(f"Chan merge of running statistics in {fn.name}",
                                         [Span(a.line, a.end_line, f"{v} merged"), span(loop, "loop")], 0.85)  # type: ignore
    return missing("no loop-carried (mean, M2) merge with a squared difference of means", confidence=0.8)


@check("stores_row_stats")
def stores_row_stats(facts: Facts, lang: str, *, min: int = 2) -> CheckResult:
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

    seeds = {id(x.expr) for kind, x, _ in fl.memory_ops(fn) if kind == "load"}
    return fl.reads_through(v, fn, load_taint(fl, fn), seeds, site_of(c))
