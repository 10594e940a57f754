"""Static checks of task ``selective_scan``: the ones only its rubric (``rubrics/selective_scan.yaml``) uses.

- ``broadcast_shared_load``
- ``carried_exp_recurrence``
- ``chunk_loop_tiles``
- ``first_order_scan``
- ``fp32_carried_state``
- ``hoisted_log2e_exp2``
- ``input_call``
- ``store_combines_inputs``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import as_list, code, matches, span
from d2kgrade.static.dataflow import EXPS, STORES, Flow, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Assign, Expr, Function, pos
from d2kgrade.static.patterns.access import access_base, is_read, loads_of_fn, row_names, unit_arange
from d2kgrade.static.patterns.names import EXP2_CALLS, SIXTEEN_BIT, init_dtype, log2e_product
from d2kgrade.static.patterns.roles import input_loads, input_params_of
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


@check("carried_exp_recurrence")
def carried_exp_recurrence(facts: Facts, lang: str) -> CheckResult:
    """A loop-carried state is updated through an exponential computed in the loop from data loaded in the loop
    (``h = exp(dt * A) * h + dt * B * u``, or a scan of ``(exp2(dt * A2), dBu)`` whose last state becomes the next
    carry): the decay is formed on the fly and the state stays in registers across the loop, instead of being read
    from a materialized ``exp(dt * A)`` tensor or from a workspace."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for lid, by_var in fl.carried(fn).items():
            loop = fn.loop(lid)
            for v, ups in by_var.items():
                for a in ups:
                    for n, f, env in fl.walk(a.value, fn, within=loop, depth=10):
                        if n.kind == "call" and matches(n.op, EXPS) and any(
                                is_read(x, g) for arg in n.args for x, g, _ in fl.walk(arg, f, env, within=loop,
                                                                                       depth=6)):
                            return found(f"{v} is carried across the loop at line {loop.line} of {fn.name} and "
                                         f"updated through {n.op} of loaded data",
                                         [Span(a.line, a.end_line, f"{v} updated"), span(n, "decay")], 0.8)
    return missing("no loop-carried state updated through an exponential of data loaded in the loop",
                   confidence=0.75)


@check("chunk_loop_tiles")
def chunk_loop_tiles(facts: Facts, lang: str, *, inputs: list[int]) -> CheckResult:
    """A program walks the given ``inputs`` of ``kernel(...)`` in chunks: inside a loop with a step other than 1,
    a load of them addresses a tile whose unit-stride innermost ``tl.arange`` is offset by the loop variable
    (``l0 + tl.arange(0, BLOCK_L)``): several consecutive positions per iteration, held as one axis of a tile,
    instead of one element per step or the whole extent at once."""

    fl = flow(facts)
    for fn in code(facts, "triton"):
        for c in input_loads(fl, fn, inputs):
            ptr = access_base(c)
            if ptr is None or not c.loops:
                continue
            ar = unit_arange(fl, ptr, fn)
            if ar is None:
                continue
            for lid in c.loops:
                lp = fn.loop(lid)
                if lp is None or lp.var is None or lp.kind not in ("range", "tl.range", "for", "while"):
                    continue
                step = fl.fold(lp.step, fn) if lp.step is not None else 1
                if step == 1 or (lp.step is None and lp.kind in ("range", "tl.range")):
                    continue
                if fl.refs(ptr, fn, lp.var):
                    return found(f"{fn.name} loads chunks of the input along the loop at line {lp.line}",
                                 [span(lp, "chunk loop"), span(c, "chunk tile")], 0.8)
    return missing("no loop that loads the input in chunks of consecutive positions", confidence=0.75)


@check("broadcast_shared_load")
def broadcast_shared_load(facts: Facts, lang: str) -> CheckResult:
    """One load serves several rows of the program: a value loaded without the program's row index (its address
    reads none of the program-id-offset aranges that index the rows) is broadcast along a new leading axis
    (``b[None, :]``) and combined element-wise with data loaded for those rows (``(dt * u)[:, None] * b[None, :]``):
    B/C shared by all channels of a program, not reloaded per channel."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        rows = row_names(fl, fn)
        if not rows:
            continue
        loads = loads_of_fn(fl, fn)
        row_loads = {id(c.expr) for c, _ in loads if (p := access_base(c)) is not None
                     and any(fl.refs(p, fn, r) for r in rows)}
        if not row_loads:
            continue
        exprs = [(a.value, a) for a in fn.assigns] + [(c.expr, c) for c in fn.calls if c.name in STORES]
        for e, where in exprs:
            for s in e.walk():
                if s.kind != "sub" or len(s.args) < 3 or s.args[1].kind != "const" or s.args[1].value is not None:
                    continue
                shared = [x for x, f, _ in fl.walk(s.args[0], fn, depth=4) if f is fn and is_read(x, fn)
                          and id(x) not in row_loads]
                shared = [x for x in shared if (p := x.kw("pointer", 0)) is not None
                          and not any(fl.refs(p, fn, r) for r in rows)]
                if not shared:
                    continue
                partner = any(id(x) in row_loads for x, f, _ in fl.walk(e, fn, depth=6) if f is fn)
                if partner:
                    return found(f"{fn.name} broadcasts a load made without its row index over its rows",
                                 [Span(shared[0].line, shared[0].end_line, "shared load"),
                                  Span(where.line, where.end_line, "broadcast over rows")], 0.8)
    return missing("no load broadcast over the rows a program owns", confidence=0.75)


@check("input_call")
def input_call(facts: Facts, lang: str, *, input_index: int, name: str | list[str], same_loop: bool = False
               ) -> CheckResult:
    """A value loaded from input ``input_index`` of ``kernel(...)`` reaches a call named ``name`` element-wise
    in the same kernel (softplus's ``tl.log`` of ``delta + bias``). ``same_loop``: the call sits in the loop nest of
    the load (computed once per loaded element, not again in an inner loop over states)."""
    fl = flow(facts)
    names = as_list(name)
    for fn in code(facts, lang):
        for c in input_loads(fl, fn, [input_index]):
            t = fl.taint(fn, None, {id(c.expr)})
            for x in fn.calls:
                if not matches(x.name, names) or (same_loop and x.loops != c.loops):
                    continue
                if any(fl.reads_through(a, fn, t, {id(c.expr)}, site_of(x)) for a in x.expr.args):
                    return found(f"{x.name} of input {input_index} in {fn.name}", [span(c, "load"), span(x, x.name)],
                                 0.8)
    return missing(f"no {' / '.join(names)} of data loaded from input {input_index}"
                   + (" in the loop nest of its load" if same_loop else ""), confidence=0.75)


@check("store_combines_inputs")
def store_combines_inputs(facts: Facts, lang: str, *, inputs: list[int]) -> CheckResult:
    """One store of a kernel writes a value computed element-wise from loads of every listed input of
    ``kernel(...)`` (``y = (C.h + D * u) * silu(z)`` reads D, u and z): the epilogue is applied in the kernel, not
    by PyTorch or a second pass."""
    fl = flow(facts)
    best = ""
    for fn in code(facts, lang):
        per = {i: input_loads(fl, fn, [i]) for i in inputs}
        if not all(per.values()):
            best = best or f"{fn.name} does not load input(s) {[i for i, v in per.items() if not v]}"
            continue
        for kind, st, _ in fl.memory_ops(fn):
            v = fl.stored_value(st) if kind == "store" else None
            if v is None:
                continue
            if all(any(fl.reads_through(v, fn, fl.taint(fn, None, {id(c.expr)}), {id(c.expr)}, site_of(st))
                       for c in per[i]) for i in inputs):
                return found(f"{fn.name} stores a value combining inputs {inputs}", span(st, "fused store"), 0.8)
        best = f"no store of {fn.name} combines inputs {inputs}"
    return missing(best or f"no kernel loads inputs {inputs}", confidence=0.75)


@check("fp32_carried_state")
def fp32_carried_state(facts: Facts, lang: str) -> CheckResult:
    """Loop-carried state that depends on loaded data (recurrence states and accumulators, whatever their update
    form) is created in fp32 (``tl.zeros(..., tl.float32)``, a float literal, a ``float`` declaration), at least one
    exists, and no value converted to a 16-bit type feeds anything but a store (scan operands, carried states and
    contractions stay fp32; only the output is rounded)."""
    fl = flow(facts)
    good: list[Span] = []
    for fn in code(facts, lang):
        store_exprs = {id(n) for c in fn.calls if c.name in STORES for n in c.expr.walk()}
        readers: dict[str, list[Assign]] = {}
        for a in fn.assigns:
            for nm in a.value.names():
                readers.setdefault(nm, []).append(a)
        for a in fn.assigns:
            for n in a.value.walk():
                if n.kind != "cast" or n.op not in SIXTEEN_BIT or id(n) in store_exprs:
                    continue
                uses = [r for t in a.targets for r in readers.get(t, []) if r is not a]
                calls = [c for c in fn.calls if c.name not in STORES and set(a.targets) & c.expr.names()
                         and not any(c.expr is n2 for n2 in a.value.walk())]
                if uses or [c for c in calls if c.name != "cast"]:
                    return missing(f"{', '.join(a.targets)} in {fn.name} is converted to {n.op} and used in the "
                                   f"computation", [Span(a.line, a.end_line, f"{n.op} intermediate")], 0.8)
        for lid, by_var in fl.carried(fn).items():
            loop = fn.loop(lid)
            for v, ups in by_var.items():
                if not any(is_read(x, f) for u in ups for x, f, _ in fl.walk(u.value, fn, within=loop, depth=8)):
                    continue
                inits = [a for a in fn.defs().get(v, []) if lid not in a.loops and pos(a) < pos(ups[0])]
                for a in inits:
                    dt = init_dtype(a.value)
                    if dt is not None and dt != "fp32" and not dt.startswith("int"):
                        return missing(f"carried {v} in {fn.name} starts as {dt}",
                                       [Span(a.line, a.end_line, "carried state init")], 0.8)
                    if dt == "fp32":
                        good.append(Span(a.line, a.end_line, f"{v}: fp32 carried state"))
    if good:
        return found(f"{len(good)} fp32 carried state(s), no 16-bit intermediates", good[:4], 0.8)
    return missing("no fp32 loop-carried state of loaded data", confidence=0.7)


@check("hoisted_log2e_exp2")
def hoisted_log2e_exp2(facts: Facts, lang: str, *, inputs: list[int] | None = None) -> CheckResult:
    """An ``exp2`` inside a loop takes a value scaled by log2(e) outside that loop: the scale is folded into a
    loaded operand once (``a2 = tl.load(A + ...) * LOG2E`` before the time loop; ``exp2(dt * a2)`` per element),
    so each exponential costs one multiply and one ``ex2``. ``inputs``: the scaled value must be loaded from those
    inputs of ``kernel(...)``. A log2(e) multiply in the exponential's own innermost loop does not count."""
    fl = flow(facts)
    n_exp2 = 0
    for fn in code(facts, lang):
        params = input_params_of(fl, fn, inputs) if inputs is not None else None
        scaled = []
        for a in fn.assigns:
            if not log2e_product(fl, a.value, fn):
                continue
            reads = [x for x, f, _ in fl.walk(a.value, fn, depth=6) if f is fn and is_read(x, fn)]
            if params is not None:
                reads = [x for x in reads if (p := x.kw("pointer", 0)) is not None and fl.bases(p, fn) & params]
            if reads:
                scaled.append(a)
        for c in fn.calls:
            if c.name not in EXP2_CALLS or not c.loops:
                continue
            n_exp2 += 1
            for a in scaled:
                if c.loops[-1] in a.loops or pos(a) > pos(c):
                    continue
                if any(fl.refs(arg, fn, t) for arg in c.expr.args for t in a.targets):
                    return found(f"{c.name} in {fn.name} takes {', '.join(a.targets)}, scaled by log2(e) outside "
                                 f"its loop", [Span(a.line, a.end_line, "log2(e) folded once"), span(c, "exp2")], 0.85)
    if n_exp2:
        return missing(f"{n_exp2} exp2 call(s) in loops, none on a loaded value pre-scaled by log2(e) outside the "
                       "loop", confidence=0.8)
    return missing("no exp2 inside a loop", confidence=0.85)


def _combine_fn(fl: Flow, call: Expr, fn: Function) -> Function | None:
    cf = call.kw("combine_fn", 2)
    if cf is None or cf.kind != "name":
        return None
    return fl.callee(cf.op, fn)


def _first_order(comb: Function) -> bool:
    """Does a 4-parameter combine return ``(a1 * a2, a2 * b1 + b2)`` (operands in any order)?"""
    if len(comb.params) != 4 or not comb.returns:
        return False
    a1, b1, a2, b2 = comb.params
    r = comb.returns[-1]
    if r.kind != "tuple" or len(r.args) != 2:
        return False
    first, second = r.args

    def product_of(e: Expr, x: str, y: str) -> bool:
        return e.kind == "bin" and e.op == "*" and len(e.args) == 2 and {a.op for a in e.args
                                                                         if a.kind == "name"} == {x, y}

    if not product_of(first, a1, a2):
        return False
    if second.kind != "bin" or second.op != "+" or len(second.args) != 2:
        return False
    x, y = second.args
    return (product_of(x, a2, b1) and y.kind == "name" and y.op == b2) or (
        product_of(y, a2, b1) and x.kind == "name" and x.op == b2)


@check("first_order_scan")
def first_order_scan(facts: Facts, lang: str) -> CheckResult:
    """A linear recurrence evaluated as a parallel scan with a carry: ``tl.associative_scan`` over a pair of tiles
    with a combine that returns ``(a1 * a2, a2 * b1 + b2)`` (in any operand order), inside a loop whose carried
    state is updated from the scan's result (the chunk's last state enters the next chunk). CUDA: a block scan
    (``cub::BlockScan``) inside such a loop. A wrong operator (``b1 + b2``) or a scan that restarts from zero at
    every chunk does not count."""
    fl = flow(facts)
    best = "no tl.associative_scan of a (decay, input) pair"
    for fn in code(facts, lang):
        for c in fn.calls:
            is_cub = matches(c.name, ("cub::BlockScan*", "BlockScan*", "*InclusiveScan")) and fn.lang == "cuda"
            if c.name != "tl.associative_scan" and not is_cub:
                continue
            if not is_cub:
                comb = _combine_fn(fl, c.expr, fn)
                if comb is None or not _first_order(comb):
                    best = f"the scan at line {c.line} of {fn.name} does not combine with (a1*a2, a2*b1 + b2)"
                    continue
            for lid in c.loops:
                loop = fn.loop(lid)
                for v, ups in fl.carried(fn).get(lid, {}).items():
                    if any(n is c.expr for u in ups for n, _, _ in fl.walk(u.value, fn, within=loop, depth=10)):
                        return found(f"first-order scan in {fn.name}, its last state carried in {v}",
                                     [span(c, "scan"), Span(ups[0].line, ups[0].end_line, "carry")], 0.85)
            best = f"the scan at line {c.line} of {fn.name} feeds no state carried to the next chunk"
    return missing(best, confidence=0.8)
