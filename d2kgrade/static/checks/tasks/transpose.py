"""Static checks of task ``transpose``: the ones only its rubric (``rubrics/transpose.yaml``) uses.

- ``shape_dependent_blocks``
- ``smem_padding``
- ``transposed_store``
"""

from __future__ import annotations

import re

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Expr
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


@check("smem_padding")
def smem_padding(facts: Facts, lang: str) -> CheckResult:
    """A 2-D ``__shared__`` tile is padded (``tile[32][32 + 1]``) or indexed with an XOR swizzle (``tile[r][c ^ r]``),
    so column accesses by a warp hit distinct banks."""
    for b in facts.shared:
        if b.func not in facts.reachable:
            continue
        if len(b.dims) >= 2 and re.search(r"\+\s*\d", b.dims[-1]):
            return found(f"padded shared tile {b.name}[{']['.join(b.dims)}]", Span(b.line, b.line, "padding"), 0.85)
    names = {b.name for b in facts.shared if b.func in facts.reachable}

    def xor_helper(x: Expr) -> bool:
        # a device helper that returns an XOR of its arguments (``swz<TN>(r, c)`` returning ``c ^ (r & 31)``)
        h = facts.functions.get("cu:" + x.op) if x.kind == "call" else None
        return h is not None and any(y.kind == "bin" and y.op == "^" for r in h.returns for y in r.walk())

    for fn in code(facts, "cuda"):
        exprs = [a.value for a in fn.assigns] + [c.expr for c in fn.calls]  # reads in assignments and calls
        for e in exprs:
            for n in e.walk():
                if n.kind == "sub" and n.args and n.args[0].kind in ("sub", "name") and any(
                        (x.kind == "bin" and x.op == "^") or xor_helper(x) for i in n.args[1:] for x in i.walk()):
                    base = n.args[0]
                    while base.kind == "sub" and base.args:
                        base = base.args[0]
                    if base.kind == "name" and base.op in names:
                        return found(f"XOR-swizzled shared index into {base.op}", span(n, "swizzle"), 0.8)
    return missing("no padded or swizzled 2-D shared-memory tile", confidence=0.8)


@check("shape_dependent_blocks")
def shape_dependent_blocks(facts: Facts, lang: str) -> CheckResult:
    """Block sizes are chosen per problem shape: autotuned over several values of a block parameter with a
    ``key``, set by ``@triton.heuristics``, or computed on the host from the sizes at launch."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        if fn.autotune and fn.autotune.key:
            for p in fn.constexprs:
                vals = {str(c.kwargs.get(p)) for c in fn.autotune.configs if p in c.kwargs}
                if len(vals) >= 2:
                    return found(f"{fn.name}: {p} autotuned over {len(vals)} values",
                                 Span(fn.autotune.line, fn.autotune.end_line, "configs"), 0.8)
        for p in fn.constexprs:
            if p in fn.heuristics:
                return found(f"{fn.name}: {p} set by a heuristic", span(fn.heuristics[p], "heuristic"), 0.8)
        for la in fl.launches_of(fn):
            caller = facts.functions.get(la.caller)
            if caller is None:
                continue
            for p in sorted(fn.constexprs):
                e = fl.launch_arg(la, fn, p)
                if e is None or fl.fold(e, caller) is not None:
                    continue
                if any(n.kind == "call" and n.op == "tl.arange" and len(n.args) == 2 and n.args[1].kind == "name"
                       and fl.root(n.args[1], fn).op == p for c in fn.calls for n in c.expr.walk()):
                    return found(f"{fn.name}: block size {p} computed at launch", span(la, "launch"), 0.75)
    return missing("block sizes are the same for every shape", confidence=0.75)


_TRANSPOSES = ("tl.trans", "tl.permute")


@check("transposed_store")
def transposed_store(facts: Facts, lang: str) -> CheckResult:
    """A Triton store (pointer or descriptor) writes a tile transposed in registers: the stored value goes through
    ``tl.trans``, ``tl.permute`` or the tensor's ``.T``, so the compiler converts the layout through shared memory
    and both the load and the store are row-coalesced. A tile stored through swapped pointer strides is not."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        for kind, c, _ in fl.memory_ops(fn):
            if kind != "store":
                continue
            v = fl.stored_value(c)
            if v is None:
                continue
            for n, f, _ in fl.walk(v, fn, depth=5):
                if (n.kind == "call" and n.op in _TRANSPOSES) or (n.kind == "attr" and n.op == "T"):
                    return found(f"{fn.name} stores a tile transposed in registers",
                                 [span(c, "store"), span(n, "transpose")], 0.85)
    return missing("no store of a tile transposed with tl.trans / tl.permute / .T", confidence=0.8)
