"""Static checks of task ``selective_scan``: the ones only its rubric (``rubrics/selective_scan.yaml``) uses.

- ``broadcast_shared_load``
- ``carried_exp_recurrence``
- ``chunk_loop_tiles``
- ``cuda_time_chunks``
- ``first_order_scan``
- ``fp32_carried_state``
- ``hoisted_log2e_exp2``
- ``input_call``
- ``reloaded_input``
- ``store_combines_inputs``
"""

from __future__ import annotations

import re

from d2kgrade.static.checkutil import as_list, code, matches, span
from d2kgrade.static.dataflow import EXPS, STORES, Flow, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Assign, Expr, Function, Loop, pos
from d2kgrade.static.patterns.access import access_base, is_read, loads_of_fn, row_names, unit_arange
from d2kgrade.static.patterns.names import EXP2_CALLS, SIXTEEN_BIT, init_dtype, log2e_product
from d2kgrade.static.patterns.roles import input_loads, input_params_of, is_input_view
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
    (``l0 + tl.arange(0, BLOCK_L)``), or a loop over chunk indices whose variable reaches the address multiplied
    by a compile-time chunk size (``for c in range(n_chunks): l0 = c * BLOCK_L``): several consecutive positions
    per iteration, held as one axis of a tile, instead of one element per step or the whole extent at once."""

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
                    if _chunk_index(fl, ptr, fn, lp):
                        return found(f"{fn.name} loads chunk {lp.var} * size of the input along the loop at line "
                                     f"{lp.line}", [span(lp, "chunk loop"), span(c, "chunk tile")], 0.8)
                    continue
                if fl.refs(ptr, fn, lp.var):
                    return found(f"{fn.name} loads chunks of the input along the loop at line {lp.line}",
                                 [span(lp, "chunk loop"), span(c, "chunk tile")], 0.8)
    return missing("no loop that loads the input in chunks of consecutive positions", confidence=0.75)


def _chunk_index(fl: Flow, ptr: Expr, fn: Function, lp) -> bool:
    """Does loop variable ``lp.var`` reach address ``ptr`` multiplied by a compile-time size (> 1)?"""
    for n, f, env in fl.walk(ptr, fn, depth=6):
        if n.kind != "bin" or n.op != "*" or len(n.args) != 2 or f is not fn:
            continue
        for x, y in (n.args, n.args[::-1]):
            if x.kind == "name" and x.op == lp.var and (fl.is_constexpr(y, fn) or (
                    isinstance(v := fl.fold(y, fn), int) and v > 1)):
                return True
    return False


@check("cuda_time_chunks")
def cuda_time_chunks(facts: Facts, lang: str, *, inputs: list[int]) -> CheckResult:
    """CUDA: threads are laid out along time inside a chunk loop: in a loop with a step other than 1 (over chunks
    of the sequence), a load of ``inputs`` of ``kernel(...)`` addresses ``chunk + threadIdx.x * ITEMS`` (each
    thread its run of consecutive timesteps, ``ITEMS`` a compile-time count > 1), as mamba's kernel does with
    ``cub::BlockLoad`` (which ``uses_call`` accepts)."""
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        for c in input_loads(fl, fn, inputs):
            ptr = access_base(c)
            if ptr is None or not c.loops:
                continue
            per_thread = any(n.kind == "bin" and n.op == "*" and len(n.args) == 2 and any(
                "threadIdx.x" in x.names() for x in n.args) and any(
                isinstance(v := fl.fold(x, f), int) and v > 1 for x in n.args)
                for n, f, _ in fl.walk(ptr, fn, depth=8) if f is fn)
            if not per_thread:
                continue
            for lid in c.loops:
                lp = fn.loop(lid)
                if lp is None or lp.var is None or lp.step is None or lp.unroll:
                    continue
                inc = lp.step.args[1] if lp.step.kind == "bin" and len(lp.step.args) == 2 else lp.step
                if fl.fold(inc, fn) not in (None, 1) and fl.refs(ptr, fn, lp.var):
                    return found(f"{fn.name} loads runs of timesteps per thread in chunks along the loop at line "
                                 f"{lp.line}", [span(lp, "chunk loop"), span(c, "per-thread run")], 0.75)
    return missing("no CUDA chunk loop with threads laid out along time", confidence=0.7)


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


def _reloaded(fl: Flow, fn: Function, c) -> Loop | None:
    """A loop around load ``c`` whose variable its address does not read: the same data loaded again on every
    iteration (u and delta reloaded for each of the N states)."""
    ptr = access_base(c)
    if ptr is None:
        return None
    for lid in c.loops:
        lp = fn.loop(lid)
        if lp is not None and lp.var is not None and not fl.refs(ptr, fn, lp.var):
            return lp
    return None


def _per_element(fl: Flow, fn: Function, load, call) -> bool:
    """Is ``call`` evaluated once per loaded element: every loop around it that is not around ``load`` walks the
    loaded elements (its variable indexes the call's argument: CUDA's ``for k < kNItems`` over a thread's
    registers), rather than repeating the call for each state?"""
    for lid in call.loops:
        if lid in load.loops:
            continue
        lp = fn.loop(lid)
        if lp is None or lp.var is None or not any(fl.refs(a, fn, lp.var) for a in call.expr.args):
            return False
    return True


@check("input_call")
def input_call(facts: Facts, lang: str, *, input_index: int, name: str | list[str], same_loop: bool = False
               ) -> CheckResult:
    """A value loaded from input ``input_index`` of ``kernel(...)`` reaches a call named ``name`` element-wise
    in the same kernel (softplus's ``tl.log`` of ``delta + bias``). ``same_loop``: the call is evaluated once per
    loaded element: every loop around it that is not around the load walks the loaded elements (its variable
    indexes the call's argument, as CUDA's loop over a thread's items does), and the load is not repeated in a
    loop its address does not depend on; softplus recomputed in a loop over the N states fails either way."""
    fl = flow(facts)
    names = as_list(name)
    for fn in code(facts, lang):
        for c in input_loads(fl, fn, [input_index]):
            if same_loop and _reloaded(fl, fn, c):
                continue
            t = fl.taint(fn, None, {id(c.expr)})
            for x in fn.calls:
                if not matches(x.name, names) or (same_loop and not _per_element(fl, fn, c, x)):
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


def _host_scaled_loads(fl: Flow, fn: Function, inputs: list[int] | None) -> list[Assign]:
    """Assignments of ``fn`` that load a parameter whose every launch passes a host tensor scaled by log2(e)
    (``a2 = (A * LOG2E).contiguous()``), made from one of ``inputs`` of ``kernel(...)`` when given."""
    entry = fl.facts.functions.get("kernel")
    targets = [entry.params[i] for i in inputs or [] if entry is not None and 0 <= i < len(entry.params)]
    scaled_params = set()
    for p in fn.params:
        srcs = fl.param_sources(fn, p)
        if not srcs:
            continue
        ok = True
        for e, caller in srcs:
            nodes = list(fl.walk(e, caller, depth=6))
            if not any(log2e_product(fl, n, f) for n, f, _ in nodes):
                ok = False
            elif targets and not any(n.kind == "name" and is_input_view(fl, n, f, t, set())
                                     for n, f, _ in nodes for t in targets):
                ok = False
        if ok:
            scaled_params.add(p)
    if not scaled_params:
        return []
    return [a for a in fn.assigns if any(is_read(x, fn) and (ptr := x.kw("pointer", 0)) is not None
                                         and fl.bases(ptr, fn) & scaled_params for x in a.value.walk())]


@check("hoisted_log2e_exp2")
def hoisted_log2e_exp2(facts: Facts, lang: str, *, inputs: list[int] | None = None) -> CheckResult:
    """An ``exp2`` inside a loop takes a value scaled by log2(e) outside that loop: the scale is folded into a
    loaded operand once (``a2 = tl.load(A + ...) * LOG2E`` before the time loop; ``exp2(dt * a2)`` per element),
    so each exponential costs one multiply and one ``ex2``; or the host scales the input once before the launch
    (``a2 = A * LOG2E`` passed to the kernel, whose loads of it feed the ``exp2``). ``inputs``: the scaled value
    must be loaded from those inputs of ``kernel(...)``. A log2(e) multiply in the exponential's own innermost loop
    does not count."""
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
        host = _host_scaled_loads(fl, fn, inputs)
        for c in fn.calls:
            if c.name not in EXP2_CALLS or not c.loops:
                continue
            n_exp2 += 1
            for a in host:
                if any(fl.refs(arg, fn, t) for arg in c.expr.args for t in a.targets):
                    return found(f"{c.name} in {fn.name} takes {', '.join(a.targets)}, loaded from a tensor the host "
                                 f"scaled by log2(e) once", [Span(a.line, a.end_line, "pre-scaled operand"),
                                                              span(c, "exp2")], 0.8)
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
    defs = comb.defs()

    def value(e: Expr) -> Expr:
        """A returned name's single definition (``a = a1 * a2; return a, b``); ``tl.fma(x, y, z)`` as ``x*y + z``."""
        if e.kind == "name" and e.op not in comb.params and len(defs.get(e.op, [])) == 1:
            e = defs[e.op][0].value
        if e.kind == "call" and e.op in ("tl.fma", "libdevice.fma", "fmaf", "__fmaf_rn") and len(e.args) == 3:
            e = Expr("bin", op="+", args=(Expr("bin", op="*", args=e.args[:2]), e.args[2]))
        return e

    first, second = (value(x) for x in r.args)
    return _first_order_pair(first, second, a1, b1, a2, b2)


def _leaf(e: Expr) -> str | None:
    """A combine operand's identity: a parameter name, or ``param.field`` for a struct member (``l.a``)."""
    if e.kind == "name":
        return e.op
    if e.kind == "attr" and e.recv is not None and e.recv.kind == "name":
        return f"{e.recv.op}.{e.op}"
    return None


def _first_order_pair(first: Expr, second: Expr, a1: str, b1: str, a2: str, b2: str) -> bool:
    """``first`` is ``a1 * a2`` and ``second`` is ``a2 * b1 + b2`` (operands in any order)."""

    def product_of(e: Expr, x: str, y: str) -> bool:
        return e.kind == "bin" and e.op == "*" and len(e.args) == 2 and {_leaf(a) for a in e.args} == {x, y}

    if not product_of(first, a1, a2):
        return False
    if second.kind != "bin" or second.op != "+" or len(second.args) != 2:
        return False
    x, y = second.args
    return (product_of(x, a2, b1) and _leaf(y) == b2) or (product_of(y, a2, b1) and _leaf(x) == b2)


def _cuda_first_order(comb: Function) -> bool:
    """A CUDA combine of two pair structs that writes ``o.a = l.a * r.a; o.b = r.a * l.b + r.b`` and returns ``o``
    (fields in either role): the first-order operator written by hand (mamba's SSMScanOp on float2)."""
    if comb.lang != "cuda" or len(comb.params) != 2 or not comb.returns or comb.returns[-1].kind != "name":
        return False
    out, (left, right) = comb.returns[-1].op, comb.params
    fields = {}
    for a in comb.assigns:
        v = a.value
        if a.targets == (out,) and v.kind == "other" and v.op == "item-write" and len(v.args) == 2 \
                and v.args[0].kind == "attr":
            fields[v.args[0].op] = v.args[1]
    if len(fields) != 2:
        return False
    (fa, ea), (fb, eb) = fields.items()
    return any(_first_order_pair(e1, e2, f"{left}.{x}", f"{left}.{y}", f"{right}.{x}", f"{right}.{y}")
               for (x, e1), (y, e2) in (((fa, ea), (fb, eb)), ((fb, eb), (fa, ea))))


def _hand_scan(fl: Flow, facts: Facts, fn: Function) -> tuple[Assign, Loop, str] | None:
    """A warp scan with the first-order operator inside a loop that carries a state: the result of a combine that
    ``_cuda_first_order`` accepts (inlined: ``agg = o@compose5``) taken in a loop with ``__shfl_up_sync``
    shuffles, nested in a loop one of whose carried variables depends on that scan."""
    combines = [f.name for f in facts.functions.values() if _cuda_first_order(f)]
    if not combines:
        return None
    tag = re.compile(r"@(?:" + "|".join(map(re.escape, combines)) + r")\d+$")
    carried = fl.carried(fn)
    for a in fn.assigns:
        if not a.loops or not any(tag.search(n) for n in a.value.names()):
            continue
        inner = a.loops[-1]
        if not any(x.name.startswith("__shfl_up") and inner in x.loops for x in fn.calls):
            continue
        for lid in a.loops[:-1]:
            loop = fn.loop(lid)
            for v, ups in carried.get(lid, {}).items():
                if v not in a.targets and any(fl.refs(u.value, fn, t, within=loop) for u in ups
                                              for t in _targets_of(fn, a)):
                    return a, loop, v
    return None


def _targets_of(fn: Function, a0: Assign) -> set[str]:
    """The variables ``a0`` assigns and those assigned from them (``s_warp[w] = agg``), one step on."""
    out = set(a0.targets)
    out |= {t for a in fn.assigns if a.value.names() & out for t in a.targets}
    return out


@check("first_order_scan")
def first_order_scan(facts: Facts, lang: str) -> CheckResult:
    """A linear recurrence evaluated as a parallel scan with a carry: ``tl.associative_scan`` over a pair of tiles
    with a combine that returns ``(a1 * a2, a2 * b1 + b2)`` (in any operand order), inside a loop whose carried
    state is updated from the scan's result (the chunk's last state enters the next chunk); the combine may name
    its results (``a = a1 * a2; b = tl.fma(a2, b1, b2); return a, b``). CUDA: a block scan (``cub::BlockScan``)
    inside such a loop, or a hand-written one: a pair-struct combine ``o.a = l.a * r.a; o.b = r.a * l.b + r.b``
    applied in a ``__shfl_up_sync`` loop nested in a loop whose carried state depends on it. A wrong operator
    (``b1 + b2``) or a scan that restarts from zero at every chunk does not count."""
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
        if fn.lang == "cuda" and (hit := _hand_scan(fl, facts, fn)) is not None:
            a, loop, v = hit
            return found(f"hand-written first-order warp scan in {fn.name}, its total carried in {v}",
                         [Span(a.line, a.end_line, "first-order combine in a shuffle scan"),
                          span(loop, "carried chunk loop")], 0.8)
    return missing(best, confidence=0.8)


@check("reloaded_input")
def reloaded_input(facts: Facts, lang: str, *, inputs: list[int]) -> CheckResult:
    """A load of the given ``inputs`` of ``kernel(...)`` sits in a loop whose variable its address does not read:
    the same elements are loaded again on every iteration of that loop (u, delta and z reloaded for each of the
    N states inside the chunk), instead of once per chunk into registers. Usually negated."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for c in input_loads(fl, fn, inputs):
            lp = _reloaded(fl, fn, c)
            if lp is not None:
                return found(f"{fn.name} reloads an input on every iteration of the loop at line {lp.line}, whose "
                             f"variable {lp.var} its address does not read",
                             [span(lp, "unrelated loop"), span(c, "reload")], 0.8)
    return missing(f"every load of inputs {inputs} is indexed by each loop around it", confidence=0.75)
