"""Static checks of task ``rotary_embedding``: the ones only its rubric (``rubrics/rotary_embedding.yaml``) uses.

- ``host_index_gather``
- ``permuted_index``
- ``runtime_element_offset``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Expr, Function
from d2kgrade.static.registry import CheckResult, check, found, missing

PERMUTING = {"%", "^", "//"}


def _ops(op: str) -> tuple[str, ...]:
    return {"load": ("load",), "store": ("store",), "any": ("load", "store")}[op]


def _arange_in(fl: Flow, e: Expr, fn: Function) -> bool:
    return any(n.kind == "call" and n.op == "tl.arange" for n, _, _ in fl.walk(e, fn, depth=4))


@check("permuted_index")
def permuted_index(facts: Facts, lang: str, *, op: str = "load") -> CheckResult:
    """A Triton load (``op: load``), store (``store``) or either (``any``) addresses its elements through a
    permutation of a tile index: a ``tl.arange``-derived offset passes through ``%``, ``^`` or ``//`` before it
    reaches the pointer (``x + (d + HALF) % D``, ``x + (d ^ 1)``, ``x + offs // N``): a per-element gather of
    partners or transposed positions, not a contiguous (or constant-shifted) tile. Usually negated."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        for kind, c, _ in fl.memory_ops(fn):
            if kind not in _ops(op) or c.name.startswith("."):
                continue
            ptr = c.expr.kw("pointer", 0)
            if ptr is None:
                continue
            for n, f, _ in fl.walk(ptr, fn, depth=5):
                if n.kind == "bin" and n.op in PERMUTING and len(n.args) == 2 and _arange_in(fl, n.args[0], f):
                    return found(f"{kind} at line {c.line} in {fn.name} indexes through '{n.op}' of a tile index",
                                 [span(c, f"permuted {kind}"), span(n, "permutation")], 0.8)
    return missing(f"every {op} indexes its tile with plain (shifted or strided) aranges", confidence=0.75)


def _addends(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> list[Expr]:
    """The terms of an address sum, through local pointer variables (``row = x + t*s``; ``row + half + i``)."""
    if depth > 6:
        return [e]
    if e.kind == "bin" and e.op == "+" and len(e.args) == 2:
        return _addends(fl, e.args[0], fn, depth + 1) + _addends(fl, e.args[1], fn, depth + 1)
    if e.kind == "name" and e.op not in fn.params:
        defs = fn.defs().get(e.op, [])
        if len(defs) == 1 and defs[0].value.kind in ("bin", "name"):
            return _addends(fl, defs[0].value, fn, depth + 1)
    return [e]


@check("runtime_element_offset")
def runtime_element_offset(facts: Facts, lang: str, *, op: str = "load") -> CheckResult:
    """A Triton load (``op: load``), store or either (``any``) adds to its address a run-time integer argument on
    its own, neither a ``tl.constexpr`` nor multiplied by an index (``base + half + i`` with ``half`` a plain
    kernel argument): an offset inside the row that the compiler cannot fold into the access pattern, where
    ``HALF: tl.constexpr`` would be. Usually negated."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        ints = fl.int_names(fn)
        for kind, c, _ in fl.memory_ops(fn):
            if kind not in _ops(op) or c.name.startswith("."):
                continue
            ptr = c.expr.kw("pointer", 0)
            if ptr is None:
                continue
            for t in _addends(fl, ptr, fn):
                r = fl.root(t, fn)
                if r.kind == "name" and r.op in fn.params and r.op not in fn.constexprs and (
                        r.op in ints or t.kind == "name" and t.op in ints):
                    return found(f"{kind} at line {c.line} in {fn.name} adds the run-time argument {r.op}",
                                 [span(c, f"{kind} with a run-time element offset")], 0.75)
    return missing(f"no {op} adds a bare run-time integer argument to its address", confidence=0.7)


@check("host_index_gather")
def host_index_gather(facts: Facts, lang: str) -> CheckResult:
    """Host code reachable from ``kernel(...)`` gathers a tensor by an index tensor before or after the kernels:
    a subscript by a tensor built with ``torch`` calls or by an input of ``kernel(...)`` (``q[..., perm]``,
    ``cos_cache[positions]``), or ``torch.index_select``/``gather``/``take``: the permutation or gather runs in
    PyTorch, around the kernel, instead of inside it."""
    entry = facts.functions.get("kernel")
    inputs = set(entry.params) if entry is not None and not entry.is_device else set()
    for fn in facts.hosts("py"):
        defs = fn.defs()

        def tensor_index(x: Expr) -> bool:
            if x.kind != "name":
                return False
            if x.op in inputs and fn is entry:
                return True
            return any(n.kind == "call" and n.op.startswith("torch.") for d in defs.get(x.op, [])
                       for n in d.value.walk())

        for c in fn.calls:
            if c.name in ("torch.index_select", "torch.gather", "torch.take", ".index_select", ".gather"):
                return found(f"{fn.name} gathers with {c.name} in PyTorch", [span(c, "host gather")], 0.75)
        exprs = [a.value for a in fn.assigns] + [c.expr for c in fn.calls]
        for e in exprs:
            for n in e.walk():
                if n.kind == "sub" and any(tensor_index(i) for i in n.args[1:]):
                    return found(f"{fn.name} indexes a tensor with an index tensor at line {n.line}",
                                 [span(n, "host gather")], 0.75)
    return missing("no gather by an index tensor in host code", confidence=0.7)
