"""Numerics checks: exp2 with log2(e) folded in, inverse square roots in any spelling, casts."""

from __future__ import annotations

import math

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Expr, Function
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

EXP2 = {"tl.exp2", "libdevice.exp2", "exp2f", "exp2", "__exp2f", "h2exp2", "hexp2", "fast_exp2"}


LOG2E = 1.0 / math.log(2.0)


RSQRTS = {"tl.rsqrt", "libdevice.rsqrt", "rsqrtf", "__frsqrt_rn", "rsqrt", "hrsqrt", "h2rsqrt"}


SQRTS = {"tl.sqrt", "tl.sqrt_rn", "libdevice.sqrt", "sqrtf", "sqrt", "__fsqrt_rn", "__fsqrt_rz", "hsqrt"}


LOGS = {"tl.log2": 2.0, "libdevice.log2": 2.0, "log2f": 2.0, "__log2f": 2.0, "tl.log": math.e, "libdevice.log": math.e,
        "logf": math.e, "__logf": math.e}


EXPS = {"tl.exp2": 2.0, "libdevice.exp2": 2.0, "exp2f": 2.0, "tl.exp": math.e, "libdevice.exp": math.e, "expf": math.e,
        "__expf": math.e}


POWS = {"libdevice.pow", "tl.pow", "powf", "pow", "libdevice.powf"}


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


def inverse_root_arg(fl: Flow, e: Expr, fn: Function) -> Expr | None:
    """``x`` when ``e`` computes 1/sqrt(x) in any spelling: ``rsqrt(x)``, ``1 / sqrt(x)``, ``exp2(-0.5 *
    log2(x))`` (``exp`` with ``log`` alike), ``pow(x, -0.5)``, ``x ** -0.5``; else None."""
    if e.kind == "call" and e.op in RSQRTS and e.args:
        return e.args[0]
    if e.kind == "bin" and e.op == "/" and len(e.args) == 2 and fl.fold(e.args[0], fn) == 1:
        den = _value(fl, e.args[1], fn)
        if den.kind == "call" and den.op in SQRTS and den.args:
            return den.args[0]
    if e.kind == "call" and e.op in EXPS and e.args:
        arg = _value(fl, e.args[0], fn)
        if arg.kind == "bin" and arg.op == "*" and len(arg.args) == 2:
            for k, lg in (arg.args, arg.args[::-1]):
                lg = _value(fl, lg, fn)
                if fl.fold(k, fn) == -0.5 and lg.kind == "call" and LOGS.get(lg.op) == EXPS[e.op] and lg.args:
                    return lg.args[0]
    if e.kind == "call" and e.op in POWS and len(e.args) == 2 and fl.fold(e.args[1], fn) == -0.5:
        return e.args[0]
    if e.kind == "bin" and e.op == "**" and len(e.args) == 2 and fl.fold(e.args[1], fn) == -0.5:
        return e.args[0]
    return None


def _value(fl: Flow, e: Expr, fn: Function) -> Expr:
    """A name's single definition (what it stands for), else the expression itself."""
    for _ in range(4):
        if e.kind != "name":
            return e
        defs = fl.defs(e.op, fn)
        if len(defs) != 1:
            return e
        e = defs[0].value
    return e


@check("inverse_root_of_reduction")
def inverse_root_of_reduction(facts: Facts, lang: str) -> CheckResult:
    """An inverse square root (``rsqrt``, ``1/sqrt``, ``exp2(-0.5*log2(x))``, ``pow(x, -0.5)``) is taken of a
    reduced value (a row statistic such as ``mean(h^2) + eps``), so it is computed once per row, not per element."""
    fl = flow(facts)
    for fn in code(facts, lang):
        nodes = [a.value for a in fn.assigns] + [c.expr for c in fn.calls]
        for root in nodes:
            for n in root.walk():
                arg = inverse_root_arg(fl, n, fn)
                if arg is None:
                    continue
                red = fl.reduction_derived(arg, fn)
                if red is not None:
                    return found(f"inverse square root of a reduced value in {fn.name} (line {n.line})",
                                 [span(n, "1/sqrt of a row statistic"), Span(red.line, red.end_line, "reduction")],
                                 0.85)
    return missing("no inverse square root (rsqrt, 1/sqrt, exp2(-0.5*log2), pow(x, -0.5)) of a reduced value",
                   confidence=0.85)
