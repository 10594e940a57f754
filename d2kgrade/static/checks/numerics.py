"""Numerics checks: exp2 with log2(e) folded in, and casts."""

from __future__ import annotations

import math

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

EXP2 = {"tl.exp2", "libdevice.exp2", "exp2f", "exp2", "__exp2f", "h2exp2", "hexp2", "fast_exp2"}
LOG2E = 1.0 / math.log(2.0)


@check("exp2_log2e")
def exp2_log2e(facts: Facts, lang: str, *, tol: float = 1e-3) -> CheckResult:
    """Exponentials use ``exp2`` on arguments scaled by log2(e) (1.4426950408889634, a named constant with that
    value, ``1/math.log(2)``, or a division by ln 2), followed through variables, loop-carried maxima, helper
    returns and kernel arguments computed on the host. Inline ``ex2.approx`` PTX counts as exp2."""
    fl = flow(facts)
    n_exp2 = 0
    for fn in code(facts, lang):
        sites = [c.expr for c in fn.calls if c.name in EXP2]
        sites += [c.expr for c in fn.calls if c.name == "asm" and "ex2.approx" in str(c.expr.value)]
        for e in sites:
            n_exp2 += 1
            for node, f, env in fl.walk(e, fn, depth=8, params=True):
                if node.kind != "bin" or len(node.args) != 2:
                    continue
                vals = [fl.fold(a, f, env) for a in node.args]
                if node.op == "*" and any(isinstance(v, (int, float)) and abs(v - LOG2E) < tol for v in vals):
                    return found(f"exp2 in {fn.name} on values scaled by log2(e)",
                                 [span(e, "exp2"), Span(node.line, node.end_line, "x * log2(e)")], 0.9)
                if node.op == "/" and isinstance(vals[1], (int, float)) and abs(vals[1] - math.log(2.0)) < tol:
                    return found(f"exp2 in {fn.name} on values divided by ln(2)",
                                 [span(e, "exp2"), Span(node.line, node.end_line, "x / ln(2)")], 0.9)
            for node, f, env in fl.walk(e, fn, depth=8, params=True):
                if node.kind in ("name", "const") and (v := fl.fold(node, f, env)) is not None and isinstance(
                        v, (int, float)) and abs(v - LOG2E) < tol:
                    return found(f"exp2 in {fn.name} with log2(e) folded into a constant",
                                 [span(e, "exp2"), Span(node.line, node.end_line, "log2(e)")], 0.85)
    if n_exp2:
        return missing(f"{n_exp2} exp2 call(s), but no log2(e) scaling of their arguments", confidence=0.8)
    return missing("no exp2 in reachable kernels", confidence=0.9)


@check("casts_to")
def casts_to(facts: Facts, lang: str, *, dtype: str) -> CheckResult:
    """Reachable device code converts values to ``dtype`` (``fp32``, ``bf16``, ``int64``...): ``.to(...)``,
    ``tl.cast``, C casts and conversion intrinsics."""
    hits = [c for f in code(facts, lang) for c in f.calls if c.expr.kind == "cast" and c.expr.op == dtype]
    if hits:
        return found(f"conversion to {dtype}", [span(c, "cast") for c in hits[:4]], 0.85)
    return missing(f"no conversion to {dtype}", confidence=0.8)
