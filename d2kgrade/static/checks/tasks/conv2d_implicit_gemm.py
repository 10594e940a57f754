"""Static checks of task ``conv2d_implicit_gemm``: the ones only its rubric (``rubrics/conv2d_implicit_gemm.yaml``)
uses.

- ``dot_operand_from``
- ``flat_pipelined_reduction``
- ``gather_inner_contiguous``
- ``loop_index_math_free``
- ``tile_index_decomposition``
- ``wide_copy``
"""

from __future__ import annotations

import re

from d2kgrade.static.checks.configs import num_stages
from d2kgrade.static.checks.memory import vector_access
from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Expr, Function, Loop
from d2kgrade.static.patterns.access import has_arange, own_loads_feeding, unit_arange
from d2kgrade.static.patterns.mma import dot_accumulators
from d2kgrade.static.patterns.roles import entry_params
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

DOTS = {"tl.dot", "tl.dot_scaled"}


MMAS = {"wmma::mma_sync", "mma_sync", "nvcuda::wmma::mma_sync"}


def _reduction_loops(fl: Flow, fn: Function) -> list[Loop]:
    """The outermost loops holding a tl.dot / MMA, else the outermost loops carrying an accumulator."""
    ids: set[int] = set()
    for c in fn.calls:
        if (c.name in DOTS or c.name in MMAS or c.name.endswith("mma_sync")) and c.loops:
            ids.add(c.loops[0])
    if not ids:
        for lid, by_var in fl.carried(fn).items():
            if any(u.aug == "+" or (u.value.kind == "bin" and u.value.op == "+") for ups in by_var.values()
                   for u in ups):
                lp = fn.loop(lid)
                while lp is not None and lp.parent is not None:
                    lp = fn.loop(lp.parent)
                if lp is not None:
                    ids.add(lp.id)
    return [lp for lp in fn.loops if lp.id in ids]


def _runtime_divs(fl: Flow, e: Expr, fn: Function, cuda_slash: bool) -> list[Expr]:
    """``//``/``%`` (and C ``/``) nodes of ``e`` whose divisor is a run-time value."""
    ops = ("//", "%", "/") if cuda_slash else ("//", "%")
    return [n for n in e.walk() if n.kind == "bin" and n.op in ops and len(n.args) == 2
            and fl.fold(n.args[1], fn) is None and not fl.is_constexpr(n.args[1], fn)
            and n.args[1].kind in ("name", "bin", "call", "cast")]


def _has_thread(fl: Flow, e: Expr, fn: Function) -> bool:
    return any(n.kind == "name" and n.op.startswith("threadIdx") for n, f, _ in fl.walk(e, fn, depth=6) if f is fn)


@check("dot_operand_from")
def dot_operand_from(facts: Facts, lang: str, *, input_index: int = 0) -> CheckResult:
    """An operand of a ``tl.dot`` is loaded, in the same kernel, from input ``input_index`` of ``kernel(...)``:
    the MMA reads tiles gathered from that input itself, not from an intermediate buffer (an im2col matrix, a
    padded copy made by another kernel)."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        targets = entry_params(fl, facts, fn, input_index)
        if not targets:
            continue
        for c in fn.calls:
            if c.name not in DOTS:
                continue
            for arg in c.expr.args[:2]:
                for n in own_loads_feeding(fl, arg, fn, depth=4):
                    ptr = n.kw("pointer", 0) if not n.op.startswith(".") else n.recv
                    if ptr is not None and fl.bases(ptr, fn) & targets:
                        return found(f"tl.dot in {fn.name} reads tiles loaded from {'/'.join(sorted(targets))}",
                                     [span(c, "MMA"), span(n, "load of the input")], 0.8)
    return missing(f"no tl.dot operand loaded from input {input_index} itself", confidence=0.75)


@check("gather_inner_contiguous")
def gather_inner_contiguous(facts: Facts, lang: str, *, input_index: int = 0) -> CheckResult:
    """Inside a loop, loads of input ``input_index`` have a unit-stride ``tl.arange`` as their innermost index
    (``x + row_base[:, None] + (tap + c0 + tl.arange(0, BK))[None, :]``): the reduction steps through contiguous
    channel chunks, not through a flat index split per element (``c = k % C``)."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        targets = entry_params(fl, facts, fn, input_index)
        for kind, c, bases in fl.memory_ops(fn):
            if kind != "load" or not c.loops or not (bases & targets):
                continue
            ptr = c.expr.kw("pointer", 0)
            if ptr is None:
                continue
            ar = unit_arange(fl, ptr, fn)
            if ar is not None:
                return found(f"{fn.name} loads {'/'.join(sorted(bases & targets))} in contiguous chunks in its loop",
                             [span(c, "contiguous gather"), span(ar, "innermost index")], 0.75)
    return missing(f"no loop load of input {input_index} with a unit-stride innermost index", confidence=0.7)


@check("wide_copy")
def wide_copy(facts: Facts, lang: str) -> CheckResult:
    """Reachable CUDA code moves 16 bytes per access: 128-bit vector types (``uint4``, ``float4``...) or 16-byte
    asynchronous copies (``cp.async ... 16``, ``__pipeline_memcpy_async(dst, src, 16)``), which need 16-byte
    aligned rows (C % 8 == 0 for bf16)."""
    v = vector_access(facts, lang)
    if v.passed:
        return v
    for t in facts.reachable_tokens("asm"):
        if "cp.async" in t.text and re.search(r"\b16\b", t.text):
            return found("16-byte cp.async copies", Span(t.line, t.end_line, "cp.async 16"), 0.8)
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        for c in fn.calls:
            if c.name in ("__pipeline_memcpy_async", "cuda::memcpy_async", "memcpy_async") and c.expr.args and \
                    fl.fold(c.expr.args[-1], fn) == 16:
                return found("16-byte asynchronous copies", span(c, "16-byte copy"), 0.8)
    return missing("no 128-bit vector accesses or 16-byte asynchronous copies", confidence=0.75)


@check("tile_index_decomposition")
def tile_index_decomposition(facts: Facts, lang: str) -> CheckResult:
    """The program's tile of output positions (program id times the block plus an ``arange``; in CUDA a
    ``blockIdx``-derived per-thread index) is split with ``//``/``%`` by run-time sizes (pixel -> (n, p, q))
    before the reduction loop (the loop holding the MMA or the carried accumulator), the results are read inside
    that loop, and the loop does not split such a tile index again."""
    fl = flow(facts)
    for fn in code(facts, lang):
        cuda = fn.lang == "cuda"
        red = _reduction_loops(fl, fn)
        if not red:
            continue
        ids = {lp.id for lp in red}
        inside = [a for a in fn.assigns if ids & set(a.loops)]
        inside_calls = [c for c in fn.calls if ids & set(c.loops)]

        def tile_index(e: Expr) -> bool:
            return fl.pid_derived(e, fn) and (_has_thread(fl, e, fn) if cuda else has_arange(fl, e, fn))

        redone = [a for a in inside for d in _runtime_divs(fl, a.value, fn, cuda) if tile_index(d.args[0])]
        if redone:
            continue
        for a in fn.assigns:
            if ids & set(a.loops):
                continue
            divs = [d for d in _runtime_divs(fl, a.value, fn, cuda) if tile_index(d.args[0])]
            if not divs:
                continue
            users = [x for x in inside if any(fl.refs(x.value, fn, t) for t in a.targets)]
            users += [c for c in inside_calls if any(fl.refs(c.expr, fn, t) for t in a.targets)]
            if users:
                u = users[0]
                return found(f"{fn.name} splits its tile index into {', '.join(a.targets)} once, before the loop",
                             [Span(a.line, a.end_line, "decomposition"), Span(u.line, u.end_line, "used in the loop")],
                             0.75)
    return missing("no tile index split by run-time sizes once before the reduction loop", confidence=0.7)


@check("loop_index_math_free")
def loop_index_math_free(facts: Facts, lang: str, *, input_index: int = 0) -> CheckResult:
    """The reduction loop (the loop holding the MMA or the carried accumulator) reads input ``input_index`` with
    masked (predicated) loads and computes no ``//``/``%`` by a run-time value on per-element values (Triton:
    values built from an ``arange``; CUDA: any run-time division): coordinates advance incrementally and masks
    come from bases computed before the loop. Scalar counters stepped by comparison are fine."""
    fl = flow(facts)
    reason = "no reduction loop reading the input"
    for fn in code(facts, lang):
        cuda = fn.lang == "cuda"
        red = _reduction_loops(fl, fn)
        ids = {lp.id for lp in red}
        if not ids:
            continue
        if cuda:
            reads = any(ids & set(a.loops) and fl.bases(a.value, fn) for a in fn.assigns) or any(
                ids & set(c.loops) for kind, c, _ in fl.memory_ops(fn) if kind == "load")
        else:
            targets = entry_params(fl, facts, fn, input_index)
            reads = any(kind == "load" and ids & set(c.loops) and (b & targets) and c.expr.kw("mask") is not None
                        for kind, c, b in fl.memory_ops(fn))
        if not reads:
            continue
        bad = None
        for a in fn.assigns:
            if not ids & set(a.loops):
                continue
            for d in _runtime_divs(fl, a.value, fn, cuda):
                if cuda or has_arange(fl, d.args[0], fn):
                    bad = (a, d)
                    break
            if bad:
                break
        if bad is None:
            return found(f"the reduction loop of {fn.name} reads the input with predicated loads and no run-time "
                         "division", span(red[0], "division-free loop"), 0.75)
        reason = f"division/modulo by a run-time value inside the reduction loop of {fn.name}"
    return missing(reason, confidence=0.75)


@check("flat_pipelined_reduction")
def flat_pipelined_reduction(facts: Facts, lang: str, *, min: int = 3) -> CheckResult:
    """The reduction is pipelined across the whole R*S*C sweep: ``num_stages >= min`` is asked for (autotune
    configs, the launch, or ``tl.range`` of the loop holding the MMA), and the loop holding the MMA is not nested
    inside another loop that carries the same accumulator (a ``static_range`` over taps around a channel loop,
    which at C = BK has one iteration per tap and leaves nothing in flight across taps)."""
    fl = flow(facts)
    staged = num_stages(facts, lang, min=min)
    if not staged.passed:
        return staged
    for fn in code(facts, "triton"):
        accs = dot_accumulators(fl, fn)
        if not accs:
            continue
        nested = []
        for var, lid in accs.items():
            lp = fn.loop(lid)
            outer = fn.loop(lp.parent) if lp is not None and lp.parent is not None else None
            while outer is not None:
                if var in fl.carried(fn).get(outer.id, {}):
                    nested.append((lp, outer))
                    break
                outer = fn.loop(outer.parent) if outer.parent is not None else None
        if nested:
            lp, outer = nested[0]
            return missing(f"{fn.name}: the MMA loop (line {lp.line}) runs inside the taps loop at line {outer.line}: "
                           "each tap's short loop is pipelined on its own", [span(lp, "inner loop"),
                                                                           span(outer, "taps loop")], 0.7)
        return found(f"{fn.name}: one pipelined reduction loop ({staged.reason})", staged.evidence, 0.8)
    return staged
