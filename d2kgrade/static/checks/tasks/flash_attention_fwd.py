"""Static checks of task ``flash_attention_fwd``: the ones only its rubric (``rubrics/flash_attention_fwd.yaml``) uses.

- ``head_group_mapping``
- ``reversed_pid``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code
from d2kgrade.static.dataflow import Flow, Site, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Expr, Function
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


@check("reversed_pid")
def reversed_pid(facts: Facts, lang: str) -> CheckResult:
    """Work items are taken in reverse launch order (``start_m = num_blocks - 1 - tl.program_id(0)``), so the
    heaviest blocks start first."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for a in fn.assigns:
            for n in a.value.walk():
                if n.kind == "bin" and n.op == "-" and len(n.args) == 2 and _pid_index(fl, n.args[1], fn) \
                        and not _pid_index(fl, n.args[0], fn):
                    return found(f"reversed program order in {fn.name}", Span(a.line, a.end_line, "n - pid"), 0.8)
    return missing("program ids are used in launch order", confidence=0.8)


_INDEX_CALLS = {"tl.cdiv", "tl.minimum", "tl.maximum", "min", "max", "tl.num_programs", "tl.multiple_of"}


def _pid_index(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> bool:
    """Is ``e`` integer index arithmetic on the program id (``pid // G``, ``rest % n_m``), not data that merely
    passed through a load or a dot addressed by it (a running max is not a tile index)?"""
    if depth > 8:
        return False
    k = e.kind
    if k == "call":
        if e.op == "tl.program_id":
            return True
        return e.op in _INDEX_CALLS and any(_pid_index(fl, x, fn, depth + 1) for x in e.args)
    if k == "name":
        if e.op.startswith("blockIdx"):
            return True
        return any(d.value.kind != "other" and _pid_index(fl, d.value, fn, depth + 1) for d in fl.defs(e.op, fn))
    if k in ("bin", "unary", "ternary", "cast"):
        return any(_pid_index(fl, x, fn, depth + 1) for x in e.args)
    return False


@check("head_group_mapping")
def head_group_mapping(facts: Facts, lang: str, *, fastest: bool = False) -> CheckResult:
    """Query heads that share a KV head are mapped to neighbouring programs: a program-id-derived head index is
    divided by the group size (``kv_head = q_head // (HQ // HKV)``, or the group member taken as ``pid % GROUP``
    with ``GROUP = HQ // HKV``), so the heads reading the same K/V run side by side. ``fastest``: the group member
    is the fastest-varying digit of the launch order (``tl.program_id(0) % GROUP``, ``blockIdx.x % G``), so the
    G heads of a KV head run at the same moment (a grid whose fastest axis is the query tile does not count)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for a in fn.assigns:
            for n in a.value.walk():
                if n.kind != "bin" or n.op not in ("//", "%", "/") or len(n.args) != 2:
                    continue
                if n.op == "/" and fn.lang != "cuda":
                    continue
                left, right = n.args
                if fastest and (n.op != "%" or not _launch_index(fl, left, fn, site_of(a))):
                    continue
                if not fl.pid_derived(left, fn):
                    continue
                for x, f, _ in fl.walk(right, fn, depth=3):
                    if x.kind == "bin" and x.op in ("//", "/") and len(x.args) == 2 and all(
                            y.kind == "name" and fl.fold(y, f) is None for y in x.args):
                        return found(f"head index {a.targets[0]} grouped by a head ratio in {fn.name}",
                                     Span(a.line, a.end_line, "q heads -> kv head"), 0.75)
    if fastest:
        return missing("the fastest launch index is never split by a query/KV head ratio", confidence=0.7)
    return missing("no program-id head index divided by a query/KV head ratio", confidence=0.7)


def _launch_index(fl: Flow, e: Expr, fn: Function, site: Site | None = None) -> bool:
    """Is ``e`` (read at ``site``) the launch index itself (``tl.program_id(0)``, ``blockIdx.x``), possibly through
    a plain copy (``pid = tl.program_id(0)``; later ``pid = pid // G`` redefinitions do not reach ``site``)?"""
    r = fl.root(e, fn)
    if r.kind == "name" and r.op == "blockIdx.x":
        return True
    if r.kind == "name":
        defs = fl.defs(r.op, fn)
        if site is not None:
            defs = [d for d in defs if fl.reaches(d, site, defs)]
        r = defs[0].value if len(defs) == 1 else r
    if r.kind == "call" and r.op == "tl.program_id":
        ax = r.kw("axis", 0)
        return ax is not None and fl.fold(ax, fn) == 0
    return r.kind == "name" and r.op == "blockIdx.x"
