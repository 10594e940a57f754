"""Static checks of task ``causal_conv1d``: the ones only its rubric (``rubrics/causal_conv1d.yaml``) uses.

- ``block_token_run``
- ``fast_sigmoid_fp32``
- ``fused_activation``
- ``loaded_bound_mask``
- ``pid_tile_load``
- ``register_shift_window``
- ``shared_input_tile``
- ``shifted_tile_loads``
- ``streaming_store``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code, matches, span
from d2kgrade.static.dataflow import EXPS, Flow, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function, Loop, pos
from d2kgrade.static.patterns.access import access_base, aranges, is_read, loads_of_fn, row_names, unit_arange
from d2kgrade.static.patterns.config import arange_dims
from d2kgrade.static.patterns.names import EXP2_CALLS, LOG2E, SIXTEEN_BIT, init_dtype, log2e_product
from d2kgrade.static.patterns.roles import input_loads, input_params_of
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

ACTIVATIONS = {"tl.sigmoid", *EXPS}


def _gathered(fl: Flow, ptr: Expr, fn: Function) -> bool:
    """Does an address depend on a value read from memory (directly or through a loop that starts at one)?"""
    return any(is_read(n, f) for n, f, _ in fl.walk(ptr, fn, depth=8) if f is fn)


def _static_trip(fl: Flow, fn: Function, lp: Loop) -> bool:
    """A loop with a compile-time trip count (``tl.static_range(W)``, ``range(W)`` with ``W: tl.constexpr``)."""
    if lp.kind == "tl.static_range" or lp.unroll:
        return True
    if lp.kind in ("range", "tl.range") and lp.stop is not None:
        return all(fl.is_constexpr(e, fn) for e in (lp.start, lp.stop, lp.step) if e is not None)
    return False


_STREAMING_PTX = ("st.global.cs", "st.global.L1::no_allocate", "st.global.L1::evict_first", "st.global.wt")


def _asm_stores(facts: Facts, fn: Function, patterns: tuple[str, ...] = ("st.global",)) -> list:
    """Reachable inline-PTX stores (``asm("st.global...")``) in ``fn`` or a device helper it calls."""
    called = {c.name for c in fn.calls} | {fn.name}
    return [t for t in facts.reachable_tokens("asm") if any(p in t.text for p in patterns)
            and (t.func == fn.key or (t.func or "").removeprefix("cu:") in called)]


@check("block_token_run")
def block_token_run(facts: Facts, lang: str, *, inputs: list[int]) -> CheckResult:
    """CUDA: a block owns a run of consecutive positions: a load of ``inputs`` (positions in ``kernel(...)``) sits
    in a loop over positions that starts at a ``blockIdx``-derived index not read from memory, and its address
    reads the loop variable (``t0 = run * RUN; for (t = t0; t < t1; ++t) x[(b * L + t) * D + c]``), whatever the
    grid's shape (a 1-D grid split into (run, channel block, batch) counts). One position per block
    (``t = blockIdx.y``) or runs placed by ``cu_seqlens[blockIdx.x]`` do not."""
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        for c in input_loads(fl, fn, inputs):
            ptr = access_base(c)
            if ptr is None:
                continue
            for lid in c.loops:
                lp = fn.loop(lid)
                if lp is None or lp.var is None or lp.start is None or lp.unroll:
                    continue
                if fl.pid_derived(lp.start, fn) and not _gathered(fl, lp.start, fn) and fl.refs(ptr, fn, lp.var):
                    return found(f"{fn.name} walks a blockIdx-placed run of positions from line {lp.line}",
                                 [span(lp, "run of positions"), span(c, "input load")], 0.8)
    return missing("no block walks a run of positions placed by its block index", confidence=0.75)


@check("shared_input_tile")
def shared_input_tile(facts: Facts, lang: str, *, inputs: list[int]) -> CheckResult:
    """CUDA: the input tile is staged in shared memory: a ``__shared__`` buffer is written with values loaded from
    ``inputs`` of ``kernel(...)`` (``s_x[r][c] = x[...]``, or an async copy ``__pipeline_memcpy_async(&s_x[..],
    &x[..])``). Shared memory holding only the weights or the bias does not stage the input."""
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        shared = {b.name for b in facts.shared}
        if not shared:
            continue
        params = input_params_of(fl, fn, inputs)
        if not params:
            continue
        for a in fn.assigns:
            if not set(a.targets) & shared:
                continue
            for n, f, _ in fl.walk(a.value, fn, depth=6):
                if f is fn and is_read(n, fn) and (p := n.kw("pointer", 0)) is not None and fl.bases(p, fn) & params:
                    return found(f"{fn.name} stages input data in __shared__ {a.targets[0]}",
                                 Span(a.line, a.end_line, "shared input tile"), 0.8)
        for c in fn.calls:
            if "memcpy_async" in c.name and len(c.expr.args) >= 2:
                dst, src = c.expr.args[0], c.expr.args[1]
                if dst.names() & shared and fl.bases(src, fn) & params:
                    return found(f"{fn.name} copies input data into shared memory asynchronously",
                                 span(c, c.name), 0.8)
    return missing("no __shared__ buffer holds data loaded from the input", confidence=0.75)


@check("streaming_store")
def streaming_store(facts: Facts, lang: str) -> CheckResult:
    """The output is written with a streaming (evict-first) hint: a Triton ``tl.store`` with
    ``cache_modifier='.cs'`` or ``eviction_policy='evict_first'`` (both emit an evict-first store); CUDA
    ``__stcs``/``__stwt`` or an inline-PTX ``st.global.cs`` / ``.L1::no_allocate`` store."""
    def hint(c: Call, kw: str) -> object:
        e = c.expr.kw(kw)
        if e is None:
            return None
        return facts.consts.get(e.op) if e.kind == "name" else e.value

    for fn in code(facts, lang):
        for c in fn.calls:
            if c.name in ("tl.store", ".store") and (hint(c, "cache_modifier") in (".cs", ".wt")
                                                     or hint(c, "eviction_policy") == "evict_first"):
                return found(f"streaming store in {fn.name}", span(c, "streaming store"), 0.9)
            if c.name in ("__stcs", "__stwt"):
                return found(f"{c.name} in {fn.name}", span(c, c.name), 0.9)
        asm = _asm_stores(facts, fn, _STREAMING_PTX)
        if asm:
            return found(f"inline-PTX streaming store reached from {fn.name}",
                         Span(asm[0].line, asm[0].end_line, "st.global.cs"), 0.85)
    return missing("no store with a streaming hint (.cs / evict_first / __stcs / st.global.cs)", confidence=0.85)


@check("shifted_tile_loads")
def shifted_tile_loads(facts: Facts, lang: str, *, min_rank: int = 2, inputs: list[int] | None = None
                       ) -> CheckResult:
    """One program forms several taps from shifted loads of one tile: a pointer (of ``inputs`` when given) is loaded
    as a tile of rank >= ``min_rank`` (``src[:, None] * D + offs_d[None, :]``) at two or more load sites, or at one
    site inside a loop with a compile-time trip count whose variable shifts the address (``for j in
    tl.static_range(W)``). The overlapping rows of the shifted tiles hit L1, so the halo is read from HBM once."""

    fl = flow(facts)
    best = 0
    for fn in code(facts, "triton"):
        params = input_params_of(fl, fn, inputs) if inputs is not None else None
        by_base: dict[str, list[Call]] = {}
        for c, bases in loads_of_fn(fl, fn):
            ptr = access_base(c)
            if ptr is None or c.name.startswith(".") or (params is not None and not bases & params):
                continue
            r = arange_dims(fl, ptr, fn)
            best = max(best, r)
            if r < min_rank:
                continue
            for b in bases:
                by_base.setdefault(b, []).append(c)
            for lid in c.loops:
                lp = fn.loop(lid)
                if lp is not None and lp.var and _static_trip(fl, fn, lp) and fl.refs(ptr, fn, lp.var):
                    return found(f"{fn.name} loads {', '.join(sorted(bases))} as shifted {r}-D tiles in the tap "
                                 f"loop at line {lp.line}", [span(lp, "tap loop"), span(c, "shifted tile")], 0.8)
        for b, cs in by_base.items():
            if len(cs) >= 2:
                return found(f"{fn.name} loads {b} as {len(cs)} shifted tiles",
                             [span(c, "shifted tile") for c in cs[:4]], 0.8)
    return missing(f"no pointer loaded as shifted tiles of rank >= {min_rank} (largest tile rank: {best})",
                   confidence=0.75)


@check("register_shift_window")
def register_shift_window(facts: Facts, lang: str, *, min_taps: int = 2) -> CheckResult:
    """A walk over positions keeps the previous inputs in registers: inside a loop, at least ``min_taps`` variables
    defined before it form a shift chain (``x_m3 = x_m2; x_m2 = x_m1; x_m1 = x_t``) that ends in a value loaded in
    that loop, or a local array defined before it is shifted (``win[k] = win[k - 1]``) and refilled from a load
    (``win[0] = x_t``); each input is loaded once and the earlier ones are reused from registers."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for lp in fn.loops:
            inside = [a for a in fn.assigns if lp.id in a.loops and len(a.targets) == 1]
            assigned = {a.targets[0] for a in inside}
            copies = {a.targets[0]: a.value.op for a in inside if a.value.kind == "name" and a.value.op in assigned}
            loaded = {a.targets[0] for a in inside if any(is_read(n, f) for n, f, _ in
                                                          fl.walk(a.value, fn, within=lp, depth=3))}
            before = {t for t in assigned if any(lp.id not in d.loops and pos(d) < pos(lp)
                                                 for d in fn.defs().get(t, []))}
            for start in copies:
                chain, v = [], start
                while v in copies and v not in chain and len(chain) < 16:
                    chain.append(v)
                    v = copies[v]
                regs = [x for x in chain if x in before]
                if v in loaded and len(regs) >= min_taps:
                    return found(f"{fn.name} shifts {' <- '.join(chain + [v])} in the loop at line {lp.line}",
                                 span(lp, "register window"), 0.8)
            # a local array used as the window: win[k] = win[k - 1] (in an inner loop) and win[0] = x_t
            writes = [a for a in inside if a.value.kind == "other" and a.value.op == "item-write"
                      and len(a.value.args) == 2]
            for a in writes:
                arr = a.targets[0]
                if arr not in before or not any(n.kind == "sub" and arr in n.names() for n in a.value.args[1].walk()):
                    continue
                refill = [b for b in writes if b is not a and b.targets[0] == arr and any(
                    is_read(n, f) for n, f, _ in fl.walk(b.value.args[1], fn, within=lp, depth=4))]
                if refill:
                    return found(f"{fn.name} shifts the register array {arr} in the loop at line {lp.line} and "
                                 f"refills it from a load", [Span(a.line, a.end_line, "shift"),
                                                             Span(refill[0].line, refill[0].end_line, "refill")], 0.8)
    return missing(f"no chain of >= {min_taps} registers shifted through a loop and fed by a load", confidence=0.75)


def _fp32_origin(fl: Flow, e: Expr, fn: Function) -> bool:
    """Is ``e`` computed in fp32: some value it is built from is converted to (or created as) fp32, and no 16-bit
    accumulator or conversion sits on the way?"""
    fp32 = False
    for n, f, _ in fl.walk(e, fn, depth=8):
        if n.kind == "cast":
            if n.op in SIXTEEN_BIT:
                return False
            fp32 = fp32 or n.op == "fp32"
        dt = init_dtype(n) if n.kind == "call" else None
        if dt in SIXTEEN_BIT:
            return False
        fp32 = fp32 or dt == "fp32"
    return fp32


@check("fused_activation")
def fused_activation(facts: Facts, lang: str, *, inputs: list[int] | None = None, min_sources: int = 2,
                     fp32: bool = True, calls: list[str] | None = None) -> CheckResult:
    """One kernel that stores applies an activation (``tl.sigmoid`` or an exponential; ``calls`` to choose) to a
    value computed from loaded data: with ``inputs`` (positions in ``kernel(...)``), from loads of every one of
    them (input, weights, bias: any value path, including a tap picked out of a weight tile); otherwise combined
    element-wise from loads of at least ``min_sources`` different pointers. The bias, the FMA chain and the
    activation are then fused. ``fp32``: that value is computed in fp32 (an operand converted to or created as
    fp32, no 16-bit accumulator on the way). A store in inline PTX (``st.global.cs.v4``) counts as the kernel's
    store."""
    fl = flow(facts)
    names = calls or sorted(ACTIVATIONS)
    best = ""
    for fn in code(facts, lang):
        if not any(kind == "store" for kind, _, _ in fl.memory_ops(fn)) and not _asm_stores(facts, fn):
            continue
        loads = loads_of_fn(fl, fn)
        taints = [(c, b, fl.taint(fn, None, {id(c.expr)})) for c, b in loads if b] if inputs is None else []
        wanted = {i: input_params_of(fl, fn, [i]) for i in inputs} if inputs is not None else {}
        for c in fn.calls:
            if not matches(c.name, names) or not c.expr.args:
                continue
            arg = c.expr.args[0]
            if inputs is not None:
                bases = set()
                for n, f, _ in fl.walk(arg, fn, depth=10):
                    if f is fn and is_read(n, fn) and (p := n.kw("pointer", 0)) is not None:
                        bases |= fl.bases(p, fn)
                lacking = [i for i, ps in wanted.items() if not ps & bases]
                if lacking:
                    best = best or f"the {c.name} at line {c.line} of {fn.name} does not read input(s) {lacking}"
                    continue
            else:
                bases = set()
                for lc, b, t in taints:
                    if fl.reads_through(arg, fn, t, {id(lc.expr)}, site_of(c)):
                        bases |= b
                if len(bases) < min_sources:
                    best = best or f"the {c.name} at line {c.line} of {fn.name} combines {len(bases)} input(s)"
                    continue
            if fp32 and not _fp32_origin(fl, arg, fn):
                best = f"the {c.name} at line {c.line} of {fn.name} acts on a value not computed in fp32"
                continue
            return found(f"{fn.name} applies {c.name} to a value computed from {', '.join(sorted(bases))}",
                         span(c, "fused activation"), 0.8)
    return missing(best or "no activation applied to a combination of loaded inputs", confidence=0.75)


@check("pid_tile_load")
def pid_tile_load(facts: Facts, lang: str, *, inputs: list[int]) -> CheckResult:
    """A program owns a block of the input along two axes: a load of ``inputs`` has a unit-stride innermost
    ``tl.arange`` offset by the program id (a column block), and its other index is program-id-derived and
    spans several rows: a broadcast ``rows[:, None]`` arange offset by the program id, or the variable of a loop
    that starts at a program-id-derived position (a run of rows). Neither comes from a value read from memory (one
    program per packed sequence, placed by ``cu_seqlens[pid]``, does not count)."""

    fl = flow(facts)
    best = "no load of the input"
    for fn in code(facts, "triton"):
        rows = row_names(fl, fn)
        owners = {id(n) for a in fn.assigns if fl.pid_derived(a.value, fn) for n in a.value.walk()
                  if n.kind == "call" and n.op == "tl.arange"}
        for c in input_loads(fl, fn, inputs):
            ptr = access_base(c)
            if ptr is None or c.name.startswith("."):
                continue
            ar = unit_arange(fl, ptr, fn)
            if ar is None or id(ar) not in owners:
                best = f"the load at line {c.line} of {fn.name} has no program-id-offset contiguous column block"
                continue
            if _gathered(fl, ptr, fn):
                best = f"the load at line {c.line} of {fn.name} is placed by a value read from memory"
                continue
            other = [a for a in aranges(fl, ptr, fn) if a is not ar and id(a) in owners]
            run = [fn.loop(l) for l in c.loops]
            run = [lp for lp in run if lp is not None and lp.var and lp.start is not None
                   and fl.pid_derived(lp.start, fn) and fl.refs(ptr, fn, lp.var)]
            if other or run:
                what = "a program-id-offset row range" if other else f"the run of the loop at line {run[0].line}"
                return found(f"{fn.name} owns a 2-D block: columns offset by the program id and {what}",
                             span(c, "owned tile"), 0.8)
            best = f"the load at line {c.line} of {fn.name} covers no program-owned range of rows"
    return missing(best, confidence=0.75)


def _bound_loads(fl: Flow, e: Expr, fn: Function) -> list[Expr]:
    """Reads of memory ``e`` depends on whose address varies (not a fixed ``cu_seqlens[0]``)."""
    out = []
    for n, f, _ in fl.walk(e, fn, depth=8):
        if f is fn and is_read(n, fn):
            ptr = n.kw("pointer", 0) if not n.op.startswith(".") else n.recv
            if ptr is not None and any(x.kind == "name" and not fl.is_constexpr(x, fn) and x.op not in fn.params
                                       for x in ptr.walk()):
                out.append(n)
    return out


@check("loaded_bound_mask")
def loaded_bound_mask(facts: Facts, lang: str, *, inputs: list[int]) -> CheckResult:
    """Tiles on the global axis with data-dependent boundaries: a load of ``inputs`` whose address does not depend
    on memory is masked by a comparison with a value read from memory at a position-dependent address (each token's
    sequence start from a binary search of ``cu_seqlens`` or a per-token array); or a loop over positions that
    starts at a program-id-derived index branches on such a value (clearing a register window at the next sequence
    start). A start read from a fixed address, a start passed per launch, or tiles placed by ``cu_seqlens[pid]`` do
    not count."""
    fl = flow(facts)
    for fn in code(facts, lang):
        params = input_params_of(fl, fn, inputs)
        xs = [(c, access_base(c)) for c, b in loads_of_fn(fl, fn) if b & params]
        xs = [(c, p) for c, p in xs if p is not None and not _gathered(fl, p, fn)]
        if not xs:
            continue
        for c, _ in xs:
            mask = c.expr.kw("mask", 1) if c.name == "tl.load" else None
            if mask is None:
                continue
            for n, f, _ in fl.walk(mask, fn, depth=6):
                if f is fn and n.kind == "cmp" and n.op in ("<", "<=", ">", ">="):
                    hit = [b for side in n.args for b in _bound_loads(fl, side, fn)]
                    if hit:
                        return found(f"the load at line {c.line} of {fn.name} is masked against a boundary read "
                                     "from memory", [span(c, "masked tap"), Span(hit[0].line, hit[0].end_line,
                                                                                 "boundary")], 0.8)
        for lp in fn.loops:
            if lp.start is None or not fl.pid_derived(lp.start, fn) or _gathered(fl, lp.start, fn):
                continue
            if not any(lp.id in c.loops for c, _ in xs):
                continue
            for x in list(fn.assigns) + list(fn.calls):
                if lp.id not in x.loops:
                    continue
                for g in x.guards:
                    cond = g.args[0] if g.kind == "unary" and g.op == "not" and g.args else g
                    if cond.kind == "cmp" and _bound_loads(fl, cond, fn):
                        return found(f"the walk at line {lp.line} of {fn.name} branches on a boundary read from "
                                     "memory", [span(lp, "walk"), Span(cond.line, cond.end_line, "boundary")], 0.8)
    return missing("no input load masked (or walk reset) at a boundary read from memory", confidence=0.75)


@check("fast_sigmoid_fp32")
def fast_sigmoid_fp32(facts: Facts, lang: str) -> CheckResult:
    """A sigmoid with a fast exponential, in fp32: ``tl.sigmoid(v)`` or ``exp2`` of a value scaled by log2(e) (either
    sign: ``exp2(-v * LOG2E)``, ``exp2(v * NEG_LOG2E)``), whose argument is computed in fp32 (an operand converted to
    or created as fp32, no 16-bit value on the way)."""
    fl = flow(facts)
    best = "no tl.sigmoid or log2(e)-scaled exp2"
    for fn in code(facts, "triton"):
        for c in fn.calls:
            if not c.expr.args:
                continue
            arg = c.expr.args[0]
            if c.name in EXP2_CALLS:
                scaled = any(log2e_product(fl, n, f) or (n.kind in ("name", "const") and isinstance(
                    v := fl.fold(n, f, env), (int, float)) and abs(abs(v) - LOG2E) < 1e-3)
                    for n, f, env in fl.walk(arg, fn, depth=6) if f is fn)
                if not scaled:
                    continue
            elif c.name != "tl.sigmoid":
                continue
            if _fp32_origin(fl, arg, fn):
                return found(f"{c.name} on an fp32 value in {fn.name}", span(c, "fast sigmoid"), 0.8)
            best = f"the {c.name} at line {c.line} of {fn.name} acts on a value not computed in fp32"
    return missing(best, confidence=0.75)
