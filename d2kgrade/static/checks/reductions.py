"""Reduction checks: online (rescaled) accumulators, reduction axes and precision, divisions by a reduced value,
warp-level reductions, centered variances, atomics of reduced values."""

from __future__ import annotations

from d2kgrade.static.checkutil import as_list, code, matches, span
from d2kgrade.static.dataflow import LOADS, Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Expr, Function
from d2kgrade.static.patterns.config import arange_dims
from d2kgrade.static.patterns.liveness import evaluated_sites, load_taint
from d2kgrade.static.patterns.names import DIVISIONS
from d2kgrade.static.patterns.reductions import is_max_update, rescale
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


@check("loop_carried_rescale")
def loop_carried_rescale(facts: Facts, lang: str, *, kind: str = "max") -> CheckResult:
    """An online normaliser: inside one loop, a carried running maximum ``m`` is updated from itself
    (``m_new = max(m, ...)``; ``kind: any`` drops this requirement) and a carried running sum ``s`` is rescaled by
    ``exp(m_old - m_new)``: ``s = s * exp(m - m_new) + ...``. Works through helpers that return the pair, for
    Triton tile loops and CUDA loops alike (including warp-shuffle merges of (m, s) pairs)."""
    fl = flow(facts)
    seen_max = ""
    for fn in code(facts, lang):
        for loop_id, by_var in fl.carried(fn).items():
            loop = fn.loop(loop_id)
            maxes = [v for v, ups in by_var.items() if kind == "any" or any(
                is_max_update(fl, fn, a, v, loop) for a in ups)]
            if maxes and not seen_max:
                seen_max = f"{maxes[0]} (line {by_var[maxes[0]][0].line})"
            for m in maxes:
                for s, ups in by_var.items():
                    if s == m:
                        continue
                    for a in ups:
                        prod = rescale(fl, fn, a, s, m, loop)
                        if prod is not None:
                            spans = [Span(by_var[m][0].line, by_var[m][0].end_line, f"running max {m}"),
                                     Span(a.line, a.end_line, f"running sum {s} rescaled"),
                                     span(loop, "loop")]  # type: ignore[arg-type]
                            return found(f"in {fn.name}, {s} is rescaled by exp of the change of running max {m} "
                                         f"in the loop at line {loop.line}", spans, 0.9)  # type: ignore[union-attr]
    if seen_max:
        return missing(f"running max {seen_max} found, but no running sum rescaled by exp(m_old - m_new)",
                       confidence=0.85)
    return missing("no loop-carried running max with a rescaled running sum", confidence=0.85)


@check("reduction_axis")
def reduction_axis(facts: Facts, lang: str, *, axis: int = 1, name: str | list[str] | None = None) -> CheckResult:
    """A reachable reduction (``tl.sum``/``tl.max``... or ``name``) reduces along ``axis`` of a 2-D tile
    (``tl.max(x, axis=1)``, or a negative axis counted from the end of the tile's rank: ``axis=-1``): several rows
    handled by one program."""
    fl = flow(facts)
    names = as_list(name) or ["tl.sum", "tl.max", "tl.min", "tl.reduce", "tl.argmax", "tl.argmin"]
    for fn in code(facts, "triton" if lang == "any" else lang):
        for c in fn.calls:
            if c.name in names:
                a = c.expr.kw("axis", 1)
                k = fl.fold(a, fn) if a is not None else None
                if isinstance(k, int) and k < 0 and c.expr.args:
                    rank = arange_dims(fl, c.expr.args[0], fn)  # axis=-1 of a 2-D tile is its axis 1
                    k = rank + k if rank >= 2 else None
                if k == axis:
                    return found(f"{c.name} along axis {axis} in {fn.name}", span(c, "reduction"), 0.85)
    return missing(f"no reduction along axis {axis}", confidence=0.85)


def _loads_cast(fl: Flow, e: Expr, fn: Function, dtype: str, seen: set[int], depth: int = 0) -> bool | None:
    """True when every load reaching ``e`` is converted to ``dtype`` before use; None when no load reaches it."""
    if depth > 12:
        return None
    if e.kind == "cast":
        return True if e.op == dtype else _loads_cast(fl, e.args[0], fn, dtype, seen, depth + 1) if e.args else None
    if e.kind == "call":
        if e.op in ("tl.zeros", "tl.full"):
            return None
        if e.op in LOADS or (e.op in (".load",) and fn.kind == "jit"):
            return False
    if e.kind == "name":
        defs = fl.defs(e.op, fn)
        if not defs and e.op in fn.params:
            return None
        verdicts = []
        for a in defs:
            if id(a) in seen:
                continue
            seen.add(id(a))
            verdicts.append(_loads_cast(fl, a.value, fn, dtype, seen, depth + 1))
        return None if all(v is None for v in verdicts) else all(v is not False for v in verdicts)
    if e.kind == "cmp":
        return None  # a comparison's operands (a load used only to build a mask) are not summed values
    kids = list(e.args) + list((e.kwargs or {}).values()) + ([e.recv] if e.recv is not None else [])
    if e.kind == "call" and e.op == "tl.where" and len(e.args) == 3:
        kids = [e.args[1], e.args[2]]  # the condition selects; only the two arms are values
    verdicts = [_loads_cast(fl, k, fn, dtype, seen, depth + 1) for k in kids]
    return None if all(v is None for v in verdicts) else all(v is not False for v in verdicts)


@check("reduction_in_fp32")
def reduction_in_fp32(facts: Facts, lang: str, *, name: str | list[str] = "tl.sum", dtype: str = "fp32",
                      expect: str = "cast") -> CheckResult:
    """Every loaded value that reaches a reduction named ``name`` (``any`` = any reduction, including warp
    shuffles and reducing helpers) is converted to ``dtype`` first (``x.to(tl.float32)``, ``__bfloat162float``,
    ``float h = ...``): squares and sums are not formed in 16-bit. ``expect: raw`` inverts the test: the
    reduction runs on the loaded (16-bit) values, as an exact max can."""
    fl = flow(facts)
    names = as_list(name)
    found_any = False
    for fn in code(facts, lang):
        for c in fn.calls:
            if not (matches(c.name, names) or ("any" in names and fl.is_reduction(c.expr, fn))):
                continue
            operand = fl.reduction_operand(c.expr)
            for arg in ([operand] if operand is not None else []):
                v = _loads_cast(fl, arg, fn, dtype, set())
                if v is None:
                    continue
                found_any = True
                if expect == "raw":
                    if not v:
                        return found(f"{c.name} in {fn.name} reduces the loaded values directly", span(c, "reduction"),
                                     0.8)
                    return missing(f"{c.name} at line {c.line} reduces values converted to {dtype}",
                                   [span(c, "reduction")], 0.75)
                if v:
                    return found(f"{c.name} in {fn.name} reduces values converted to {dtype}", span(c, "reduction"),
                                 0.85)
                return missing(f"{c.name} at line {c.line} reduces loaded values not converted to {dtype}",
                               [span(c, "reduction of unconverted data")], 0.8)
    if not found_any:
        return missing(f"no reduction ({', '.join(names)}) of loaded data found", confidence=0.7)
    return missing(f"no reduction of {dtype}-converted data", confidence=0.7)


def _divisions(fn: Function):
    for e, site in evaluated_sites(fn):
        for n in e.walk():
            if n.kind == "bin" and n.op == "/" and len(n.args) == 2:
                yield n, n.args[0], n.args[1], site
            elif n.kind == "call" and n.op in DIVISIONS and len(n.args) == 2:
                yield n, n.args[0], n.args[1], site


def _updated_in_loop(fn: Function, den: Expr, loops: tuple[int, ...]) -> bool:
    """Is the denominator recomputed inside one of the loops around the division (a running sum divided by on
    every iteration), rather than fixed before them (``y[i] = o[i] / l`` in a thread-strided store loop)?"""
    names = den.names()
    for lid in loops:
        lp = fn.loop(lid)
        for n in names:
            if lp is not None and n == lp.var:
                continue
            if any(lid in a.loops and not (a.value.kind == "other" and a.value.op == "loop-var")
                   for a in fn.defs().get(n, [])):
                return True
    return False


@check("division_by_reduction")
def division_by_reduction(facts: Facts, lang: str, *, in_loop: bool | None = None) -> CheckResult:
    """Some element-wise value is divided by a reduced value (``p / s``, ``h / tl.sqrt(ms + eps)``): one division per
    element. Usually negated: the property is to compute a reciprocal (or rsqrt) once and multiply. ``in_loop``:
    only divisions inside (True) or outside (False) a loop (an online softmax renormalised by its running sum on
    every key block, instead of once after the loop)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        taint = load_taint(fl, fn)
        seeds = {id(c.expr) for kind, c, _ in fl.memory_ops(fn) if kind == "load"}
        for node, num, den, site in _divisions(fn):
            if in_loop is not None and _updated_in_loop(fn, den, site[1]) != in_loop:
                continue
            if fl.fold(num, fn) is not None:
                continue
            if not fl.reads_through(num, fn, taint, seeds, site):
                continue
            red = fl.reduction_derived(den, fn)
            if red is not None:
                return found(f"element-wise division by a reduced value at line {node.line} in {fn.name}",
                             [span(node, "per-element division"), Span(red.line, red.end_line, "reduction")], 0.85)
    return missing("no element-wise division by a reduced value", confidence=0.8)


@check("warp_reduction")
def warp_reduction(facts: Facts, lang: str, *, no_block_sync: bool = False) -> CheckResult:
    """Reachable CUDA code reduces across a warp with shuffles (``__shfl_xor_sync``/``__shfl_down_sync``, or
    ``cg::reduce``). ``no_block_sync``: the kernel doing it never calls ``__syncthreads`` (a warp-per-row design)."""
    fl = flow(facts)
    for fn in code(facts, "cuda" if lang == "any" else lang):
        shfl = [c for c in fn.calls if c.name.startswith("__shfl") or matches(c.name, ("cg::reduce",
                                                                                     "cooperative_groups::reduce"))]
        callees = [c for c in fn.calls if (k := fl.callee(c.name, fn)) is not None and k.key in fl.reducers()
                   and fn.kind == "global"]
        if not shfl and not callees:
            continue
        if fn.kind != "global" and no_block_sync:
            continue
        if no_block_sync:
            syncs = [c for c in fn.calls if c.name in ("__syncthreads", "__syncthreads_or", "__syncthreads_and",
                                                       "__syncthreads_count", ".sync", "__barrier_sync")]
            for c in callees:
                k = fl.callee(c.name, fn)
                if k is not None:
                    syncs += [x for x in k.calls if x.name.startswith("__syncthreads")]
            if syncs:
                continue
        hit = (shfl or callees)[0]
        return found(f"warp-level reduction in {fn.name}" + (" with no block barrier" if no_block_sync else ""),
                     span(hit, hit.name), 0.85)
    return missing("no warp-shuffle reduction" + (" without __syncthreads" if no_block_sync else ""), confidence=0.85)


def _centered(fl: Flow, e: Expr, fn: Function) -> bool:
    """Does ``e`` subtract a reduced value (``x - mean``)?"""
    for n, f, env in fl.walk(e, fn, depth=3):
        if n.kind == "bin" and n.op == "-" and len(n.args) == 2 and fl.fold(n.args[1], f, env) is None:
            if fl.reduction_derived(n.args[1], f, env) is not None:
                return True
    return False


def _squares(fl: Flow, red: Expr, fn: Function) -> tuple[list[Expr], list[Expr]]:
    """Squares reduced by ``red``: (centered ones, raw ones)."""
    centered, raw = [], []
    operand = fl.reduction_operand(red)
    for n, f, _ in fl.walk(operand, fn, depth=4) if operand is not None else ():
        sq = None
        if n.kind == "bin" and n.op == "*" and len(n.args) == 2:
            sq = n.args
        elif n.kind == "bin" and n.op == "**" and len(n.args) == 2 and fl.fold(n.args[1], f) == 2:
            sq = (n.args[0], n.args[0])
        if sq is None:
            continue
        if all(_centered(fl, x, f) for x in sq):
            centered.append(n)
        elif not any(_centered(fl, x, f) for x in sq) and all(x.kind != "const" for x in sq):
            raw.append(n)
    return centered, raw


@check("centered_square_reduction")
def centered_square_reduction(facts: Facts, lang: str, *, raw: bool = False) -> CheckResult:
    """A reduction sums squared deviations from a reduced value (``tl.sum((x - mean) * (x - mean))``): a stable
    variance. With ``raw: true`` it looks instead for a reduction of uncentered squares (``tl.sum(x * x)``, the
    E[x^2] - E[x]^2 form), usually negated; a ``tl.reduce`` with a combine function (Welford) counts as centered."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for c in fn.calls:
            if not fl.is_reduction(c.expr, fn):
                continue
            if c.name == "tl.reduce" and len(c.expr.args) >= 3 and not raw:
                return found(f"tl.reduce with a combine function in {fn.name}", span(c, "Welford reduce"), 0.75)
            cen, unc = _squares(fl, c.expr, fn)
            hits = unc if raw else cen
            if hits:
                what = "uncentered squares" if raw else "squared deviations from a reduced mean"
                return found(f"{c.name} of {what} in {fn.name}", [span(c, "reduction"), span(hits[0], "square")], 0.85)
    return missing("no reduction of " + ("uncentered squares" if raw else "squared deviations from a mean"),
                   confidence=0.8)


@check("atomic_of_reduction")
def atomic_of_reduction(facts: Facts, lang: str, *, carried: bool = False, scans: bool = False) -> CheckResult:
    """An atomic add publishes a reduced partial (``tl.atomic_add(y + row, tl.sum(chunk))``, ``atomicAdd(&y[r],
    warp_sum)``): one atomic per chunk, not per element. ``carried``: a loop accumulator counts as a partial too
    (a split-K tile's ``acc`` added into an fp32 workspace). ``scans``: so does a (segmented) scan's value, masked
    to segment ends (``tl.associative_scan``/``tl.cumsum`` over an nnz window, then one atomic per row piece)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for c in fn.calls:
            if c.name in ("tl.atomic_add", "atomicAdd", "atomicAdd_block", "atomicAdd_system"):
                v = c.expr.kw("val", 1)
                if v is None:
                    continue
                if fl.reduction_derived(v, fn) is not None:
                    return found(f"atomic add of a reduced partial in {fn.name}", span(c, "atomic"), 0.85)
                if scans and any(n.kind == "call" and n.op in SCANS for n, _, _ in fl.walk(v, fn, depth=4)):
                    return found(f"atomic add of a scanned partial in {fn.name}", span(c, "atomic"), 0.8)
                if carried and any(n.kind == "name" and n.op in by_var and f is fn
                                   for by_var in fl.carried(fn).values() for n, f, _ in fl.walk(v, fn, depth=3)):
                    return found(f"atomic add of a loop accumulator in {fn.name}", span(c, "atomic"), 0.8)
                # a carry-out fix-up: the value is loaded from partials that an earlier kernel reduced and stored
                for node, f, _ in fl.walk(v, fn, depth=3):
                    if node.kind != "call" or node.op not in LOADS or f is not fn:
                        continue
                    ptr = node.kw("pointer", 0)
                    for base in (fl.bases(ptr, fn) if ptr is not None else set()):
                        for k, st in fl.producers(fn, base):
                            sv = fl.stored_value(st)
                            if sv is not None and fl.reduction_derived(sv, k) is not None:
                                return found(f"{fn.name} atomically adds partials reduced by {k.name}",
                                             [span(c, "atomic"), span(st, "reduced partial")], 0.8)
    return missing("no atomic add of a reduced partial", confidence=0.8)


SCANS = {"tl.cumsum", "tl.associative_scan", "tl.cumprod"}
