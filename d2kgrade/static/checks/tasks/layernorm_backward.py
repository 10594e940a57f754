"""Static checks of task ``layernorm_backward``: the ones only its rubric (``rubrics/layernorm_backward.yaml``) uses.

- ``accumulator_dtype``
- ``handoff_buffers_fp32``
- ``read_modify_write``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import pos
from d2kgrade.static.patterns.access import kernel_handoffs, shared_accumulate_flush
from d2kgrade.static.patterns.liveness import load_taint
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


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
        taint = load_taint(fl, fn)
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


@check("read_modify_write")
def read_modify_write(facts: Facts, lang: str, *, in_loop: bool = True) -> CheckResult:
    """A kernel loads and stores the same buffer (``in_loop``: inside one loop): a private partial row updated in
    place (L2-resident), with no atomics; or (CUDA) a ``__shared__`` partial row updated in place inside the loop
    and flushed to global memory after it."""
    fl = flow(facts)
    for fn in code(facts, lang):
        if fn.lang == "cuda" and in_loop:
            hit = shared_accumulate_flush(fl, facts, fn, persistent=False)
            if hit is not None:
                return found(f"{fn.name} updates a shared-memory partial row in place in the loop at line "
                             f"{hit[0].line}", [span(hit[1], "shared update"), span(hit[2], "flush")], 0.8)
        mem = fl.memory_ops(fn)
        for kind, c, b in mem:
            if kind != "store" or not b or (in_loop and not c.loops):
                continue
            for k2, c2, b2 in mem:
                if k2 == "load" and b2 & b and (not in_loop or set(c.loops) & set(c2.loops)):
                    return found(f"{fn.name} reads and writes {', '.join(sorted(b & b2))}"
                                 + (" in one loop" if in_loop else ""), [span(c2, "load"), span(c, "store")], 0.85)
    return missing("no buffer is loaded and stored back" + (" inside a loop" if in_loop else ""), confidence=0.8)


@check("handoff_buffers_fp32")
def handoff_buffers_fp32(facts: Facts, lang: str) -> CheckResult:
    """Buffers that one kernel stores and a later kernel loads (the [G, N] dw/db partials of stage 1 read by
    stage 2) are allocated in fp32 on the host whenever their dtype is visible: partials kept in bf16 (allocated
    like ``w``) round the fp32 accumulation before the second stage adds them. Passes when no handed-over buffer
    has a visible non-fp32 dtype."""
    from d2kgrade.static.patterns.roles import buffer_dtype

    fl = flow(facts)
    for la1, la2, out1, shared in kernel_handoffs(fl, facts, lang):
        k1, k2 = facts.functions[la1.kernel], facts.functions[la2.kernel]
        for param, host in sorted(out1.items()):
            dt = buffer_dtype(fl, k1, param) if host in shared else None
            if dt is not None and dt not in ("fp32", "fp64"):
                return missing(f"{host}, which {k1.name} stores and {k2.name} reads, is allocated as {dt}",
                               [span(la1, f"launch of {k1.name}")], 0.8)
    return found("no buffer handed between kernels is allocated in a type narrower than fp32", [], 0.6)
