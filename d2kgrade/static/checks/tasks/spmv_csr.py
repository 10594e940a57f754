"""Static checks of task ``spmv_csr``: the ones only its rubric (``rubrics/spmv_csr.yaml``) uses.

- ``aligned_hint``
- ``input_load_hint``
- ``row_pieces_combined``
"""

from __future__ import annotations

from d2kgrade.static.checks.reductions import atomic_of_reduction
from d2kgrade.static.checks.tasks.embedding_bag import split_partials_combined
from d2kgrade.static.checkutil import as_list, code, span
from d2kgrade.static.dataflow import flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call
from d2kgrade.static.patterns.access import is_read
from d2kgrade.static.patterns.config import param_values
from d2kgrade.static.patterns.roles import input_loads
from d2kgrade.static.registry import CheckResult, check, found, missing


@check("row_pieces_combined")
def row_pieces_combined(facts: Facts, lang: str) -> CheckResult:
    """Partial sums of rows split across programs reach the output: one atomic add per reduced (or scanned)
    piece (``atomic_of_reduction`` with scans), or a carry-out fix-up in a second pass: a later kernel sums, in a
    loop carry written out after the loop, partials that an earlier kernel reduced and stored (the second-pass
    form of ``embedding_bag``'s ``split_partials_combined``, reused here)."""
    res = atomic_of_reduction(facts, lang, scans=True)
    if res.passed:
        return res
    res2 = split_partials_combined(facts, lang)
    return res2 if res2.passed else res


def _hint(facts: Facts, c: Call) -> set[str]:
    out = set()
    for kw in ("eviction_policy", "cache_modifier"):
        e = c.expr.kw(kw)
        if e is not None:
            v = facts.consts.get(e.op) if e.kind == "name" else e.value
            if isinstance(v, str):
                out.add(v)
    return out


@check("input_load_hint")
def input_load_hint(facts: Facts, lang: str, *, inputs: list[int], value: str | list[str]) -> CheckResult:
    """Every Triton load of the given ``inputs`` of ``kernel(...)`` (positions) carries one of the cache hints in
    ``value`` (an ``eviction_policy`` or a ``cache_modifier``: ``evict_first``/``.cs``/``.cg`` for streams read
    once, ``evict_last`` for a gathered vector kept in L2), and at least one such load exists: the hint sits on
    the tensor it is meant for, not on another one (values evict_last and x evict_first is the reverse)."""
    fl = flow(facts)
    want = set(as_list(value))
    seen = 0
    for fn in code(facts, "triton"):
        for c in input_loads(fl, fn, inputs):
            if c.name.startswith("."):
                continue
            seen += 1
            if not _hint(facts, c) & want:
                return missing(f"a load of input(s) {inputs} in {fn.name} has no {' / '.join(sorted(want))} hint",
                               [span(c, "unhinted load")], 0.85)
    if seen:
        return found(f"{seen} load(s) of input(s) {inputs} carry {' / '.join(sorted(want))}", [], 0.85)
    return missing(f"no load of input(s) {inputs}", confidence=0.7)


@check("aligned_hint")
def aligned_hint(facts: Facts, lang: str) -> CheckResult:
    """Alignment hints that hold: a ``tl.multiple_of(x, k)`` (or ``tl.max_contiguous`` over one) whose value is
    aligned by construction: a product with a compile-time multiple of ``k`` (``pid * CHUNK``), or a value rounded
    down to ``k`` (``(start // 4) * 4``, ``start & ~3``), not a row start read from ``row_ptr`` (arbitrary)."""
    fl = flow(facts)
    bad = None
    for fn in code(facts, "triton"):
        for c in fn.calls:
            if c.name != "tl.multiple_of" or len(c.expr.args) < 2:
                continue
            k = fl.fold(c.expr.args[1], fn)
            x = c.expr.args[0]
            if not isinstance(k, int) or k < 2:
                continue
            read = any(is_read(n, f) for n, f, _ in fl.walk(x, fn, depth=6) if f is fn)
            if _aligned(fl, x, fn, k):
                return found(f"tl.multiple_of(..., {k}) on a value aligned by construction in {fn.name}",
                             span(c, "aligned hint"), 0.8)
            if read:
                bad = c
    if bad is not None:
        return missing("alignment asserted on an offset read from memory (not aligned by construction)",
                       [span(bad, "unfounded hint")], 0.8)
    return missing("no alignment hint on an offset aligned by construction", confidence=0.75)


def _aligned(fl, x, fn, k: int, depth: int = 0) -> bool:
    """Is ``x`` a multiple of ``k`` by construction (its terms products with multiples of ``k``, rounded-down
    values, compile-time multiples; a ``tl.arange`` offset added to such a base keeps its start aligned)?"""
    if depth > 6:
        return False
    v = fl.fold(x, fn)
    if isinstance(v, int):
        return v % k == 0
    if x.kind == "name":
        lp = next((lp for lp in fn.loops if lp.var == x.op), None)
        if lp is not None:  # for k in range(base, stop, BLOCK): aligned start and step
            return (lp.start is None or _aligned(fl, lp.start, fn, k, depth + 1)) and lp.step is not None and all(
                isinstance(v, int) and v % k == 0 for v in param_values(fl, fn, lp.step))
        defs = fn.defs().get(x.op, [])
        return len(defs) == 1 and _aligned(fl, defs[0].value, fn, k, depth + 1)
    if x.kind == "call" and x.op in ("tl.max_contiguous", "tl.multiple_of") and x.args:
        return _aligned(fl, x.args[0], fn, k, depth + 1)
    if x.kind == "call" and x.op == "tl.arange":
        return True  # starts at 0; the hint is about the first element of each run
    if x.kind == "bin" and len(x.args) == 2:
        a, b = x.args
        if x.op in ("+", "-"):
            return _aligned(fl, a, fn, k, depth + 1) and _aligned(fl, b, fn, k, depth + 1)
        if x.op == "*":
            for m in (a, b):
                vals = param_values(fl, fn, m)
                if vals and all(isinstance(mv, int) and mv % k == 0 for mv in vals):
                    return True
            return _aligned(fl, a, fn, k, depth + 1) or _aligned(fl, b, fn, k, depth + 1)
        if x.op == "&":
            mv = [fl.fold(m, fn) for m in (a, b)]
            return any(isinstance(m, int) and m < 0 and (-m) % k == 0 for m in mv)
        if x.op == "//":
            return False
    return False

