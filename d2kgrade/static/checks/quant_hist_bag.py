"""Checks written for the quantization, histogram and embedding-bag tasks (quant_absmax, histogram,
embedding_bag), phrased over structure and data flow so they hold for other kernels too:

- conversions to narrow types: a clamp before the conversion, round-to-nearest-even before an int8 conversion, an
  inverse scale of a reduced value multiplied in, a floor on a reduced value;
- private counters: a histogram accumulated across a program's tiles and published once, per-warp shared
  sub-histograms, relaxed atomics whose result is unused, a merge that skips zero bins at a program-dependent
  rotation;
- gathers: a gathered row accumulated in a loop carry and written once, partial sums of bounded slices combined by
  atomics or by a later kernel, rank-3 segmented sums, 64-bit row offsets, a cache policy chosen per workload
  without a host read, an fp32 up-conversion of gathered rows.

Code under a branch that can never run counts as dead here: an ``if FLAG:`` on a ``tl.constexpr`` (or other)
parameter that every launch sets to a false constant (``FLAG=USE_IT`` with a module-level ``USE_IT = False``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from d2kgrade.static.checkutil import as_list, code, exclusive, span
from d2kgrade.static.dataflow import LOADS, Flow, Taint, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function, Loop, end_pos, pos
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
_NARROW_INTS = {"int32", "int16", "int8", "uint32", "uint16", "uint8", "signed char", "short", "int32_t",
                "unsigned short", "unsigned char", "char"}
_ATOMIC_ADDS = ("tl.atomic_add", "atomicAdd", "atomicAdd_block", "atomicAdd_system")
HOST_SYNCS = [".item", ".tolist", ".cpu", ".numpy", "torch.unique", ".unique", "torch.nonzero", ".nonzero",
              "torch.masked_select", ".masked_select", "torch.repeat_interleave", ".repeat_interleave"]
"""Host calls that read device data back (or size an output by it) and so synchronise on every call."""
_HOST_LOADS = {"__ldg": "ldg", "__ldcs": "ldcs", "__ldlu": "ldlu", "__ldcg": "ldcg", "__ldca": "ldca",
               "__ldcv": "ldcv"}


# ------------------------------------------------------------------------------------------------ helpers


def _truth(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> bool | None:
    """The truth value of a host expression when it is a constant (literal, module constant, single-definition
    local, ``not``), else None."""
    if depth > 6 or e is None:
        return None
    if e.kind == "const":
        return bool(e.value) if isinstance(e.value, (bool, int, float, str)) else None
    if e.kind == "unary" and e.op in ("not", "!") and e.args:
        t = _truth(fl, e.args[0], fn, depth + 1)
        return None if t is None else not t
    if e.kind == "name":
        if e.op in ("True", "true"):
            return True
        if e.op in ("False", "false"):
            return False
        if e.op in fl.facts.consts and isinstance(fl.facts.consts[e.op], (bool, int, float)):
            return bool(fl.facts.consts[e.op])
        defs = fl.defs(e.op, fn)
        if len(defs) == 1 and not defs[0].loops:
            return _truth(fl, defs[0].value, fn, depth + 1)
    return None


def _guard_dead(fl: Flow, fn: Function, g: Expr) -> bool:
    """Is guard ``g`` (a kernel parameter, or ``not`` of one) false at every launch?"""
    want = True
    if g.kind == "unary" and g.op in ("not", "!") and g.args:
        g, want = g.args[0], False
    r = fl.root(g, fn)
    if r.kind != "name" or r.op not in fn.params:
        return False
    srcs = fl.param_sources(fn, r.op)
    if not srcs:
        return False
    return all(_truth(fl, src, caller) == (not want) for src, caller in srcs)


def _dead(fl: Flow, fn: Function, guards: tuple[Expr, ...]) -> bool:
    key = ("qhb-dead", fn.key, id(fn))
    memo = fl.facts.memo(str(key), dict)
    out = False
    for g in guards:
        hit = memo.get(id(g))
        if hit is None:
            hit = memo[id(g)] = _guard_dead(fl, fn, g)
        if hit:
            out = True
            break
    return out


def _live_calls(fl: Flow, fn: Function) -> list[Call]:
    return [c for c in fn.calls if not _dead(fl, fn, c.guards)]


def _load_taint(fl: Flow, fn: Function) -> tuple[Taint, set[int]]:
    seeds = {id(c.expr) for kind, c, _ in fl.memory_ops(fn) if kind == "load"}
    taint = fl.facts.memo(f"qhb-load-taint:{fn.key}:{id(fn)}", lambda: fl.taint(fn, None, seeds))
    return taint, seeds


def _elementwise(fl: Flow, fn: Function, e: Expr, site=None) -> bool:  # noqa: ANN001
    """Does ``e`` carry loaded data element-wise (not only through a reduction)?"""
    taint, seeds = _load_taint(fl, fn)
    return fl.reads_through(e, fn, taint, seeds, site)


def _used(fn: Function, c: Call) -> bool:
    """Is the value of call ``c`` used (inside an assignment or another call's arguments)?"""
    target = c.expr
    for a in fn.assigns:
        if any(n is target for n in a.value.nodes()):
            return True
    for other in fn.calls:
        if other is c or other.expr is target:
            continue
        if any(n is target for n in other.expr.nodes()):
            return True
    return False


def _warp_index(fl: Flow, e: Expr, fn: Function) -> bool:
    """Does ``e`` read a warp index (``threadIdx.x >> 5``, ``threadIdx.x / 32``, ``/ warpSize``)?"""
    for n, f, _ in fl.walk(e, fn, depth=5):
        if n.kind == "bin" and len(n.args) == 2 and n.op in (">>", "/"):
            rhs = n.args[1]
            v = fl.fold(rhs, f)
            warp_size = v == 32 or (rhs.kind == "name" and rhs.op == "warpSize")
            if (n.op == ">>" and v == 5) or (n.op == "/" and warp_size):
                if any(x.kind == "name" and x.op.startswith("threadIdx") for x, _, _ in fl.walk(n.args[0], f,
                                                                                                 depth=3)):
                    return True
    return False


def _pid_no_loads(fl: Flow, e: Expr, fn: Function, depth: int = 0, seen: set[int] | None = None) -> bool:
    """Does ``e`` derive from the program id without going through a load (the rotation of a merge, not a
    loaded key's address)?"""
    seen = seen if seen is not None else set()
    if depth > 8 or id(e) in seen:
        return False
    seen.add(id(e))
    if e.kind == "call" and (e.op in LOADS or e.op in (".load",)):
        return False
    if (e.kind == "call" and e.op == "tl.program_id") or (e.kind == "name" and e.op.startswith("blockIdx")):
        return True
    if e.kind == "name":
        for a in fl.defs(e.op, fn):
            if a.value.kind == "other" and a.value.op in ("loop-var", "item-write"):
                continue
            if _pid_no_loads(fl, a.value, fn, depth + 1, seen):
                return True
        return False
    kids = list(e.args) + list((e.kwargs or {}).values()) + ([e.recv] if e.recv is not None else [])
    return any(_pid_no_loads(fl, k, fn, depth + 1, seen) for k in kids)


def _loaded_index_paths(fl: Flow, e: Expr, fn: Function, cast: str | None = None, mult: bool = False,
                        depth: int = 0, seen: set[int] | None = None) -> Iterator[tuple[Call | Expr, str | None, bool]]:
    """Loads whose value an address expression uses, with the outermost integer cast between the load and the
    address and whether the value is multiplied on the way (``idx * stride``). Loop variables are not followed
    (a range bounded by loaded offsets is not a gather)."""
    seen = seen if seen is not None else set()
    if depth > 10 or id(e) in seen:
        return
    seen.add(id(e))
    if e.kind == "call" and (e.op in LOADS or e.op == ".load") and e.op != "tl.atomic_add":
        yield e, cast, mult
        return
    if e.kind == "cast" and e.args:
        yield from _loaded_index_paths(fl, e.args[0], fn, cast or e.op, mult, depth + 1, seen)
        return
    if e.kind == "call" and e.op == ".to" and e.recv is not None:
        yield from _loaded_index_paths(fl, e.recv, fn, cast, mult, depth + 1, seen)
        return
    if e.kind == "name":
        for a in fl.defs(e.op, fn):
            if a.value.kind == "other" and a.value.op in ("loop-var", "item-write"):
                continue
            yield from _loaded_index_paths(fl, a.value, fn, cast, mult, depth + 1, seen)
        return
    if e.kind == "call" and e.op in ("tl.multiple_of", "tl.max_contiguous", "reinterpret_cast"):
        if e.args:
            yield from _loaded_index_paths(fl, e.args[0], fn, cast, mult, depth + 1, seen)
        return
    if e.kind == "call":
        return  # values computed by other calls (tl.where, tl.minimum of offsets...) are not followed
    m = mult or (e.kind == "bin" and e.op == "*")
    for k in e.args:
        yield from _loaded_index_paths(fl, k, fn, cast, m, depth + 1, seen)


def _gathers(fl: Flow, fn: Function, rows: bool = False) -> list[tuple[Call, list[tuple[Expr, str | None, bool]]]]:
    """Live loads whose address uses a loaded value (a data-dependent gather), with the index paths; ``rows``:
    only gathers of rows (the loaded index multiplied by a stride)."""
    out = []
    for kind, c, _ in fl.memory_ops(fn):
        if kind != "load" or _dead(fl, fn, c.guards):
            continue
        addr = c.expr.kw("pointer", 0) if not c.name.startswith(".") else (c.expr.args[0] if c.expr.args else None)
        if addr is None:
            continue
        paths = [p for p in _loaded_index_paths(fl, addr, fn) if p[0] is not c.expr and (p[2] or not rows)]
        if paths:
            out.append((c, paths))
    return out


def _conversions(fl: Flow, fn: Function, dtypes: list[str]) -> Iterator[tuple[Call, Expr, bool]]:
    """Live conversions of element-wise loaded data to ``dtypes`` (``fp8``, ``int8``): (call, operand,
    saturating). Saturating: a CUDA fp8 conversion intrinsic with ``__NV_SATFINITE`` or an fp8 class
    constructor (which saturates)."""
    want_fp8 = "fp8" in dtypes
    want_int8 = "int8" in dtypes
    for c in _live_calls(fl, fn):
        e = c.expr
        if e.kind == "cast" and e.args:
            op = e.op
            if (want_fp8 and op == "fp8") or (want_int8 and op in _INT8_CASTS):
                if _elementwise(fl, fn, e.args[0], site_of(c)):
                    yield c, e.args[0], False
        elif want_fp8 and e.kind == "call" and e.op in _FP8_CONVERTERS and e.args:
            sat = any(a.kind == "name" and a.op == "__NV_SATFINITE" for a in e.args)
            if _elementwise(fl, fn, e.args[0], site_of(c)):
                yield c, e.args[0], sat
        elif want_fp8 and e.kind == "call" and e.op.split("::")[-1] in _FP8_TYPES and e.args:
            if _elementwise(fl, fn, e.args[0], site_of(c)):
                yield c, e.args[0], True


def _bounded(fl: Flow, e: Expr, fn: Function) -> bool:
    """Is ``e`` clamped on both sides (``tl.clamp``, min of max, ``tl.where`` comparisons on both sides) on its
    element-wise data path?"""
    upper = lower = False
    for n, f, _ in fl.walk(e, fn, depth=6):
        if n.kind == "call" and n.op in _CLAMPS:
            return True
        if n.kind == "call" and (n.op in _MINS or n.op in _MAXS) and len(n.args) >= 2:
            if any(_elementwise(fl, f, a) for a in n.args) if f is fn else True:
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


# ------------------------------------------------------------------------------------------------ quantization


@check("inverse_scale_multiply")
def inverse_scale_multiply(facts: Facts, lang: str) -> CheckResult:
    """An inverse scale is computed once from a reduced value (``inv = QMAX / amax``, with a numerator that is not
    element-wise data: a constant, a ``tl.constexpr`` or a scalar kernel argument such as CUDA's ``float qmax``)
    and multiplies element-wise values (``x * inv``), instead of dividing every element."""
    fl = flow(facts)
    for fn in code(facts, lang):
        taint, seeds = _load_taint(fl, fn)
        recips: list[tuple[set[str], Expr, int]] = []  # (names holding it, division node, line)
        for a in fn.assigns:
            if _dead(fl, fn, a.guards):
                continue
            for n in a.value.nodes():
                if n.kind == "bin" and n.op == "/" and len(n.args) == 2:
                    num, den = n.args
                    if (fl.reduction_derived(den, fn) is not None and fl.reduction_derived(num, fn) is None
                            and not fl.reads_through(num, fn, taint, seeds, site_of(a))):
                        recips.append((set(a.targets) if n is a.value else set(), n, a.line))
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
        for c in _live_calls(fl, fn):
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


# ------------------------------------------------------------------------------------------------ histograms


def _histogram_calls(fl: Flow, fn: Function) -> list[Call]:
    return [c for c in _live_calls(fl, fn) if c.name == "tl.histogram" and c.expr.args
            and _elementwise(fl, fn, c.expr.args[0], site_of(c))]


def _publishes(fn: Function, c: Call) -> bool:
    return c.name in ("tl.store", "store") or c.name in _ATOMIC_ADDS


def _published_value(c: Call) -> Expr | None:
    return c.expr.kw("val", 1) if c.name in _ATOMIC_ADDS else c.expr.kw("value", 1)


@check("tile_histogram")
def tile_histogram(facts: Facts, lang: str) -> CheckResult:
    """Loaded keys are counted with ``tl.histogram`` on code that can run (duplicates within a tile are combined
    before any atomic), and the counts reach a store or an atomic add."""
    fl = flow(facts)
    for fn in code(facts, "triton" if lang == "any" else lang):
        hs = _histogram_calls(fl, fn)
        if not hs:
            continue
        t = fl.taint(fn, None, {id(h.expr) for h in hs})
        for c in _live_calls(fl, fn):
            if _publishes(fn, c):
                v = _published_value(c)
                if v is not None and fl.reads_through(v, fn, t, {id(h.expr) for h in hs}, site_of(c)):
                    return found(f"tl.histogram of loaded keys in {fn.name}, counts published at line {c.line}",
                                 [span(hs[0], "tile histogram"), span(c, "publish")], 0.85)
    return missing("no tl.histogram of loaded keys on code that runs", confidence=0.8)


def _carry_published_after(fl: Flow, fn: Function, feeds: Callable[[Any], bool]) -> tuple[Loop, str, Call] | None:
    """The first (loop, variable, call) where ``fn`` carries ``variable`` across ``loop``, one of its updates
    satisfies ``feeds``, and a live call after the loop publishes (stores or atomically adds) a value that reads it."""
    for lid, by_var in fl.carried(fn).items():
        lp = fn.loop(lid)
        if lp is None:
            continue
        for var, ups in by_var.items():
            if not any(feeds(u) for u in ups):
                continue
            for c in _live_calls(fl, fn):
                if not _publishes(fn, c) or lid in c.loops or pos(c) <= end_pos(lp):
                    continue
                v = _published_value(c)
                if v is not None and fl.refs(v, fn, var):
                    return lp, var, c
    return None


@check("private_histogram_merge")
def private_histogram_merge(facts: Facts, lang: str) -> CheckResult:
    """A program keeps a private histogram across the iterations of a loop over its tiles (a loop-carried
    ``acc += tl.histogram(keys, NB)``) and publishes it once after the loop (an atomic add or a store)."""
    fl = flow(facts)
    for fn in code(facts, "triton" if lang == "any" else lang):
        hs = {id(h.expr): h for h in _histogram_calls(fl, fn)}
        if not hs:
            continue
        t = fl.taint(fn, None, set(hs))
        hit = _carry_published_after(fl, fn, lambda u: id(u) in t.defs
                                     or fl.reads_through(u.value, fn, t, set(hs), site_of(u)))
        if hit:
            lp, var, c = hit
            return found(f"{fn.name} accumulates tl.histogram counts in {var} over the loop at line "
                         f"{lp.line} and publishes them once after it",
                         [span(lp, "loop over tiles"), span(c, "one merge")], 0.85)
    return missing("no histogram accumulated across a loop and published once after it", confidence=0.8)


@check("per_warp_shared")
def per_warp_shared(facts: Facts, lang: str) -> CheckResult:
    """CUDA counters in shared memory are privatised per warp: an atomic add targets a ``__shared__`` buffer at
    an index that includes the warp id (``s_hist[threadIdx.x >> 5][bin]``, ``s[warp * NB + bin]``)."""
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        shared = {s.name for s in facts.shared if s.func in (fn.key, "") or s.func in facts.reachable}
        if not shared:
            continue
        for c in _live_calls(fl, fn):
            if c.name not in _ATOMIC_ADDS or not c.expr.args:
                continue
            target = c.expr.args[0]
            names = {n.op for n, _, _ in fl.walk(target, fn, depth=4) if n.kind == "name"}
            if names & shared and _warp_index(fl, target, fn):
                return found(f"per-warp shared counters in {fn.name}", span(c, "atomic into the warp's copy"), 0.85)
    return missing("no shared-memory atomic indexed by the warp id", confidence=0.8)


@check("relaxed_unused_atomics")
def relaxed_unused_atomics(facts: Facts, lang: str) -> CheckResult:
    """Every atomic add of reachable code discards its result (so it compiles to a RED) and, in Triton, passes
    ``sem='relaxed'`` (the default is acq_rel); at least one exists."""
    fl = flow(facts)
    seen: list[Call] = []
    for fn in code(facts, lang):
        for c in _live_calls(fl, fn):
            if c.name not in _ATOMIC_ADDS:
                continue
            if _used(fn, c):
                return missing(f"the result of the atomic at line {c.line} in {fn.name} is used (ATOM, not RED)",
                               [span(c, "atomic with return")], 0.85)
            if c.name == "tl.atomic_add":
                sem = c.expr.kw("sem")
                val = sem.value if sem is not None and sem.kind == "const" else (
                    facts.consts.get(sem.op) if sem is not None and sem.kind == "name" else None)
                if val != "relaxed":
                    return missing(f"the atomic at line {c.line} in {fn.name} uses the default acq_rel semantics",
                                   [span(c, "not relaxed")], 0.85)
            seen.append(c)
    if seen:
        return found(f"{len(seen)} atomic add(s), relaxed with the result unused", [span(c) for c in seen[:4]], 0.85)
    return missing("no atomic add in reachable code", confidence=0.85)


@check("sparse_rotated_merge")
def sparse_rotated_merge(facts: Facts, lang: str) -> CheckResult:
    """A private histogram is merged with atomics that skip zero counts (``mask=acc > 0``, ``if (c) atomicAdd``)
    at bins rotated by a program-dependent offset (``(slot + pid * K) % NB``, ``(j + blockIdx.x * 37) % NB``),
    so the programs do not all start at bin 0."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for c in _live_calls(fl, fn):
            if c.name not in _ATOMIC_ADDS or not c.expr.args:
                continue
            val = _published_value(c)
            if val is None:
                continue
            vnames = {n.op for n, _, _ in fl.walk(val, fn, depth=2) if n.kind == "name"}
            conds = [c.expr.kw("mask")] if c.name == "tl.atomic_add" else []
            conds += list(c.guards)
            sparse = False
            for cond in conds:
                if cond is None:
                    continue
                for n, f, _ in fl.walk(cond, fn, depth=3):
                    if n.kind == "cmp" and n.op in (">", "!=", ">=") and len(n.args) == 2:
                        zero = [a for a in n.args if fl.fold(a, f) == 0]
                        other = [a for a in n.args if fl.fold(a, f) != 0]
                        if zero and other and any(fl.refs(o, fn, v) for o in other for v in vnames):
                            sparse = True
                if cond.kind == "name" and cond.op in vnames:
                    sparse = True  # if (c) atomicAdd(&g[b], c)
                if cond.kind == "call" and cond.op == "load" and any(
                        fl.refs(cond, fn, v) for v in vnames):  # if (s_hist[b]) atomicAdd(&g[b], s_hist[b])
                    sparse = True
                if sparse:
                    break
            if not sparse:
                continue
            ptr = c.expr.args[0]
            rotated = False
            for n, f, _ in fl.walk(ptr, fn, depth=5):
                if f is fn and n.kind == "bin" and n.op in ("%", "&") and len(n.args) == 2:
                    if _pid_no_loads(fl, n.args[0], fn):
                        rotated = True
                        break
            if rotated:
                return found(f"sparse merge at program-rotated bins in {fn.name}", span(c, "merge"), 0.85)
    return missing("no merge that skips zero bins at a program-dependent bin rotation", confidence=0.8)


# ------------------------------------------------------------------------------------------------ gathers


@check("gather_accumulate")
def gather_accumulate(facts: Facts, lang: str) -> CheckResult:
    """In one kernel, rows gathered through loaded indices feed a loop-carried accumulator (``acc += w *
    tl.load(table + idx * stride + d)``) that is written once after the loop (a store or an atomic add): gather
    and reduction fused, with no gathered matrix in memory."""
    fl = flow(facts)
    for fn in code(facts, lang):
        gathers = _gathers(fl, fn, rows=True)
        if not gathers:
            continue
        seeds = {id(c.expr) for c, _ in gathers}
        hit = _carry_published_after(fl, fn, lambda u: any(id(n) in seeds for n, _, _ in fl.walk(u.value, fn, depth=6)))
        if hit:
            lp, var, c = hit
            return found(f"{fn.name} accumulates gathered rows in {var} over the loop at line {lp.line} "
                         "and writes it once after the loop",
                         [span(gathers[0][0], "gather"), span(c, "one write")], 0.85)
    return missing("no kernel accumulates gathered rows in a loop carry written once after the loop",
                   confidence=0.8)


@check("split_partials_combined")
def split_partials_combined(facts: Facts, lang: str) -> CheckResult:
    """Partial sums of bounded slices are combined across programs: an atomic add (its result unused) of a reduced
    or loop-carried partial (``tl.atomic_add(out + bag * D + d, acc)``), or partials reduced and stored by one
    kernel that a later kernel sums in a loop and writes out (a second pass)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for c in _live_calls(fl, fn):
            if c.name not in _ATOMIC_ADDS or _used(fn, c):  # a used result is a counter claim, not a partial sum
                continue
            v = _published_value(c)
            if v is not None and fl.reduction_derived(v, fn) is not None:
                return found(f"atomic add of a partial sum in {fn.name}", span(c, "atomic of a partial"), 0.85)
    for fn in code(facts, lang):
        carried = fl.carried(fn)
        for kind, c, bases in fl.memory_ops(fn):
            if kind != "load" or not c.loops or _dead(fl, fn, c.guards):
                continue
            partial = None
            for base in bases:
                for k, st in fl.producers(fn, base):
                    sv = fl.stored_value(st)
                    if sv is not None and fl.reduction_derived(sv, k) is not None:
                        partial = (k, st)
            if partial is None:
                continue
            # the later kernel sums several of those partials: a loop carry accumulates the load, written after it
            for lid in c.loops:
                lp = fn.loop(lid)
                for var, ups in carried.get(lid, {}).items():
                    if lp is None or not any(n is c.expr for u in ups for n, _, _ in fl.walk(u.value, fn, depth=4)):
                        continue
                    for st2 in _live_calls(fl, fn):
                        v2 = _published_value(st2) if _publishes(fn, st2) else None
                        if v2 is not None and lid not in st2.loops and pos(st2) > end_pos(lp) and fl.refs(v2, fn, var):
                            k, st = partial
                            return found(f"{fn.name} sums partials that {k.name} reduced and stored",
                                         [span(st, "partial stored"), span(c, "partials summed"),
                                          span(st2, "combined")], 0.8)
    return missing("no partial sums combined by atomics or by a second kernel", confidence=0.8)


@check("reshaped_segment_sum")
def reshaped_segment_sum(facts: Facts, lang: str) -> CheckResult:
    """A flat tile of loaded data is reshaped to rank 3 and reduced over an inner axis (``tl.sum(tl.reshape(blk,
    [BAGS, UNROLL, D]), axis=1)``): a segmented sum that packs several segments (bags, groups) per load."""
    fl = flow(facts)
    for fn in code(facts, "triton" if lang == "any" else lang):
        for c in _live_calls(fl, fn):
            if c.name not in ("tl.sum", "tl.max", "tl.reduce") or not c.expr.args:
                continue
            axis = c.expr.kw("axis", 1)
            ax = fl.fold(axis, fn) if axis is not None else None
            if ax not in (1, -2):
                continue
            for n, f, _ in fl.walk(c.expr.args[0], fn, depth=3):
                if n.kind == "call" and n.op in ("tl.reshape", "tl.view", ".reshape") and f is fn:
                    shape = n.args[1] if len(n.args) > 1 else n.kw("shape")
                    src = n.args[0] if n.args else None
                    if (shape is not None and shape.kind == "tuple" and len(shape.args) == 3 and src is not None
                            and _elementwise(fl, fn, src)):
                        return found(f"rank-3 reshape reduced over axis {ax} in {fn.name}", span(c, "segmented sum"),
                                     0.8)
    return missing("no rank-3 reshape of loaded data reduced over an inner axis", confidence=0.8)


def _narrowed_on_host(fl: Flow, fn: Function, load: Expr) -> bool:
    ptr = load.kw("pointer", 0) if load.op != ".load" else load.recv
    if ptr is None:
        return False
    for base in fl.bases(ptr, fn):
        for src, caller in fl.param_sources(fn, base):
            for n, _, _ in fl.walk(src, caller, depth=3):
                if n.kind == "call" and n.op in (".int", ".short"):
                    return True
                if n.kind == "call" and n.op in (".to", ".type") and any(
                        a.kind == "name" and a.op.rsplit(".", 1)[-1] in ("int32", "int", "int16") for a in n.args):
                    return True
                if n.kind == "cast" and n.op in _NARROW_INTS:
                    return True
    return False


@check("gather_offset_width")
def gather_offset_width(facts: Facts, lang: str) -> CheckResult:
    """Row offsets of gathers (a loaded index multiplied by a row stride) are formed in 64 bits: the index is
    used as loaded from an int64 tensor, or cast to int64, and never narrowed to 32 bits (``.to(tl.int32)``,
    ``int r = idx[i]``, ``indices.int()`` on the host) before the multiply."""
    fl = flow(facts)
    ok: list[Call] = []
    for fn in code(facts, lang):
        for c, paths in _gathers(fl, fn):
            for load, cast, mult in paths:
                if not mult:
                    continue
                if cast is not None and cast in _NARROW_INTS:
                    return missing(f"the gather at line {c.line} in {fn.name} narrows its index to {cast} before the "
                                   "row multiply", [span(c, "32-bit row offset")], 0.85)
                if cast is None and isinstance(load, Expr) and _narrowed_on_host(fl, fn, load):
                    return missing(f"the index of the gather at line {c.line} is narrowed on the host",
                                   [span(c, "32-bit row offset")], 0.8)
                ok.append(c)
    if ok:
        return found(f"{len(ok)} gather(s) with 64-bit row offsets", [span(c, "64-bit row offset") for c in ok[:4]],
                     0.8)
    return missing("no gather of rows through a loaded index", confidence=0.75)


def _policy_values(fl: Flow, fn: Function, c: Call) -> list[str | None] | None:
    """The eviction policies a load can take: one literal (or module constant), None for none, or the values a
    policy parameter receives at the launches (None when not constant)."""
    e = c.expr.kw("eviction_policy")
    if e is None:
        return [None]
    if e.kind == "const":
        return [e.value if isinstance(e.value, str) else None]
    if e.kind == "name" and isinstance(fl.facts.consts.get(e.op), str):
        return [fl.facts.consts[e.op]]
    r = fl.root(e, fn)
    if r.kind == "name" and r.op in fn.params:
        vals: list[str | None] = []
        for src, caller in fl.param_sources(fn, r.op):
            for n, _, _ in fl.walk(src, caller, depth=3):
                if n.kind == "const" and isinstance(n.value, str) and n.value.startswith("evict"):
                    vals.append(n.value)
        return vals or None
    return None


def _host_synced(fl: Flow, fn: Function, e: Expr) -> Expr | None:
    """A host call that reads device data (``.item()``, ``torch.unique``...) which ``e`` (device code) depends on
    through the launch arguments of its parameters."""
    for n, f, _ in fl.walk(e, fn, depth=6, params=True):
        if f.is_device:
            continue
        if n.kind == "call" and n.op in HOST_SYNCS:
            return n
    return None


@check("cache_policy_choice")
def cache_policy_choice(facts: Facts, lang: str) -> CheckResult:
    """The cache policy of one buffer's loads is chosen per workload: Triton loads of the same pointer with
    different ``eviction_policy`` values (at least one of ``evict_first``/``evict_last``) on exclusive branches or
    through a policy parameter, decided by a device value or a launch parameter that is not computed from a host
    read of device data (``.item()``, ``torch.unique``...); CUDA loads of one pointer through two different
    cache-hinted forms (``__ldg`` and ``__ldcs``...)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        mem = [(c, b) for kind, c, b in fl.memory_ops(fn) if kind == "load" and not _dead(fl, fn, c.guards)]
        if fn.lang == "py":
            for i, (c1, b1) in enumerate(mem):
                p1 = _policy_values(fl, fn, c1)
                if p1 is None:
                    continue
                if len(set(p1)) >= 2 and set(p1) & {"evict_first", "evict_last"}:
                    e = c1.expr.kw("eviction_policy")
                    sync = _host_synced(fl, fn, e) if e is not None else None
                    if sync is None:
                        return found(f"eviction policy of the load at line {c1.line} chosen per launch in {fn.name}",
                                     span(c1, "chosen policy"), 0.8)
                for c2, b2 in mem[i + 1:]:
                    if not (b1 & b2) or not exclusive(c1.guards, c2.guards):
                        continue
                    p2 = _policy_values(fl, fn, c2)
                    if p2 is None or set(p1) == set(p2) or not (set(p1) | set(p2)) & {"evict_first", "evict_last"}:
                        continue
                    conds = [g for g in c1.guards if any(g is h or (h.kind == "unary" and h.args and h.args[0] is g)
                                                         or (g.kind == "unary" and g.args and g.args[0] is h)
                                                         for h in c2.guards)]
                    syncs = [s for g in conds if (s := _host_synced(fl, fn, g)) is not None]
                    if syncs:
                        return missing(f"the cache policy in {fn.name} is chosen from a host read of device data "
                                       f"(line {syncs[0].line})", [span(syncs[0], "host sync")], 0.8)
                    return found(f"{fn.name} loads {', '.join(sorted(b1 & b2))} with {p1[0] or 'no hint'} or "
                                 f"{p2[0] or 'no hint'} depending on a run-time condition",
                                 [span(c1, str(p1[0])), span(c2, str(p2[0]))], 0.85)
        else:
            forms: dict[str, dict[str, Call]] = {}
            for c, b in mem:
                hint = _HOST_LOADS.get(c.name, "plain")
                for base in b:
                    forms.setdefault(base, {}).setdefault(hint, c)
            for base, by in forms.items():
                hinted = [h for h in by if h != "plain"]
                if len(hinted) >= 2:
                    cs = list(by.values())
                    return found(f"{fn.name} reads {base} through {', '.join(sorted(hinted))}",
                                 [span(x) for x in cs[:3]], 0.75)
    return missing("no load whose cache policy is chosen per workload", confidence=0.8)


@check("upconvert_fp32")
def upconvert_fp32(facts: Facts, lang: str) -> CheckResult:
    """Gathered rows are converted to fp32 in registers: Triton ``.to(tl.float32)`` of a value loaded through a
    gather; CUDA bf16/fp16 conversion intrinsics (``__bfloat1622float2``, ``__bfloat162float``...) in reachable
    code, an overload of a called helper included (the static front end cannot tell which overload a template
    instantiates)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        if fn.lang == "py":
            gathers = _gathers(fl, fn, rows=True)
            if not gathers:
                continue
            seeds = {id(c.expr) for c, _ in gathers}
            for c in _live_calls(fl, fn):
                if c.expr.kind == "cast" and c.expr.op == "fp32" and c.expr.args and any(
                        id(n) in seeds for n, _, _ in fl.walk(c.expr.args[0], fn, depth=4)):
                    return found(f"gathered rows converted to fp32 in {fn.name}", span(c, "up-conversion"), 0.85)
    if lang in ("cuda", "any") and "cuda" in facts.languages:
        convs = ("__bfloat162float", "__bfloat1622float2", "__half2float", "__half22float2")
        names = {facts.functions[k].name for k in facts.reachable if facts.functions[k].lang == "cuda"}
        funcs = [f for k, f in facts.functions.items() if f.lang == "cuda" and f.is_device
                 and (k in facts.reachable or ("@" in k and f.name in names))]
        for f in funcs:
            for c in f.calls:
                if c.name in convs:
                    return found(f"16-bit values converted to fp32 in {f.name}", span(c, c.name), 0.75)
    return missing("no fp32 up-conversion of gathered rows in device code", confidence=0.8)
