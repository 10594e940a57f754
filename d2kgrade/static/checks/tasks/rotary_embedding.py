"""Static checks of task ``rotary_embedding``: the ones only its rubric (``rubrics/rotary_embedding.yaml``) uses.

- ``host_index_gather``
- ``host_narrowing``
- ``permuted_index``
- ``runtime_element_offset``
- ``strided_element_index``
- ``token_block_head_loop``
"""

from __future__ import annotations

from collections.abc import Iterator

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function
from d2kgrade.static.registry import CheckResult, check, found, missing

PERMUTING = {"%", "^", "//"}


def _ops(op: str) -> tuple[str, ...]:
    return {"load": ("load",), "store": ("store",), "any": ("load", "store")}[op]


def _pointer_accesses(fl: Flow, facts: Facts, op: str) -> Iterator[tuple[Function, str, Call, Expr]]:
    """(kernel, ``load``/``store``, call, pointer) of every Triton pointer access of kind ``op``."""
    for fn in code(facts, "triton"):
        for kind, c, _ in fl.memory_ops(fn):
            if kind in _ops(op) and not c.name.startswith("."):
                ptr = c.expr.kw("pointer", 0)
                if ptr is not None:
                    yield fn, kind, c, ptr


def _arange_in(fl: Flow, e: Expr, fn: Function) -> bool:
    return any(n.kind == "call" and n.op == "tl.arange" for n, _, _ in fl.walk(e, fn, depth=4))


@check("permuted_index")
def permuted_index(facts: Facts, lang: str, *, op: str = "load") -> CheckResult:
    """A Triton load (``op: load``), store (``store``) or either (``any``) addresses its elements through a
    permutation of a tile index: a ``tl.arange``-derived offset passes through ``%``, ``^`` or ``//`` before it
    reaches the pointer (``x + (d + HALF) % D``, ``x + (d ^ 1)``, ``x + offs // N``): a per-element gather of
    partners or transposed positions, not a contiguous (or constant-shifted) tile. Usually negated."""
    fl = flow(facts)
    for fn, kind, c, ptr in _pointer_accesses(fl, facts, op):
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


def _index_operand(fl: Flow, e: Expr, fn: Function) -> bool:
    """``e`` is a tile index along the row: built from ``tl.arange`` without a load (not a gathered row number)
    and not a column vector (``offs[:, None]``)."""
    if e.kind == "sub" and any(i.kind == "const" and i.value is None for i in e.args[1:]):
        return False
    nodes = [n for n, _, _ in fl.walk(e, fn, depth=4)]
    return any(n.kind == "call" and n.op == "tl.arange" for n in nodes) and not any(
        n.kind == "call" and n.op in ("tl.load", ".load") for n in nodes)


@check("strided_element_index")
def strided_element_index(facts: Facts, lang: str, *, op: str = "any") -> CheckResult:
    """A Triton load (``op: load``), store or either (``any``, the default) addresses a row's elements with a
    constant stride of 2 or more (``base + 2*offs``, ``base + 2*offs + 1``): the even/odd members of GPT-J pairs
    read with two strided accesses instead of one contiguous row split in registers, so no access is a 16-byte
    vector. Usually negated."""
    fl = flow(facts)
    for fn, kind, c, ptr in _pointer_accesses(fl, facts, op):
        for n, f, _ in fl.walk(ptr, fn, depth=5):
            if n.kind != "bin" or n.op != "*" or len(n.args) != 2 or f is not fn:
                continue
            for k, other in ((n.args[0], n.args[1]), (n.args[1], n.args[0])):
                if k.kind == "const" and isinstance(k.value, int) and k.value >= 2 and _index_operand(
                        fl, other, fn):
                    return found(f"{kind} at line {c.line} in {fn.name} strides its elements by {k.value}",
                                 [span(c, f"strided {kind}"), span(n, "element stride")], 0.8)
    return missing(f"no {op} with a constant element stride along the row", confidence=0.75)


@check("host_narrowing")
def host_narrowing(facts: Facts, lang: str) -> CheckResult:
    """Host code reachable from ``kernel(...)`` converts one of its inputs to a 16-bit float type
    (``cos_cache.to(torch.bfloat16)``, ``.half()``, ``.bfloat16()``) before a kernel reads it: values the task
    gives in fp32 are rounded before the math. Usually negated."""
    from d2kgrade.static.patterns.roles import is_input_view

    fl = flow(facts)
    entry = facts.functions.get("kernel")
    inputs = list(entry.params) if entry is not None and not entry.is_device else []
    for fn in facts.hosts("py"):
        for c in fn.calls:
            e = c.expr
            if e.kind != "cast" or e.op not in ("bf16", "fp16") or not e.args:
                continue
            for p in inputs:
                if is_input_view(fl, e.args[0], fn, p, set()):
                    return found(f"{fn.name} narrows the input {p} to {e.op} on the host",
                                 [span(c, "host conversion")], 0.8)
    return missing("no input converted to a 16-bit type on the host", confidence=0.75)


@check("token_block_head_loop")
def token_block_head_loop(facts: Facts, lang: str) -> CheckResult:
    """A Triton kernel on a 1-D grid of token blocks walks its heads in a loop (``for h in tl.static_range(HQ)``)
    over tiles of its tokens, and a row gathered by position before that loop (cos/sin by ``pos``) is used inside
    it: one program owns a token block and all its heads, with cos/sin loaded once, as a 3-D tile would."""
    from d2kgrade.static.dataflow import site_of
    from d2kgrade.static.ir import pos
    from d2kgrade.static.patterns.access import gather_loads

    fl = flow(facts)
    for fn in code(facts, "triton"):
        if any(c.name == "tl.program_id" and (a := c.expr.kw("axis", 0)) is not None and fl.fold(a, fn) == 1
               for c in fn.calls):
            continue  # a (token, head) grid: heads are not one program's
        gathers = gather_loads(fl, fn)
        loads = [c for kind, c, _ in fl.memory_ops(fn) if kind == "load"]
        for lp in fn.loops:
            inside = [c for c in loads if lp.id in c.loops and id(c.expr) not in gathers]
            if not inside:
                continue
            for g in gathers.values():
                if lp.id in g.loops or pos(g) >= pos(lp):
                    continue
                t = fl.taint(fn, None, {id(g.expr)})
                used = [x for x in fn.calls if lp.id in x.loops and x.name in ("tl.store", "store")
                        and fl.reads_through(x.expr, fn, t, set(), site_of(x))]
                if used:
                    return found(f"{fn.name} loops over heads with a row gathered once before the loop",
                                 [span(g, "gathered once"), span(lp, "head loop"), span(used[0], "use")], 0.75)
    return missing("no token-block program that loops over heads with cos/sin gathered before the loop",
                   confidence=0.7)
