"""Static checks of task ``gemm_fp8_blockwise``: the ones only its rubric (``rubrics/gemm_fp8_blockwise.yaml``) uses.

- ``fresh_fp8_mma``
- ``k_major_operands``
- ``per_block_promotion``
- ``scale_block_k``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function, Loop
from d2kgrade.static.patterns.access import computed_from, loads_of, row_arange_sizes, unit_arange
from d2kgrade.static.patterns.mma import asm_text, main_loop, mma_calls, mma_values
from d2kgrade.static.patterns.names import DOTS, expr_key
from d2kgrade.static.patterns.roles import input_params_with_methods
from d2kgrade.static.registry import CheckResult, check, found, missing

TRANSPOSES = {".t", ".transpose", ".permute", ".T", ".mT"}


TRANSPOSE_CALLS = {"tl.trans", "tl.permute", ".trans", ".permute", ".T"}


def _fresh_dot(c: Call) -> bool:
    """A ``tl.dot`` that starts from zero (no accumulator argument)."""
    e = c.expr
    return c.name == "tl.dot" and len(e.args) < 3 and not (e.kwargs and "acc" in e.kwargs)


def _promotions(fl: Flow, facts: Facts, fn: Function) -> list[tuple[Expr, Loop]]:
    """Per-block promotions: an update of a loop-carried accumulator adding a fresh block product multiplied by
    values loaded in the same loop (the block's scales)."""
    out = []
    carried = fl.carried(fn)
    loads = {id(c.expr): c for kind, c, _ in fl.memory_ops(fn) if kind == "load"}
    for lid, by_var in carried.items():
        loop = fn.loop(lid)
        if loop is None:
            continue
        for var, ups in by_var.items():
            for a in ups:
                nodes = [(n, f) for n, f, _ in fl.walk(a.value, fn, within=loop, depth=5)]
                fresh = [n for n, f in nodes if f is fn and n.kind == "call"
                         and any(c.expr is n and _fresh_dot(c) for c in fn.calls)]
                if fn.lang == "cuda":
                    fresh = _cuda_fresh_parts(fl, facts, fn, a.value, loop)
                if not fresh:
                    continue
                scaled = [n for n, f in nodes if f is fn and id(n) in loads and lid in loads[id(n)].loops
                          and not any(n is x for fr in fresh for x, _, _ in fl.walk(fr, fn, depth=3) if x is not fr)]
                if scaled:
                    out.append((a.value, loop))
    return out


def _cuda_fresh_parts(fl: Flow, facts: Facts, fn: Function, value: Expr, loop: Loop) -> list[Expr]:
    """CUDA: arrays read by ``value`` that are zeroed inside ``loop`` and written by an MMA in it (a temporary
    accumulator per K block)."""
    arrays = {n.args[0].op for n in value.nodes() if n.kind == "sub" and n.args and n.args[0].kind == "name"}
    arrays |= {n.op for n in value.nodes() if n.kind == "name"}
    mmas = [c for c in mma_calls(facts, fn) if loop.id in c.loops]
    if not mmas:
        return []
    out = []
    for arr in arrays:
        zeroed = [a for a in fn.defs().get(arr, []) if loop.id in a.loops and a.value.kind == "other"
                  and a.value.op == "item-write" and len(a.value.args) == 2 and fl.fold(a.value.args[1], fn) == 0]
        zeroed += [a for a in fn.assigns if loop.id in a.loops and a.value.kind == "call"
                   and a.value.op.endswith("fill_fragment") and a.value.args and arr in a.value.args[0].names()]
        filled = [c for c in fn.calls if loop.id in c.loops and c.name.endswith("fill_fragment") and c.expr.args
                  and arr in c.expr.args[0].names() and c.expr.args[1:] and fl.fold(c.expr.args[1], fn) == 0]
        fed = any(arr in d.value.names() for d in fn.assigns if loop.id in d.loops and d.targets
                  and "@" in d.targets[0]) or any(arr in c.expr.names() for c in mmas)
        if (zeroed or filled) and fed:
            out.append(next(n for n in value.nodes() if (n.kind == "name" and n.op == arr) or (
                n.kind == "sub" and n.args and n.args[0].kind == "name" and n.args[0].op == arr)))
    return out


@check("per_block_promotion")
def per_block_promotion(facts: Facts, lang: str) -> CheckResult:
    """Inside the K loop, a fresh block product (``tl.dot`` without an accumulator argument; CUDA: an MMA into a
    temporary accumulator zeroed in the loop) is multiplied by values loaded in the same iteration (the block's
    scales) and added to a loop-carried accumulator (``acc += tl.dot(a, b) * sa[:, None] * sb``,
    ``tl.fma(tl.dot(a, b), s, acc)``)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        hits = _promotions(fl, facts, fn)
        if hits:
            v, loop = hits[0]
            return found(f"per-block promotion of a fresh block product in {fn.name}",
                         [span(v, "acc += partial * scales"), span(loop, "K loop")], 0.8)
    return missing("no fresh per-block product scaled by in-loop loads and added to an accumulator", confidence=0.8)


def _k_tile_values(fl: Flow, facts: Facts, fn: Function, loads: list[Call]) -> list[int | None]:
    """Widths of the K tile of the operand loads: innermost unit-stride ``tl.arange``, descriptor block shape, or
    the multiplier of the loop variable in a descriptor offset."""

    vals: list[int | None] = []
    for c in loads:
        if c.name.startswith("."):
            coords = c.expr.args[0] if c.expr.args else None
            if coords is not None and coords.kind == "tuple" and len(coords.args) >= 2:
                k = coords.args[-1]
                for n, f, _ in fl.walk(k, fn, depth=2):
                    if f is fn and n.kind == "bin" and n.op == "*" and len(n.args) == 2:
                        for x in n.args:
                            if x.kind == "name" and (fl.is_constexpr(x, fn) or fl.fold(x, fn) is not None):
                                vals += mma_values(fl, facts, fn, x)
                        break
            continue
        ptr = c.expr.kw("pointer", 0)
        if ptr is None:
            continue
        blk = [n for n, f, _ in fl.walk(ptr, fn, depth=4)
               if f is fn and n.kind == "call" and n.op == "tl.make_block_ptr"]
        shape = blk[0].kw("block_shape") if blk else None
        if shape is not None and shape.kind == "tuple" and shape.args:
            vals += mma_values(fl, facts, fn, shape.args[-1])  # [BM, BK] of the K-major A
            continue
        ar = unit_arange(fl, ptr, fn)
        if ar is not None and len(ar.args) == 2:
            vals += mma_values(fl, facts, fn, ar.args[1])
    return vals


@check("scale_block_k")
def scale_block_k(facts: Facts, lang: str, *, block: int = 128, a_index: int = 0, b_index: int = 1,
                  scale_indices: list[int] | None = None) -> CheckResult:
    """The K loop steps exactly one scale block: the K tile of the operand loads (inputs ``a_index`` and
    ``b_index``) is ``block`` wide in every configuration, and the scales (inputs ``scale_indices``, default the
    next two) are loaded inside that loop, in the same iteration as the tiles. CUDA: the K loop's tile constant is
    ``block`` and the scales are loaded in it."""
    fl = flow(facts)
    sidx = scale_indices or [b_index + 1, b_index + 2]
    reason = "no K loop loading both operand tiles and scales"
    for fn in code(facts, lang):
        operands = set(input_params_with_methods(fl, facts, fn, a_index))
        operands |= set(input_params_with_methods(fl, facts, fn, b_index))
        op_loads = loads_of(fl, fn, operands)
        sc_params = set()
        for i in sidx:
            sc_params |= set(input_params_with_methods(fl, facts, fn, i))
        sc_loads = loads_of(fl, fn, sc_params)
        if fn.lang == "cuda":
            mmas = mma_calls(facts, fn)
            loop = main_loop(fl, facts, fn)
            if loop is None or not mmas:
                continue
            in_loop = [c for c in sc_loads if loop.id in c.loops]
            steps = [fl.fold(e, fn) for e in (loop.step,) if e is not None]
            kt = [v for n in (loop.stop, loop.step) if n is not None for x, f, _ in fl.walk(n, fn, depth=3)
                  if f is fn and x.kind == "name" and (v := fl.fold(x, fn)) is not None and v == block]
            if in_loop and (kt or block in steps):
                return found(f"{fn.name} steps one {block}-wide scale block per K iteration and loads its scales",
                             [span(loop, "K loop"), span(in_loop[0], "scale load")], 0.7)
            continue
        loops = {lid for c in op_loads for lid in c.loops}
        in_loop = [c for c in sc_loads if set(c.loops) & loops]
        if not op_loads or not in_loop:
            if op_loads:
                reason = f"{fn.name} does not load the scales in its K loop"
            continue
        a_loads = loads_of(fl, fn, input_params_with_methods(fl, facts, fn, a_index))
        vals = _k_tile_values(fl, facts, fn, [c for c in a_loads if c.loops])
        known = {v for v in vals if v is not None}
        wide = {v for c in loads_of(fl, fn, input_params_with_methods(fl, facts, fn, b_index))
                for x in (row_arange_sizes(fl, c.expr.kw("pointer", 0), fn) if c.expr.kw("pointer", 0) is not None
                          else []) for v in mma_values(fl, facts, fn, x) if v is not None and (v > block or block % v)}
        if wide:
            reason = f"{fn.name}: weight tiles of {sorted(wide)} rows span several {block}-row scale blocks"
            continue
        if known and known == {block}:
            return found(f"{fn.name}: K tile {block} with the block's scales loaded in the same iteration",
                         [span(in_loop[0], "scale load"), span(op_loads[0], "operand tile")], 0.8)
        reason = f"{fn.name}: K tile {sorted(known) or 'unknown'}, not {block}"
    return missing(reason, confidence=0.75)


def _converted_operand(fl: Flow, fn: Function, c: Call) -> Expr | None:
    """A 16/32-bit conversion applied in registers to an operand of a ``tl.dot``."""
    for arg in c.expr.args[:2]:
        for n in computed_from(fl, arg, fn, set()):
            if n.kind == "cast" and n.op in ("bf16", "fp16", "fp32"):
                return n
            if n.kind == "call" and n.op == ".to":
                return n
    return None


@check("fresh_fp8_mma")
def fresh_fp8_mma(facts: Facts, lang: str) -> CheckResult:
    """The fp8 MMAs never carry their (reduced-precision) accumulator across K blocks: the loaded tiles reach
    ``tl.dot`` unconverted, and every such ``tl.dot`` in a loop starts fresh (no accumulator argument) or passes
    ``max_num_imprecise_acc`` <= 128; CUDA: an ``e4m3``/``e5m2`` MMA into a temporary zeroed every K block. A
    kernel without fp8 MMAs has nothing to guard and fails."""
    fl = flow(facts)
    reason = "no fp8 MMA"
    for fn in code(facts, lang):
        if fn.lang == "cuda":
            fp8 = [c for c in mma_calls(facts, fn) if any(p in asm_text(facts, c) for p in ("e4m3", "e5m2"))]
            if fp8 and _promotions(fl, facts, fn):
                return found(f"{fn.name}: fp8 MMA into a temporary promoted every K block", span(fp8[0], "fp8 mma"),
                             0.75)
            continue
        dots = [c for c in fn.calls if c.name == "tl.dot" and c.loops]
        native = [c for c in dots if _converted_operand(fl, fn, c) is None]
        if not native:
            if dots:
                reason = f"{fn.name} converts the operands before tl.dot: no fp8 MMA"
            continue
        bad = []
        for c in native:
            lim = c.expr.kw("max_num_imprecise_acc")
            if _fresh_dot(c) or (lim is not None and isinstance(fl.fold(lim, fn), int) and 0 < fl.fold(lim, fn) <= 128):
                continue
            bad.append(c)
        if bad:
            return missing(f"{fn.name}: tl.dot carries its accumulator across K blocks with the default "
                           "max_num_imprecise_acc", [span(bad[0], "carried fp8 accumulator")], 0.8)
        return found(f"{fn.name}: fresh fp8 tl.dot per K block", span(native[0], "fresh tl.dot"), 0.8)
    return missing(reason, confidence=0.75)


@check("k_major_operands")
def k_major_operands(facts: Facts, lang: str, *, input_index: int = 1) -> CheckResult:
    """The weights (input ``input_index``, [N, K]) reach the MMA K-major: no transposed copy is made on the host
    (``B.t().contiguous()``) and a ``tl.dot`` operand is a transposed view (``tl.trans``, ``tl.permute``, ``.T``)
    of a tile loaded from them; CUDA: an MMA with ``.row.col`` operands or a ``col_major`` B fragment."""
    fl = flow(facts)
    reason = f"no tl.dot on a transposed view of input {input_index}"
    for fn in code(facts, lang):
        params = input_params_with_methods(fl, facts, fn, input_index)
        copies = [p for p, ms in params.items() if ms & TRANSPOSES and ".contiguous" in ms]
        if copies:
            return missing(f"input {input_index} is transposed and copied on the host before {fn.name}",
                           confidence=0.85)
        if fn.lang == "cuda":
            mmas = mma_calls(facts, fn)
            if any(".row.col" in asm_text(facts, c) for c in mmas) or any(
                    t.kind == "type" and "col_major" in t.text for t in facts.tokens) or any(
                    "col_major" in expr_key(c.expr) for c in fn.calls if "fragment" in c.name):
                return found(f"{fn.name}: TN (row.col) MMA operands", span(mmas[0], "mma"), 0.7)
            continue
        loads = {id(c.expr) for c in loads_of(fl, fn, params)}
        for c in fn.calls:
            if c.name not in DOTS:
                continue
            for arg in c.expr.args[:2]:
                nodes = list(computed_from(fl, arg, fn, set()))
                tr = [n for n in nodes if (n.kind == "call" and n.op in TRANSPOSE_CALLS)
                      or (n.kind == "attr" and n.op == "T")]
                if tr and any(id(n) in loads for n in nodes):
                    return found(f"{fn.name}: tl.dot on a transposed view of the K-major weight tile",
                                 span(c, "transposed operand"), 0.8)
    return missing(reason, confidence=0.75)
