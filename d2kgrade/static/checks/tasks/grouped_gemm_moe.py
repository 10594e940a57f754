"""Static checks of task ``grouped_gemm_moe``: the ones only its rubric (``rubrics/grouped_gemm_moe.yaml``) uses.

- ``gather_tile_sizes``
- ``segment_lookup``
- ``skips_empty_segments``
"""

from __future__ import annotations

from typing import Any

from d2kgrade.static.checks.values import branch_on_loaded
from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Function
from d2kgrade.static.patterns.access import access_address, broadcast, gather_loads, unit_arange
from d2kgrade.static.patterns.config import config_dicts, host_values, launch_param, template_values
from d2kgrade.static.patterns.liveness import data_dependent
from d2kgrade.static.patterns.roles import entry_params
from d2kgrade.static.registry import CheckResult, check, found, missing


def _param_values(fl: Flow, facts: Facts, fn: Function, p: str) -> set[Any]:
    """Values a Triton meta-parameter takes: autotune configs, heuristics aside, and host choices at launches."""
    vals = {c[p] for c in config_dicts(facts, fn) if p in c}
    for la in fl.launches_of(fn):
        for e, g, _ in launch_param(fl, la, fn, p):
            vals |= host_values(fl, e, g)
    return vals


@check("segment_lookup")
def segment_lookup(facts: Facts, lang: str, *, input_index: int = 1) -> CheckResult:
    """The segment (expert) whose data a program reads from input ``input_index`` of ``kernel(...)`` is found
    through loaded data: the address of that input's loads depends on a search of loaded boundaries (``e =
    tl.sum(tile_end <= t)``, a binary search ``if (starts[mid] <= tile) lo = mid``) or on a loaded tile table
    (``e = tl.load(tile_expert + pid)``), not on the program id alone: a flattened (segment, tile) schedule in
    which empty segments own no tiles."""
    fl = flow(facts)
    for fn in code(facts, lang):
        targets = entry_params(fl, facts, fn, input_index)
        if not targets:
            continue
        for kind, c, bases in fl.memory_ops(fn):
            if kind != "load" or not (bases & targets):
                continue
            addr = access_address(c)
            if addr is None:
                continue
            src = data_dependent(fl, addr, fn)
            if src is not None:
                return found(f"{fn.name} reads {'/'.join(sorted(bases & targets))} at a segment found from loaded "
                             f"data", [span(c, "segment-indexed load"), span(src, "loaded boundaries / table")], 0.8)
    return missing(f"no load of input {input_index} addressed by a segment looked up from loaded data "
                   "(the segment is the program id, or comes from the host)", confidence=0.75)


@check("skips_empty_segments")
def skips_empty_segments(facts: Facts, lang: str, *, input_index: int = 1) -> CheckResult:
    """Programs do no work for empty segments: segments are looked up through loaded boundaries (empty ones own
    no tiles, ``segment_lookup``) or a kernel branches on loaded segment bounds (``if rows_e > 0:``)."""
    r = segment_lookup(facts, lang, input_index=input_index)
    if r.passed:
        return found("empty segments own no tiles: " + r.reason, r.evidence, 0.75)
    b = branch_on_loaded(facts, lang)
    if b.passed:
        return found("a kernel branches on loaded bounds: " + b.reason, b.evidence, 0.7)
    return missing("segments are neither looked up from loaded bounds nor skipped by a branch on them",
                   confidence=0.7)


@check("gather_tile_sizes")
def gather_tile_sizes(facts: Facts, lang: str, *, small: int | None = None) -> CheckResult:
    """The tile of a data-dependent gather (rows addressed from loaded offsets: ``rows = o_e + m*BM +
    tl.arange(0, BM)``) is sized per problem: its ``tl.arange`` size parameter takes at least two values across
    autotune configs, host choices and launches (CUDA: a template argument of the gathering kernel). With
    ``small``, one of the values is at most ``small`` rows (a decode tile) and another is larger."""
    fl = flow(facts)

    def ok(vals: set[Any]) -> bool:
        nums = {v for v in vals if isinstance(v, int)}
        if small is None:
            return len(vals) >= 2
        return bool(nums) and min(nums) <= small < max(nums)

    want = f"a value <= {small} and a larger one" if small is not None else "several values"
    for fn in code(facts, lang):
        gathers = gather_loads(fl, fn)
        if not gathers:
            continue
        if fn.lang == "cuda":
            for pos, vals in template_values(facts, fn).items():
                if ok(vals):
                    return found(f"{fn.name}: template argument {pos + 1} takes {sorted(vals, key=str)}",
                                 span(next(iter(gathers.values())), "gather"), 0.7)
            continue
        params: set[str] = set()
        for c in gathers.values():  # rows = o_e + m*BM + tl.arange(0, BM): the arange added to loaded offsets
            addr = access_address(c)
            for n, f, _ in fl.walk(addr, fn, depth=6) if addr is not None else ():
                if f is not fn or n.kind != "bin" or n.op != "+" or len(n.args) != 2:
                    continue
                for a, b in (n.args, n.args[::-1]):
                    if broadcast(a) or fl.bases(b, fn):
                        continue  # a column index of a 2-D tile, or an offset added to a pointer
                    ar = unit_arange(fl, a, fn)
                    if ar is None or len(ar.args) != 2 or data_dependent(fl, b, fn) is None:
                        continue
                    r = fl.root(ar.args[1], fn)
                    if r.kind == "name" and r.op in fn.constexprs:
                        params.add(r.op)
        for p in sorted(params):
            vals = _param_values(fl, facts, fn, p)
            if ok(vals):
                return found(f"{fn.name}: gathered tile {p} takes {sorted(vals, key=str)}",
                             span(next(iter(gathers.values())), "gathered rows"), 0.75)
    return missing(f"no gathered tile whose size takes {want}", confidence=0.7)
