"""Static checks of task ``gemm_splitk``: the ones only its rubric (``rubrics/gemm_splitk.yaml``) uses.

- ``cuda_swap_ab``
- ``fp32_partial_reduction``
- ``operand_eviction_hints``
- ``stream_k_ranges``
- ``weights_read_once``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code, is_persistent, span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function, Loop
from d2kgrade.static.patterns.access import loads_of, row_arange_sizes, unit_arange
from d2kgrade.static.patterns.config import host_calls
from d2kgrade.static.patterns.mma import mma_calls, mma_values
from d2kgrade.static.patterns.names import ATOMICS, SM_SOURCES, expr_key, low_precision_cast
from d2kgrade.static.patterns.roles import input_params_with_methods
from d2kgrade.static.registry import CheckResult, check, found, missing


def _varies_with(fl: Flow, fn: Function, e: Expr, loop: Loop) -> bool:
    """Does the address ``e`` change across the iterations of ``loop`` (reads its variable, or a value it carries)?"""
    carried = set(fl.carried(fn).get(loop.id, {}))
    names = {loop.var} | carried if loop.var else carried
    # a name assigned from a loop-variable-derived value inside the loop (tile = it // k_iters) varies too
    for n, f, _ in fl.walk(e, fn, depth=8):
        if f is fn and n.kind == "name" and n.op in names:
            return True
    return False


@check("weights_read_once")
def weights_read_once(facts: Facts, lang: str, *, input_index: int = 1, rows_index: int = 0, max_m: int = 64,
                      max_bn: int = 64) -> CheckResult:
    """A kernel streams the weights (input ``input_index``) once: each of its weight loads sits in a K loop and
    its address changes across every enclosing loop (no loop over M rows re-reads the same slab); the tile of
    activation rows (input ``rows_index``) is not a fixed size below ``max_m`` (all M <= ``max_m`` rows in one
    tile, or a size taken from M); and the weights are spread over many programs: a weight tile no wider than
    ``max_bn`` rows, or K split across programs. CUDA: the weight loads change across every enclosing loop. An
    entry that calls the kernel once per chunk of rows (``torch.cat([ext.gemv(A[i:i + 4], B) for i in ...])``,
    or a host loop), passing a slice of the rows and the same weights each time, streams them once per chunk and
    fails."""
    fl = flow(facts)
    chunked = _relaunched_per_chunk(facts, input_index, rows_index)
    if chunked is not None:
        return missing(f"the entry runs the kernel once per chunk of rows with the same weights (line "
                       f"{chunked.line}): the weights are streamed once per chunk", confidence=0.7)
    reason = f"no kernel loads input {input_index}"
    for fn in code(facts, lang):
        wp = input_params_with_methods(fl, facts, fn, input_index)
        w_loads = [c for c in loads_of(fl, fn, wp) if c.loops]
        if not w_loads:
            continue
        again = []
        for c in w_loads:
            addr = c.expr.kw("pointer", 0) if not c.name.startswith(".") else c.expr.recv
            for lid in c.loops:
                lp = fn.loop(lid)
                if lp is not None and addr is not None and not _varies_with(fl, fn, addr, lp) and not (
                        c.name.startswith(".") and c.expr.args and _varies_with(fl, fn, c.expr.args[0], lp)):
                    again.append((c, lp))
        if again:
            c, lp = again[0]
            reason = f"{fn.name} loads the same weights again on every iteration of the loop at line {lp.line}"
            continue
        if fn.lang == "cuda":
            return found(f"{fn.name} reads each weight element once per program", span(w_loads[0], "weights"), 0.6)
        rp = input_params_with_methods(fl, facts, fn, rows_index)
        small = []
        for c in loads_of(fl, fn, rp):
            ptr = c.expr.kw("pointer", 0)
            for s in (row_arange_sizes(fl, ptr, fn) if ptr is not None else []):
                vals = mma_values(fl, facts, fn, s)
                if vals and all(v is not None and v < max_m for v in vals):
                    small.append((c, vals))
        if small:
            reason = f"{fn.name} tiles the activation rows by {sorted(set(small[0][1]))} < {max_m}: weights re-read"
            continue
        wide = True
        for c in w_loads:
            ptr = c.expr.kw("pointer", 0)
            sizes = row_arange_sizes(fl, ptr, fn) if ptr is not None else []
            for s in sizes:
                vals = mma_values(fl, facts, fn, s)
                if not vals or not all(v is not None and v > max_bn for v in vals):
                    wide = False
            if not sizes:
                wide = False
        split = any(fl.pid_derived(e, fn) for lp in fn.loops if not is_persistent(fl, fn, lp)
                    for e in (lp.start, lp.stop) if e is not None)
        if wide and not split:
            reason = f"{fn.name} streams the weights in tiles wider than {max_bn} rows with K unsplit: few programs"
            continue
        return found(f"{fn.name} streams each weight element once", span(w_loads[0], "weight load"), 0.75)
    return missing(reason, confidence=0.7)


def _relaunched_per_chunk(facts: Facts, input_index: int, rows_index: int = 0) -> Expr | None:
    """A call in the entry that passes the entry's weight parameter unchanged and a slice of its rows input while
    sitting in a host loop or a comprehension over chunks (``[ext.gemv(A[i:i + 4], B) for i in range(0, M, 4)]``):
    the kernel it runs reads the whole weight tensor once per chunk of rows."""
    entry = facts.functions.get("kernel")
    if entry is None or max(input_index, rows_index) >= len(entry.params):
        return None
    w, a_in = entry.params[input_index], entry.params[rows_index]
    roots = [a.value for a in entry.assigns] + list(entry.returns) + [c.expr for c in entry.calls if c.loops]
    for root in roots:
        comps = [n for n in root.walk() if n.kind == "other" and n.op == "comprehension" and n.args]
        elems = [c.args[0] for c in comps]
        if root in [c.expr for c in entry.calls if c.loops]:
            elems.append(root)
        for el in elems:
            for n in el.walk():
                if n.kind == "call" and not n.op.startswith("torch.") and any(
                        a.kind == "name" and a.op == w for a in n.args) and any(
                        a.kind == "sub" and a.args and a.args[0].kind == "name" and a.args[0].op == a_in
                        for a in n.args):
                    return n
    return None


def _low_precision_value(fl: Flow, e: Expr, fn: Function) -> Expr | None:
    r = e
    for _ in range(4):
        if low_precision_cast(fl, r, fn):
            return r
        if r.kind == "name":
            defs = fl.defs(r.op, fn)
            if len(defs) != 1:
                return None
            r = defs[0].value
        else:
            return None
    return None


@check("fp32_partial_reduction")
def fp32_partial_reduction(facts: Facts, lang: str) -> CheckResult:
    """Split-K partials are reduced in fp32 by the submission's kernels: a loop accumulator (or reduced value) is
    atomically added unconverted (not cast to 16 bits first), or stored unconverted into a buffer that a later
    kernel loads and sums."""
    fl = flow(facts)
    reason = "no split partials reduced by atomics or by a later kernel"
    for fn in code(facts, lang):
        carried = {v for by in fl.carried(fn).values() for v in by}
        for c in fn.calls:
            if c.name not in ("tl.atomic_add", "atomicAdd", "atomicAdd_block", "atomicAdd_system"):
                continue
            v = c.expr.kw("val", 1)
            if v is None:
                continue
            acc = fl.reduction_derived(v, fn) is not None or any(
                n.kind == "name" and n.op in carried and f is fn for n, f, _ in fl.walk(v, fn, depth=3))
            if not acc:
                continue
            low = _low_precision_value(fl, v, fn)
            if low is not None:
                reason = f"{fn.name} adds its partials atomically after rounding them to 16 bits"
                continue
            return found(f"{fn.name} adds fp32 partials atomically", span(c, "fp32 atomic"), 0.8)
    launches = [la for la in facts.launches if la.kernel in facts.functions]
    for i, la1 in enumerate(launches):
        k1 = facts.functions[la1.kernel]
        if not k1.inlined or (lang == "triton" and k1.lang != "py") or (lang == "cuda" and k1.lang != "cuda"):
            continue
        carried = {v for by in fl.carried(k1).values() for v in by}
        for kind, st, bases in fl.memory_ops(k1):
            if kind != "store":
                continue
            v = fl.stored_value(st)
            if v is None or not any(n.kind == "name" and n.op in carried and f is k1
                                    for n, f, _ in fl.walk(v, k1, depth=3)):
                continue
            if _low_precision_value(fl, v, k1) is not None:
                reason = f"{k1.name} stores its partials rounded to 16 bits"
                continue
            hosts = set()
            for b in bases:
                e = fl.launch_arg(la1, k1, b)
                if e is not None and e.kind == "name":
                    hosts.add(e.op)
            for la2 in launches[i + 1:]:
                k2 = facts.functions[la2.kernel]
                if k2 is k1:
                    continue
                sums = any(fl.is_reduction(c.expr, k2) for c in k2.calls) or bool(fl.carried(k2))
                for kind2, ld, b2 in fl.memory_ops(k2):
                    if kind2 != "load" or not sums:
                        continue
                    if any((e := fl.launch_arg(la2, k2, b)) is not None and e.kind == "name" and e.op in hosts
                           for b in b2):
                        return found(f"{k1.name} stores fp32 partials that {k2.name} sums",
                                     [span(st, "fp32 partial"), span(ld, "summed")], 0.8)
    return missing(reason, confidence=0.75)


@check("stream_k_ranges")
def stream_k_ranges(facts: Facts, lang: str) -> CheckResult:
    """Stream-K: a kernel launched on a grid sized from the SM count walks a program-id-bounded range of the
    flattened (tile, k-iteration) space: inside a loop whose bounds come from the program id, one counter is both
    floor-divided (the tile) and reduced modulo (the first k-iteration) by the same value, an inner K loop starts
    or stops at that remainder, and partial tiles are combined through atomics."""

    fl = flow(facts)
    reason = "no program-id range over (tile, k-iteration) work"
    for fn in code(facts, lang):
        for lp in fn.loops:
            carried = fl.carried(fn).get(lp.id, {})
            bounds = [e for e in (lp.start, lp.stop) if e is not None]
            bounds += [a.value for v in carried for a in fn.defs().get(v, []) if lp.id not in a.loops]
            if not any(fl.pid_derived(e, fn) for e in bounds):
                continue
            divs: dict[str, list[tuple[str, str]]] = {}
            for a in fn.assigns:
                if lp.id not in a.loops:
                    continue
                for n in a.value.nodes():
                    if n.kind == "bin" and n.op in ("//", "%") and len(n.args) == 2 and n.args[0].kind == "name":
                        key = expr_key(n.args[0]) + "|" + expr_key(n.args[1])
                        divs.setdefault(key, []).append((n.op, a.targets[0]))
            for pair in divs.values():
                ops = {o for o, _ in pair}
                if ops != {"//", "%"}:
                    continue
                rem = {t for o, t in pair if o == "%"}
                inner = [x for x in fn.loops if x.parent == lp.id or (x.id != lp.id and x.line > lp.line
                                                                      and x.end_line <= lp.end_line)]
                if not any(e is not None and any(fl.refs(e, fn, r) for r in rem)
                           for x in inner for e in (x.start, x.stop)):
                    continue
                if not any(c.name in ATOMICS for c in fn.calls):
                    reason = f"{fn.name} walks (tile, k) ranges but never combines partial tiles"
                    continue
                sized = False
                for la in fl.launches_of(fn):
                    caller = facts.functions.get(la.caller)
                    if caller is not None and la.grid is not None and host_calls(fl, la.grid, caller, SM_SOURCES):
                        sized = True
                if not sized:
                    reason = f"{fn.name} walks (tile, k) ranges on a grid not sized from the SM count"
                    continue
                return found(f"Stream-K ranges of (tile, k-iteration) work in {fn.name}", span(lp, "work range"),
                             0.8)
    return missing(reason, confidence=0.75)


@check("operand_eviction_hints")
def operand_eviction_hints(facts: Facts, lang: str, *, stream_index: int = 1, reuse_index: int = 0,
                           min_k_tile: int = 128) -> CheckResult:
    """Loads of the streamed operand (input ``stream_index``, the weights) carry ``evict_first`` and loads of the
    reused operand (input ``reuse_index``) ``evict_last`` in one kernel, whose K tile (the innermost ``tl.arange``
    of the streamed loads) is at least ``min_k_tile`` wide. CUDA: the weights are read with a streaming intrinsic
    (``__ldcs``, ``__ldlu``) or ``L1::no_allocate`` / ``evict_first`` asm."""

    fl = flow(facts)

    def policy(c: Call, fn: Function) -> object:
        e = c.expr.kw("eviction_policy")
        if e is None:
            return None
        return e.value if e.kind == "const" else facts.consts.get(e.op) if e.kind == "name" else fl.fold(e, fn)

    reason = "no eviction hints on the GEMM operands"
    for fn in code(facts, "triton"):
        sl = loads_of(fl, fn, input_params_with_methods(fl, facts, fn, stream_index))
        rl = loads_of(fl, fn, input_params_with_methods(fl, facts, fn, reuse_index))
        if not sl or not rl:
            continue
        sp = {policy(c, fn) for c in sl}
        rp = {policy(c, fn) for c in rl}
        if "evict_first" not in sp or "evict_last" not in rp:
            reason = f"{fn.name}: streamed operand {sorted(map(str, sp))}, reused operand {sorted(map(str, rp))}"
            continue
        narrow = None
        for c in sl:
            ptr = c.expr.kw("pointer", 0)
            ar = unit_arange(fl, ptr, fn) if ptr is not None else None
            if ar is not None and len(ar.args) == 2:
                vals = mma_values(fl, facts, fn, ar.args[1])
                if vals and all(v is not None and v < min_k_tile for v in vals):
                    narrow = vals
        if narrow:
            reason = f"{fn.name}: evict_first/evict_last hints, but K tiles of {sorted(set(narrow))}"
            continue
        return found(f"{fn.name}: weights evict_first, activations evict_last",
                     [span(sl[0], "evict_first"), span(rl[0], "evict_last")], 0.85)
    if lang != "triton":
        for fn in code(facts, "cuda"):
            wp = input_params_with_methods(fl, facts, fn, stream_index)
            hits = [c for c in fn.calls if c.name in ("__ldcs", "__ldlu") and c.expr.args
                    and fl.bases(c.expr.args[0], fn) & set(wp)]
            if hits:
                return found(f"{fn.name} streams the weights with {hits[0].name}", span(hits[0], hits[0].name), 0.7)
        hits = [t for t in facts.reachable_tokens("asm") if "L1::no_allocate" in t.text or "evict_first" in t.text]
        if hits:
            return found("streaming (no-allocate / evict_first) loads in inline asm",
                         [span(hits[0], "asm")], 0.7)  # type: ignore[arg-type]
    return missing(reason, confidence=0.8)


@check("cuda_swap_ab")
def cuda_swap_ab(facts: Facts, lang: str) -> CheckResult:
    """CUDA code without tensor-core instructions cannot compute a swapped-operand MMA (fails); with them, which
    operand feeds the MMA's M side is not visible statically (cannot tell)."""
    hits = [c for f in code(facts, "cuda") for c in mma_calls(facts, f)]
    if hits:
        return CheckResult(None, "tensor-core CUDA code: operand roles not visible statically", [span(hits[0])], 0.0)
    return missing("no tensor-core instructions in the CUDA code, so no swap-AB MMA", confidence=0.8)
