"""Static checks of task ``layernorm_backward``: the ones only its rubric (``rubrics/layernorm_backward.yaml``) uses.

- ``accumulator_dtype``
- ``read_modify_write``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import pos
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
    place (L2-resident), with no atomics."""
    fl = flow(facts)
    for fn in code(facts, lang):
        mem = fl.memory_ops(fn)
        for kind, c, b in mem:
            if kind != "store" or not b or (in_loop and not c.loops):
                continue
            for k2, c2, b2 in mem:
                if k2 == "load" and b2 & b and (not in_loop or set(c.loops) & set(c2.loops)):
                    return found(f"{fn.name} reads and writes {', '.join(sorted(b & b2))}"
                                 + (" in one loop" if in_loop else ""), [span(c2, "load"), span(c, "store")], 0.85)
    return missing("no buffer is loaded and stored back" + (" inside a loop" if in_loop else ""), confidence=0.8)
