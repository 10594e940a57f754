"""Static checks of task ``quant_absmax``: the ones only its rubric (``rubrics/quant_absmax.yaml``) uses.

- ``clamp_before_cast``
- ``floored_reduction``
- ``inverse_scale_multiply``
- ``long_group_amax_passes``
- ``rne_before_int_cast``
"""

from __future__ import annotations

from collections.abc import Iterator

from d2kgrade.static.checkutil import as_list, code, span
from d2kgrade.static.dataflow import Flow, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function
from d2kgrade.static.patterns.liveness import dead, elementwise, live_calls, load_taint_and_seeds
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

_MINS = {"tl.minimum", "fminf", "fmin", "min", "std::min", "__hmin", "__hmin2", "libdevice.fmin"}


_MAXS = {"tl.maximum", "fmaxf", "fmax", "max", "std::max", "__hmax", "__hmax2", "libdevice.fmax"}


_CLAMPS = {"tl.clamp", "libdevice.clamp", "__saturatef"}


_ROUNDS = {"libdevice.rint", "libdevice.nearbyint", "tl.rint", "__float2int_rn", "rintf", "rint", "nearbyintf",
           "lrintf", "llrintf", "__float2ll_rn", "__float2short_rn", "__float2char_rn"}


_RNE_MAGIC = {12582912.0, 8388608.0}  # (y + C) - C rounds to an integer, ties to even (1.5 * 2^23; 2^23 for y >= 0)


_FP8_CONVERTERS = ("__nv_cvt_float_to_fp8", "__nv_cvt_float2_to_fp8x2", "__nv_cvt_bfloat16raw_to_fp8",
                   "__nv_cvt_bfloat16raw2_to_fp8x2", "__nv_cvt_halfraw_to_fp8", "__nv_cvt_halfraw2_to_fp8x2")


_FP8_TYPES = ("__nv_fp8_e4m3", "__nv_fp8x2_e4m3", "__nv_fp8x4_e4m3", "__nv_fp8_e5m2", "__nv_fp8x2_e5m2")


_INT8_CASTS = {"int8", "signed char", "char", "int8_t", "std::int8_t"}


def _conversions(fl: Flow, fn: Function, dtypes: list[str]) -> Iterator[tuple[Call, Expr, bool]]:
    """Live conversions of element-wise loaded data to ``dtypes`` (``fp8``, ``int8``): (call, operand,
    saturating). Saturating: a CUDA fp8 conversion intrinsic with ``__NV_SATFINITE`` or an fp8 class
    constructor (which saturates)."""
    want_fp8 = "fp8" in dtypes
    want_int8 = "int8" in dtypes
    for c in live_calls(fl, fn):
        e = c.expr
        if e.kind == "cast" and e.args:
            op = e.op
            if (want_fp8 and op == "fp8") or (want_int8 and op in _INT8_CASTS):
                if elementwise(fl, fn, e.args[0], site_of(c)):
                    yield c, e.args[0], False
        elif want_fp8 and e.kind == "call" and e.op in _FP8_CONVERTERS and e.args:
            sat = any(a.kind == "name" and a.op == "__NV_SATFINITE" for a in e.args)
            if elementwise(fl, fn, e.args[0], site_of(c)):
                yield c, e.args[0], sat
        elif want_fp8 and e.kind == "call" and e.op.split("::")[-1] in _FP8_TYPES and e.args:
            if elementwise(fl, fn, e.args[0], site_of(c)):
                yield c, e.args[0], True


def _bounded(fl: Flow, e: Expr, fn: Function) -> bool:
    """Is ``e`` clamped on both sides (``tl.clamp``, min of max, ``tl.where`` comparisons on both sides) on its
    element-wise data path?"""
    upper = lower = False
    for n, f, _ in fl.walk(e, fn, depth=6):
        if n.kind == "call" and n.op in _CLAMPS:
            return True
        if n.kind == "call" and (n.op in _MINS or n.op in _MAXS) and len(n.args) >= 2:
            if any(elementwise(fl, f, a) for a in n.args) if f is fn else True:
                if n.op in _MINS:
                    upper = True
                else:
                    lower = True
        if n.kind == "call" and n.op == "tl.where" and n.args and n.args[0].kind == "cmp":
            if n.args[0].op in (">", ">="):
                upper = True
            elif n.args[0].op in ("<", "<="):
                lower = True
        if n.kind == "ternary" and n.args and n.args[0].kind == "cmp":
            if n.args[0].op in (">", ">="):
                upper = True
            elif n.args[0].op in ("<", "<="):
                lower = True
        if upper and lower:
            return True
    return False


def _rounded(fl: Flow, e: Expr, fn: Function) -> bool:
    """Does ``e`` pass through a round-to-nearest-even (``rint``, ``__float2int_rn``, ``(y + C) - C``)?"""
    for n, f, _ in fl.walk(e, fn, depth=6):
        if n.kind == "call" and n.op in _ROUNDS:
            return True
        if n.kind == "bin" and n.op == "-" and len(n.args) == 2:
            c = fl.fold(n.args[1], f)
            inner = fl.root(n.args[0], f)
            if c in _RNE_MAGIC:
                vals = [inner] + [a.value for a in fl.defs(inner.op, f)] if inner.kind == "name" else [inner]
                for v in vals:
                    if v.kind == "bin" and v.op == "+" and any(fl.fold(a, f) == c for a in v.args):
                        return True
    return False


@check("inverse_scale_multiply")
def inverse_scale_multiply(facts: Facts, lang: str) -> CheckResult:
    """An inverse scale is computed once from a reduced value (``inv = QMAX / amax``, with a numerator that is not
    element-wise data: a constant, a ``tl.constexpr`` or a scalar kernel argument such as CUDA's ``float qmax``)
    and multiplies element-wise values (``x * inv``), instead of dividing every element."""
    fl = flow(facts)
    for fn in code(facts, lang):
        taint, seeds = load_taint_and_seeds(fl, fn)
        recips: list[tuple[set[str], Expr, int]] = []  # (names holding it, division node, line)
        for a in fn.assigns:
            if dead(fl, fn, a.guards):
                continue
            for n in a.value.nodes():
                if n.kind == "bin" and n.op == "/" and len(n.args) == 2:
                    num, den = n.args
                    if (fl.reduction_derived(den, fn) is not None and fl.reduction_derived(num, fn) is None
                            and not fl.reads_through(num, fn, taint, seeds, site_of(a))):
                        # the whole value (also under a C declaration's conversion: const float inv = Q / amax)
                        whole = n is a.value or (a.value.kind == "cast" and a.value.args and n is a.value.args[0])
                        recips.append((set(a.targets) if whole else set(), n, a.line))
        if not recips:
            continue
        exprs = [(a.value, site_of(a)) for a in fn.assigns] + [(c.expr, site_of(c)) for c in fn.calls
                                                               if c.name in ("tl.store", "store")]
        for e, site in exprs:
            for m in e.nodes():
                if m.kind != "bin" or m.op != "*" or len(m.args) != 2:
                    continue
                for p, q in ((m.args[0], m.args[1]), (m.args[1], m.args[0])):
                    if not fl.reads_through(q, fn, taint, seeds, site):
                        continue
                    for names, div, line in recips:
                        if any(x is div for x in p.nodes()) or any(fl.refs(p, fn, t) for t in names):
                            return found(f"inverse scale (line {line}) computed from a reduced value and multiplied "
                                         f"into element-wise data in {fn.name}",
                                         [Span(line, line, "inverse scale"), span(m, "multiply")], 0.85)
    return missing("no inverse of a reduced value multiplied into element-wise values", confidence=0.8)


@check("clamp_before_cast")
def clamp_before_cast(facts: Facts, lang: str, *, dtype: str | list[str] = "fp8") -> CheckResult:
    """Every conversion of element-wise data to a narrow type in ``dtype`` (``fp8``, ``int8``) takes a value
    clamped on both sides first (``tl.clamp``, ``tl.minimum(tl.maximum(y, -Q), Q)``, ``fminf(fmaxf(..))``,
    ``tl.where`` on both bounds), or is a saturating CUDA conversion (``__NV_SATFINITE``); at least one exists.
    A conversion that trusts the cast to saturate fails."""
    fl = flow(facts)
    dts = as_list(dtype)
    good: list[Call] = []
    for fn in code(facts, lang):
        for c, operand, sat in _conversions(fl, fn, dts):
            if sat or _bounded(fl, operand, fn):
                good.append(c)
            else:
                return missing(f"conversion at line {c.line} in {fn.name} takes an unclamped value",
                               [span(c, "unclamped conversion")], 0.8)
    if good:
        return found(f"{len(good)} conversion(s) to {'/'.join(dts)} of clamped values",
                     [span(c, "clamped conversion") for c in good[:4]], 0.8)
    return missing(f"no conversion of loaded data to {'/'.join(dts)} in device code", confidence=0.75)


@check("rne_before_int_cast")
def rne_before_int_cast(facts: Facts, lang: str) -> CheckResult:
    """Every conversion of element-wise data to int8 is of a value rounded to nearest even first
    (``libdevice.rint``, ``__float2int_rn``, ``rintf``, the ``(y + 1.5*2^23) - 1.5*2^23`` trick): a plain
    float-to-int8 cast truncates. Fails when device code converts nothing to int8."""
    fl = flow(facts)
    good: list[Call] = []
    for fn in code(facts, lang):
        for c, operand, _ in _conversions(fl, fn, ["int8"]):
            if _rounded(fl, operand, fn):
                good.append(c)
            else:
                return missing(f"int8 conversion at line {c.line} in {fn.name} of a value not rounded to nearest "
                               "even (truncates)", [span(c, "truncating conversion")], 0.8)
    if good:
        return found(f"{len(good)} int8 conversion(s) of rounded values", [span(c, "rounded") for c in good[:4]],
                     0.8)
    return missing("no int8 conversion of loaded data in device code", confidence=0.7)


@check("floored_reduction")
def floored_reduction(facts: Facts, lang: str) -> CheckResult:
    """A reduced value is floored by a positive constant before use (``tl.maximum(amax, 1e-12)``,
    ``fmaxf(m, 1e-12f)``, ``tl.where(s > 0, s, c)``), so an all-zero group does not divide by zero."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for c in live_calls(fl, fn):
            e = c.expr
            if e.kind != "call" or len(e.args) < 2:
                continue
            if e.op in _MAXS:
                consts = [a for a in e.args if (v := fl.fold(a, fn)) is not None and v > 0]
                others = [a for a in e.args if all(a is not k for k in consts)]
                if consts and any(fl.reduction_derived(a, fn) is not None for a in others):
                    return found(f"reduced value floored at a positive constant in {fn.name}", span(c, "floor"), 0.8)
            if e.op == "tl.where" and len(e.args) == 3 and e.args[0].kind == "cmp":
                if (fl.reduction_derived(e.args[0], fn) is not None
                        and any((v := fl.fold(a, fn)) is not None and v > 0 for a in e.args[1:])):
                    return found(f"reduced value replaced by a positive constant when zero in {fn.name}",
                                 span(c, "floor"), 0.75)
    return missing("no reduced value floored by a positive constant", confidence=0.8)


_MAX_REDUCTIONS = {"tl.max", "tl.reduce", "__reduce_max_sync", "__hmax2", "__hmax", "fmaxf"}


@check("long_group_amax_passes")
def long_group_amax_passes(facts: Facts, lang: str) -> CheckResult:
    """A group too long for registers is reduced in bounded passes: either one program sweeps it twice (two
    consecutive loops over the same loaded data, the first with ``evict_last`` loads in Triton, so the re-read
    hits L2), or the row is split over programs (a grid axis 1) that sweep their chunk and store partial maxima
    which a later kernel loads (the tiny amax-reduction kernel of a split row)."""
    from d2kgrade.static.checks.memory import eviction_policy
    from d2kgrade.static.checks.sweeps import producer_consumer_kernels, tile_sweeps

    sweeps = tile_sweeps(facts, lang, min=2, reload="loaded")
    if sweeps.passed:
        if not code(facts, "triton"):
            return sweeps
        hint = eviction_policy(facts, "triton", in_loop=True, op="load", value="evict_last")
        if hint.passed:
            return found(f"{sweeps.reason}; {hint.reason}", sweeps.evidence + hint.evidence, 0.8)
    split = producer_consumer_kernels(facts, lang, producer_axis=1)
    if split.passed:
        fl = flow(facts)
        for fn in code(facts, lang):
            ops = fl.memory_ops(fn)
            if not any(kind == "load" and c.loops for kind, c, _ in ops):
                continue  # the partial comes from one whole-group load, not from a sweep over the chunk
            for kind, c, _ in ops:
                v = fl.stored_value(c) if kind == "store" else None
                if v is not None and any(n.kind == "call" and n.op in _MAX_REDUCTIONS
                                         for n, _, _ in fl.walk(v, fn, depth=4)):
                    return found(f"split row: {split.reason}; {fn.name} stores partial maxima",
                                 split.evidence + [span(c, "partial amax")], 0.75)
    return missing("no two-sweep program (with evict_last first sweep) and no split-row partial amax kernel",
                   confidence=0.75)
