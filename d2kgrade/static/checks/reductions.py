"""Reduction checks: online (rescaled) accumulators, reduction axes and precision, what is done once per row
(a reciprocal, an rsqrt) versus per element (a division), warp-level reductions."""

from __future__ import annotations

from d2kgrade.static.checkutil import as_list, code, matches, span
from d2kgrade.static.dataflow import EXPS, LOADS, MAXES, Flow, Taint, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Assign, Expr, Function, pos
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

DIVISIONS = {"__fdividef", "fdividef", "tl.fdiv", "tl.div_rn", "libdevice.div_rn", "__fdiv_rn", "__hdiv"}
RECIPROCALS = {"__frcp_rn", "__frcp_rz", "tl.math.rcp", "libdevice.rcp_rn", "__hrcp", "hrcp", "__fdividef_rcp"}


def _is_max_update(fl: Flow, fn: Function, a: Assign, var: str, loop) -> bool:  # noqa: ANN001
    e, f, env, _ = fl.def_value(a, fn, None, 0)
    for node, nf, nenv in fl.walk(e, f, env, within=loop):
        if node.kind == "call" and node.op in MAXES:
            if any(fl.refs(arg, nf, var, fn, nenv, within=loop) for arg in node.args):
                return True
        if node.kind == "ternary" and node.args and node.args[0].kind == "cmp" and node.args[0].op in (">", "<"):
            if fl.refs(node.args[0], nf, var, fn, nenv, within=loop):
                return True
    return False


def _rescale(fl: Flow, fn: Function, a: Assign, s: str, m: str, loop) -> Expr | None:  # noqa: ANN001
    """A product ``s * exp(... m ...)`` in the update of ``s``."""
    e, f, env, _ = fl.def_value(a, fn, None, 0)
    for node, nf, nenv in fl.walk(e, f, env, within=loop):
        if node.kind != "bin" or node.op != "*" or len(node.args) != 2:
            continue
        for x, y in (node.args, reversed(node.args)):
            if not fl.refs(x, nf, s, fn, nenv, within=loop):
                continue
            for sub, sf, senv in fl.walk(y, nf, nenv, within=loop):
                if sub.kind == "call" and (sub.op in EXPS or matches(sub.op, EXPS)) and any(
                        fl.refs(arg, sf, m, fn, senv, within=loop) for arg in sub.args):
                    return node
    return None


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
                _is_max_update(fl, fn, a, v, loop) for a in ups)]
            if maxes and not seen_max:
                seen_max = f"{maxes[0]} (line {by_var[maxes[0]][0].line})"
            for m in maxes:
                for s, ups in by_var.items():
                    if s == m:
                        continue
                    for a in ups:
                        prod = _rescale(fl, fn, a, s, m, loop)
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
    (``tl.max(x, axis=1)``): several rows handled by one program."""
    fl = flow(facts)
    names = as_list(name) or ["tl.sum", "tl.max", "tl.min", "tl.reduce", "tl.argmax", "tl.argmin"]
    for fn in code(facts, "triton" if lang == "any" else lang):
        for c in fn.calls:
            if c.name in names:
                a = c.expr.kw("axis", 1)
                if a is not None and fl.fold(a, fn) == axis:
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
    kids = list(e.args) + list((e.kwargs or {}).values()) + ([e.recv] if e.recv is not None else [])
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


@check("call_on_reduction")
def call_on_reduction(facts: Facts, lang: str, *, name: str | list[str]) -> CheckResult:
    """A call to ``name`` (``tl.rsqrt``, ``rsqrtf``...) is applied to a reduced value (a row statistic), i.e. once
    per row, not per element."""
    fl = flow(facts)
    names = as_list(name)
    for fn in code(facts, lang):
        for c in fn.calls:
            if matches(c.name, names) and c.expr.args:
                red = fl.reduction_derived(c.expr.args[0], fn)
                if red is not None:
                    return found(f"{c.name} of a reduced value in {fn.name}",
                                 [span(c, c.name), Span(red.line, red.end_line, "reduction")], 0.85)
    return missing(f"no {' / '.join(names)} applied to a reduced value", confidence=0.85)


def _load_taint(fl: Flow, fn: Function) -> Taint:
    def compute() -> Taint:
        seeds = {id(c.expr) for kind, c, _ in fl.memory_ops(fn) if kind == "load"}
        return fl.taint(fn, None, seeds)
    return fl.facts.memo(f"load-taint:{fn.key}", compute)


def _sites(fn: Function):  # noqa: ANN202
    """Every expression of ``fn`` that is evaluated, with where it is read."""
    for a in fn.assigns:
        yield a.value, site_of(a)
    for c in fn.calls:
        if c.name in ("tl.store", "store"):
            yield c.expr, site_of(c)


def _divisions(fn: Function):  # noqa: ANN202
    for e, site in _sites(fn):
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
        taint = _load_taint(fl, fn)
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


@check("reciprocal_multiply")
def reciprocal_multiply(facts: Facts, lang: str, *, any_numerator: bool = False) -> CheckResult:
    """A reciprocal of a reduced value is computed once (``inv = 1.0 / s``, ``__frcp_rn(s)``; with
    ``any_numerator`` any constant over it, ``QMAX / amax``) and then multiplies element-wise values."""
    fl = flow(facts)
    for fn in code(facts, lang):
        taint = _load_taint(fl, fn)
        seeds = {id(c.expr) for kind, c, _ in fl.memory_ops(fn) if kind == "load"}
        recips: list[tuple[Assign, Expr]] = []
        for a in fn.assigns:
            for n in a.value.walk():
                den = None
                one = (lambda x: fl.is_constexpr(x, fn)) if any_numerator else (lambda x: fl.fold(x, fn) == 1)
                if n.kind == "bin" and n.op == "/" and len(n.args) == 2 and one(n.args[0]):
                    den = n.args[1]
                elif n.kind == "call" and n.op in DIVISIONS and len(n.args) == 2 and one(n.args[0]):
                    den = n.args[1]
                elif n.kind == "call" and n.op in RECIPROCALS and n.args:
                    den = n.args[0]
                if den is not None and fl.reduction_derived(den, fn) is not None:
                    recips.append((a, n))
        for a, n in recips:
            names = set(a.targets)
            for e, site in _sites(fn):
                for m in e.walk():
                    if m.kind == "bin" and m.op == "*" and len(m.args) == 2:
                        x, y = m.args
                        for p, q in ((x, y), (y, x)):
                            if (p.names() & names or any(fl.refs(p, fn, t) for t in names)) \
                                    and fl.reads_through(q, fn, taint, seeds, site):
                                return found(f"reciprocal {', '.join(a.targets)} computed once and multiplied in "
                                             f"{fn.name}", [Span(a.line, a.end_line, "reciprocal"),
                                                            span(m, "multiply")], 0.85)
    return missing("no reciprocal of a reduced value that then multiplies element-wise values", confidence=0.8)


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


@check("accumulator_dtype")
def accumulator_dtype(facts: Facts, lang: str, *, dtype: str = "fp32", atomics: bool = False,
                      required: bool = True) -> CheckResult:
    """Every loop-carried accumulator of loaded data starts as ``dtype`` (``tl.zeros([B], dtype=tl.float32)``,
    a float literal, ``float acc = 0.f``), and (``required``) at least one exists. ``atomics``: atomic adds of
    loaded data are accumulators too, and fail when their value is converted to another type first
    (``tl.atomic_add(dw + cols, (dy * xhat).to(tl.bfloat16))``)."""
    from d2kgrade.static.lower import dtype_of

    fl = flow(facts)
    good: list[Span] = []
    for fn in code(facts, lang):
        taint = _load_taint(fl, fn)
        if atomics:
            for c in fn.calls:
                if c.name not in ("tl.atomic_add", "atomicAdd", "atomicAdd_block", "atomicAdd_system"):
                    continue
                v = c.expr.kw("val", 1)
                if v is None or not fl.reads_through(v, fn, taint, set(), site_of(c)):
                    continue
                root = fl.root(v, fn)
                defs = fn.defs().get(root.op, []) if root.kind == "name" else []
                if len(defs) == 1:  # val = (dy * xhat).to(tl.bfloat16); tl.atomic_add(p, val)
                    root = defs[0].value
                dt = root.op if root.kind == "cast" else None
                if dt is not None and dt != dtype:
                    return missing(f"atomic accumulation in {fn.name} adds {dt} values, not {dtype}",
                                   [span(c, "atomic add")], 0.8)
                good.append(span(c, f"atomic accumulation of {dt or 'unconverted'} values"))
        for lid, by_var in fl.carried(fn).items():
            for v, ups in by_var.items():
                if not any(u.aug == "+" or (u.value.kind == "bin" and u.value.op == "+") for u in ups):
                    continue
                if not any(fl.reads_through(u.value, fn, taint, set(), site_of(u)) for u in ups):
                    continue
                inits = [a for a in fn.defs().get(v, []) if lid not in a.loops and pos(a) < pos(ups[0])]
                for a in inits:
                    val = a.value
                    if val.kind == "call" and val.op in ("tl.zeros", "tl.full", "tl.zeros_like"):
                        dt = dtype_of(val.kw("dtype", 1 if val.op == "tl.zeros" else 2))
                    elif val.kind == "cast":
                        dt = val.op
                    elif val.kind == "const":
                        dt = "fp32" if isinstance(val.value, float) else "int32" if isinstance(val.value, int) else None
                    else:
                        dt = None
                    if dt is not None and dt != dtype:
                        return missing(f"accumulator {v} in {fn.name} starts as {dt}, not {dtype}",
                                       [Span(a.line, a.end_line, "accumulator init")], 0.8)
                    if dt == dtype:
                        good.append(Span(a.line, a.end_line, f"{v}: {dtype} accumulator"))
    if good:
        return found(f"{len(good)} {dtype} accumulator(s)", good[:4], 0.8)
    if not required:
        return found(f"no accumulator of loaded data in another type than {dtype}", [], 0.6)
    return missing(f"no {dtype} loop accumulator of loaded data", confidence=0.7)


SCANS = {"tl.cumsum", "tl.associative_scan", "tl.cumprod"}


@check("scan_with_carry")
def scan_with_carry(facts: Facts, lang: str) -> CheckResult:
    """A loop over tiles scans each tile (``tl.cumsum``) and adds a carry accumulated across iterations
    (``y = tl.cumsum(x, 0) + carry; carry += tl.sum(x, 0)``): one pass over a long row."""
    fl = flow(facts)
    for fn in code(facts, lang):
        carried = fl.carried(fn)
        for kind, st, _ in fl.memory_ops(fn):
            if kind != "store" or not st.loops:
                continue
            v = fl.stored_value(st)
            if v is None:
                continue
            for lid in st.loops:
                by_var = carried.get(lid, {})
                loop = fn.loop(lid)
                scans = [n for n, _, _ in fl.walk(v, fn, depth=4) if n.kind == "call" and n.op in SCANS]
                carries = [c for c in by_var if fl.refs(v, fn, c, within=loop)]
                if scans and carries:
                    return found(f"tile scan plus carried total {carries[0]} in {fn.name}",
                                 [span(scans[0], "tile scan"), span(st, "store with carry")], 0.85)
    return missing("no tile scan combined with a carry across loop iterations", confidence=0.8)
