"""Launch-configuration checks: autotune configs, ``num_warps`` and ``num_stages``, configurations picked on the host
by problem size."""

from __future__ import annotations

from typing import Any

from d2kgrade.static.checkutil import code, control_names, matches, span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import COMPUTED, Expr, Function, Launch
from d2kgrade.static.patterns.config import (
    config_dicts,
    host_values,
    launch_param,
    local_host,
    param_values,
    template_values,
)
from d2kgrade.static.patterns.names import expr_key
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


def _quotient(fl: Flow, e: Expr, fn: Function, depth: int = 0, seen: set[int] | None = None) -> Expr | None:
    """A quotient of two run-time values (``T // E``, ``T / E``) that host expression ``e`` depends on, through
    definitions and the local functions it calls (whose bodies decide what they return)."""
    seen = seen if seen is not None else set()
    if depth > 6 or id(e) in seen:
        return None
    seen.add(id(e))
    for n in e.walk():
        if n.kind == "bin" and n.op in ("//", "/") and len(n.args) == 2 and all(
                fl.fold(x, fn) is None and x.kind != "const" for x in n.args):
            return n
        if n.kind == "name":
            for d in fl.defs(n.op, fn):
                hit = _quotient(fl, d.value, fn, depth + 1, seen)
                if hit is not None:
                    return hit
        g = local_host(fl, n, fn)
        if g is not None:
            for x in [a.value for a in g.assigns] + list(g.returns):
                hit = _quotient(fl, x, g, depth + 1, seen)
                if hit is not None:
                    return hit
    return None


def _launch_guards(facts: Facts, la: Launch) -> tuple[Expr, ...]:
    caller = facts.functions.get(la.caller)
    for c in (caller.calls if caller is not None else []):
        if c.name == "launch" and c.line == la.line:
            return c.guards
    return ()


@check("host_config_choice")
def host_config_choice(facts: Facts, lang: str, *, min_params: int = 2, ratio: bool = False) -> CheckResult:
    """Launch meta-parameters (block sizes, ``num_warps``, ``num_stages``, CUDA template arguments and the thread
    count launched with them) are chosen per problem: at least ``min_params`` of them take different values under host choices (a config function, an
    if/else, a conditional expression, template instantiations in branches), or in autotune configs keyed on
    the problem. ``ratio``: the choice depends on a quotient of two run-time sizes (``T // E``, rows per expert;
    an autotune key computed from one), not on one size alone."""
    fl = flow(facts)
    best = 0
    for key in facts.launched():
        fn = facts.functions[key]
        if lang != "any" and (fn.lang == "py") != (lang == "triton"):
            continue
        if fn.lang == "cuda":
            tv = template_values(facts, fn)
            varying = [p for p, v in tv.items() if len(v) >= 2]
            las_t = [la for la in fl.launches_of(fn) if la.template]
            blocks = {expr_key(la.block) for la in las_t if la.block is not None}
            if varying and len(blocks) >= 2:  # the block size goes with the template (num_warps' analogue)
                varying.append(-1)
            best = max(best, len(varying))
            if len(varying) >= min_params:
                las = [la for la in fl.launches_of(fn) if la.template]
                q = None
                for la in las:
                    for g in _launch_guards(facts, la):
                        caller = facts.functions.get(la.caller)
                        q = q or (_quotient(fl, g, caller) if caller is not None else None)
                if not ratio or q is not None:
                    return found(f"{fn.name} instantiated with {len(varying)} varying template arguments"
                                 + (" under a branch on a size ratio" if ratio else ""),
                                 [span(la, f"<{la.template}>") for la in las[:3]], 0.75)
            continue
        at = fn.autotune
        cfgs = config_dicts(facts, fn)
        if at is not None and at.key and cfgs:
            fields = {k for c in cfgs for k in c}
            varying = [k for k in fields if len({str(c.get(k)) for c in cfgs}) >= 2]
            best = max(best, len(varying))
            if len(varying) >= min_params:
                if not ratio:
                    return found(f"{fn.name} autotuned over {sorted(varying)} keyed on {at.key}",
                                 Span(at.line, at.end_line, "configs"), 0.8)
                for la in fl.launches_of(fn):
                    for k in at.key:
                        for e, g, site in launch_param(fl, la, fn, k):
                            q = _quotient(fl, site, facts.functions[la.caller]) or _quotient(fl, e, g)
                            if q is not None:
                                return found(f"{fn.name} autotuned over {sorted(varying)} keyed on {k}, a size "
                                             "ratio", [Span(at.line, at.end_line, "configs"), span(q, "ratio")], 0.8)
        params = sorted(fn.constexprs) + ["num_warps", "num_stages"]
        varying_p: list[str] = []
        quot: Expr | None = None
        for p in params:
            vals: set[Any] = set()
            sites = []
            for la in fl.launches_of(fn):
                for e, g, site in launch_param(fl, la, fn, p):
                    vals |= host_values(fl, e, g)
                    sites.append((la, site))
            if len(vals) >= 2:
                varying_p.append(p)
                for la, site in sites:
                    caller = facts.functions.get(la.caller)
                    if caller is None:
                        continue
                    quot = quot or _quotient(fl, site, caller)
                    for g in _launch_guards(facts, la):
                        quot = quot or _quotient(fl, g, caller)
        best = max(best, len(varying_p))
        if len(varying_p) >= min_params and (not ratio or quot is not None):
            las = fl.launches_of(fn)
            return found(f"{fn.name}: {', '.join(varying_p)} chosen on the host"
                         + (" from a size ratio" if ratio else ""),
                         [span(la, "launch") for la in las[:2]] + ([span(quot, "ratio")] if quot is not None else []),
                         0.75)
    return missing(f"fewer than {min_params} launch parameters chosen per problem"
                   + (" from a size ratio" if ratio else "") + f" (best: {best})", confidence=0.7)


@check("num_warps_from_block")
def num_warps_from_block(facts: Facts, lang: str, *, min_fixed: int | None = None) -> CheckResult:
    """``num_warps`` is chosen from the problem/block size: a launch passes a computed (non-literal) ``num_warps``
    that depends on a value the launch also uses, or the autotuner/heuristics choose among several values. With
    ``min_fixed``, a constant ``num_warps`` of at least that many warps also counts (enough warps for the
    largest rows)."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        if fn.autotune and len({c.num_warps for c in fn.autotune.configs if c.num_warps is not None}) >= 2:
            return found(f"autotune over num_warps for {fn.name}", Span(fn.autotune.line, fn.autotune.end_line), 0.8)
        if "num_warps" in fn.heuristics:
            e = fn.heuristics["num_warps"]
            return found(f"heuristic num_warps for {fn.name}", span(e, "num_warps heuristic"), 0.85)
        for la in fl.launches_of(fn):
            nw = la.kwargs.get("num_warps")
            caller = facts.functions.get(la.caller)
            if nw is None or caller is None:
                continue
            fixed = fl.fold(nw, caller)
            if fixed is not None:
                if min_fixed is not None and isinstance(fixed, int) and fixed >= min_fixed:
                    return found(f"{fixed} warps for {fn.name} at every size (>= {min_fixed})",
                                 [span(nw, "num_warps"), span(la, "launch")], 0.7)
                continue
            other = {n.op for e in list(la.args) + [v for k, v in la.kwargs.items() if k != "num_warps"]
                     for n, _, _ in fl.walk(e, caller, depth=3) if n.kind == "name"}
            deps = {n.op for n, _, _ in fl.walk(nw, caller, depth=4) if n.kind in ("name", "call")}
            deps |= control_names(fl, nw, caller)  # num_warps = 4; if BLOCK >= 2048: num_warps = 8
            if deps & other or any(matches(d, ("triton.next_power_of_2", "next_power_of_2")) for d in deps):
                return found(f"num_warps computed from the block size for {fn.name}",
                             [span(nw, "num_warps"), span(la, "launch")], 0.8)
    return missing("num_warps is a constant (or absent) at every launch", confidence=0.75)


@check("autotune_configs")
def autotune_configs(facts: Facts, lang: str, *, min_configs: int = 2, require: list[str] | None = None,
                     vary: list[str] | None = None, any_value: dict[str, list] | None = None) -> CheckResult:
    """A reachable kernel is ``@triton.autotune``-d over at least ``min_configs`` configs with a ``key``; every
    field in ``require`` (``num_warps``, ``num_stages``, a meta-parameter) is set in the configs, and each field
    in ``vary`` takes at least two values (comprehension-generated configs are accepted as varying). With
    ``any_value`` (``{BLOCK_M: [16, 32, 64], BM: [16, 32, 64]}``) some config must set one of those fields to one
    of the listed values (small-M tiles, say); generated configs are evaluated from their literal tables."""
    req = require or []
    for fn in code(facts, "triton"):
        at = fn.autotune
        if at is None:
            continue
        n = len(at.configs)
        problems = []
        if n < min_configs and not at.generated:
            problems.append(f"{n} config(s)")
        if not at.key:
            problems.append("no key")
        for r in req:
            have = [c for c in at.configs if (c.num_warps if r == "num_warps" else c.num_stages if r == "num_stages"
                                              else c.kwargs.get(r)) is not None or r in c.kwargs]
            if not have:
                problems.append(f"{r} never set")
        for v in vary or []:
            vals = {str(c.num_warps if v == "num_warps" else c.num_stages if v == "num_stages" else c.kwargs.get(v))
                    for c in at.configs}
            if len(vals) < 2 and not at.generated:
                problems.append(f"{v} does not vary")
        if any_value:
            # generated configs (a comprehension over literal tables) are evaluated; only when that fails are
            # they given the benefit of the doubt
            dicts = config_dicts(facts, fn) if at.generated else [c.kwargs for c in at.configs]
            known = any(k in d for d in dicts for k in any_value)
            if (known or not at.generated) and not any(d.get(k) in vals for d in dicts
                                                       for k, vals in any_value.items()):
                problems.append(f"no config with {' or '.join(any_value)} in {list(any_value.values())[0]}")
        sp = Span(at.line, at.end_line, "autotune")
        if not problems:
            return found(f"{fn.name} autotuned over {n}{'+' if at.generated else ''} configs, key={at.key}", sp, 0.9)
        return missing(f"{fn.name} is autotuned but: {', '.join(problems)}", [sp], 0.85)
    return missing("no reachable kernel is autotuned", confidence=0.9)


@check("num_stages")
def num_stages(facts: Facts, lang: str, *, min: int = 3) -> CheckResult:
    """Software pipelining is asked for explicitly: ``num_stages >= min`` in an autotune config or at the launch of
    a kernel that has a loop, or ``tl.range(..., num_stages=k)``. (Triton's implicit default is not visible in the
    source and does not count.)"""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        for lp in fn.loops:
            ns = lp.options.get("num_stages")
            if ns is None:
                continue
            vals = [v for v in param_values(fl, fn, ns) if v is not None]
            if not vals and fl.root(ns, fn).kind == "name":  # a config dict the analysis cannot follow
                vals = _keyword_values(facts, fl.root(ns, fn).op)
            if vals and max(vals) >= min:
                return found(f"tl.range(..., num_stages={max(vals)}) in {fn.name}", span(lp, "pipelined loop"), 0.8)
        if not fn.loops:
            continue
        if fn.autotune:
            vals = [c.num_stages for c in fn.autotune.configs if isinstance(c.num_stages, int)]
            if vals and max(vals) >= min:
                return found(f"autotune configs with num_stages up to {max(vals)} for {fn.name}",
                             Span(fn.autotune.line, fn.autotune.end_line, "configs"), 0.85)
            if any(c.num_stages == COMPUTED for c in fn.autotune.configs):  # as a computed launch value counts
                return found(f"autotune configs of {fn.name} set num_stages (computed)",
                             Span(fn.autotune.line, fn.autotune.end_line, "configs"), 0.7)
        for la in fl.launches_of(fn):
            ns = la.kwargs.get("num_stages")
            caller = facts.functions.get(la.caller)
            if ns is not None and caller is not None:
                v = fl.fold(ns, caller)
                if v is None or v >= min:
                    return found(f"launch of {fn.name} with num_stages={v if v is not None else '(computed)'}",
                                 span(la, "launch"), 0.8)
    return missing(f"no explicit num_stages >= {min} on a looping kernel", confidence=0.75)


def _keyword_values(facts: Facts, key: str) -> list[int]:
    """Integer values bound to keyword ``key`` anywhere in the host code (``dict(NUM_STAGES=4)``, ``NUM_STAGES=5``)."""
    out = []
    for f in facts.functions.values():
        if f.is_device:
            continue
        for e in [a.value for a in f.assigns] + [c.expr for c in f.calls]:
            for n in e.walk():
                v = (n.kwargs or {}).get(key)
                if v is not None and v.kind == "const" and isinstance(v.value, int) and not isinstance(v.value, bool):
                    out.append(v.value)
    return out
