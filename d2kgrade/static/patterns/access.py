"""Address expressions of loads and stores, the loads a value comes from, and the nodes of a value."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from d2kgrade.static.checkutil import matches
from d2kgrade.static.dataflow import LOADS, Flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Assign, Call, Expr, Function, Launch, Loop
from d2kgrade.static.patterns.names import ATOMIC_READS, VIEW_METHODS


def is_global_load(n: Expr, fn: Function) -> bool:
    """A read of global memory (``tl.load``, a CUDA pointer read, a descriptor ``.load``)."""
    return n.kind == "call" and ((n.op in LOADS and n.op != "tl.atomic_add") or (n.op == ".load" and fn.kind == "jit"))


def access_base(c: Call | Expr) -> Expr | None:
    e = c.expr if isinstance(c, Call) else c
    if e.op.startswith("."):
        return e.recv
    return e.kw("pointer", 0)


def reaches(fl: Flow, e: Expr, fn: Function, pred, depth: int = 6) -> Expr | None:
    """The first node reached from ``e`` (through definitions and helper returns) that satisfies ``pred``."""
    for n, f, _ in fl.walk(e, fn, depth=depth):
        if pred(n, f):
            return n
    return None


def value_nodes(e: Expr, fn: Function, depth: int = 4, within: Loop | None = None,
                 opaque_loads: bool = False) -> list[Expr]:
    """Nodes of ``e`` and of the definitions of the names it reads (in ``fn``, ``within`` a loop when given), not
    following loop variables to their ranges: what the value itself is computed from. ``opaque_loads``: a load's
    address and mask are not part of the loaded value."""
    out: list[Expr] = []
    stack: list[tuple[Expr, int]] = [(e, 0)]
    seen: set[int] = set()
    while stack:
        x, d = stack.pop()
        out.append(x)
        if x.kind == "name":
            if d >= depth:
                continue
            for a in fn.defs().get(x.op, []):
                if id(a) in seen or (a.value.kind == "other" and a.value.op == "loop-var"):
                    continue
                if within is not None and within.id not in a.loops:
                    continue
                seen.add(id(a))
                stack.append((a.value, d + 1))
            continue
        if opaque_loads and is_global_load(x, fn):
            continue
        stack.extend((a, d) for a in x.args)
        if x.kwargs:
            stack.extend((v, d) for v in x.kwargs.values())
        if x.recv is not None:
            stack.append((x.recv, d))
    return out


def loads_feeding(fl: Flow, e: Expr, fn: Function, depth: int = 4) -> list[Expr]:
    """Load expressions ``e``'s value comes from."""
    return [n for n, f, _ in fl.walk(e, fn, depth=depth) if is_global_load(n, f)]


def shared_names(facts: Facts, fn: Function) -> set[str]:
    base = fn.key.split("@")[0]
    return {s.name for s in facts.shared if s.func in (fn.key, base)}


def shared_views(fl: Flow, facts: Facts, fn: Function) -> set[str]:
    """``fn``'s ``__shared__`` buffers and the local pointers into them (``float* sdw = acc; float* sdb = acc + N``)."""
    names = shared_names(facts, fn)
    if not names:
        return names
    for a in fn.assigns:
        if a.value.kind in ("name", "bin", "cast") and any(n.kind == "name" and n.op in names
                                                           for n in a.value.walk()) and a.value.kind != "other":
            if a.value.kind == "bin" and a.value.op not in ("+", "-"):
                continue
            names = names | set(a.targets)
    return names


def _shared_of(fl: Flow, c: Call, views: set[str]) -> set[str]:
    addr = access_address(c)
    return {n.op for n in addr.walk() if n.kind == "name" and n.op in views} if addr is not None else set()


def shared_accumulate_flush(fl: Flow, facts: Facts, fn: Function, persistent: bool = True
                            ) -> tuple[Loop, Call, Call] | None:
    """CUDA partials kept in shared memory: inside a loop (``persistent``: a persistent loop over work items) a
    ``__shared__`` element is read and written back (``sdw[c] += dy * xhat``), and after that loop a global store
    takes its value from the same shared buffer (the flush of the per-CTA partial row). Returns (loop, the update,
    the flush)."""
    from d2kgrade.static.checkutil import is_persistent
    from d2kgrade.static.ir import end_pos, pos

    views = shared_views(fl, facts, fn)
    if not views:
        return None
    mem = fl.memory_ops(fn)
    for kind, c, b in mem:
        if kind != "store" or b or not c.loops:
            continue
        sh = _shared_of(fl, c, views)
        v = fl.stored_value(c)
        if not sh or v is None or not any(n.kind == "call" and n.op in LOADS and n.args and any(
                x.kind == "name" and x.op in sh for x in n.args[0].walk()) for n in v.walk()):
            continue  # not an update in place (sdw[c] = sdw[c] + ...)
        for lid in c.loops:
            lp = fn.loop(lid)
            if lp is None or (persistent and not is_persistent(fl, fn, lp)):
                continue
            for k2, c2, b2 in mem:
                if k2 != "store" or not b2 or lid in c2.loops or pos(c2) <= end_pos(lp):
                    continue
                v2 = fl.stored_value(c2)
                if v2 is not None and any(n.kind == "call" and n.op in LOADS and any(
                        x.kind == "name" and x.op in sh for x in n.walk()) for n in v2.walk()):
                    return lp, c, c2
    return None


def kernel_handoffs(fl: Flow, facts: Facts, lang: str) -> Iterator[tuple[Launch, Launch, dict[str, str], set[str]]]:
    """Pairs of launches in execution order where the first kernel stores into a host tensor that the later one
    loads: (first launch, later launch, the first kernel's stored parameters -> host names, the shared host
    names). ``lang``: ``triton``, ``cuda`` or ``any``."""
    from d2kgrade.static.patterns.roles import launch_tensors

    launches = [la for la in facts.launches if la.kernel in facts.functions]
    if lang != "any":
        want = "py" if lang == "triton" else "cuda"
        launches = [la for la in launches if facts.functions[la.kernel].lang == want]
    for i, la1 in enumerate(launches):
        k1 = facts.functions[la1.kernel]
        out1 = launch_tensors(fl, la1, {b for kind, _, bs in fl.memory_ops(k1) if kind == "store" for b in bs})
        for la2 in launches[i + 1:]:
            k2 = facts.functions[la2.kernel]
            if k2 is k1:
                continue
            in2 = launch_tensors(fl, la2, {b for kind, _, bs in fl.memory_ops(k2) if kind == "load" for b in bs})
            shared = set(out1.values()) & set(in2.values())
            if shared:
                yield la1, la2, out1, shared


def call_of(fn: Function, e: Expr) -> Call | None:
    for c in fn.calls:
        if c.expr is e:
            return c
    return None


def loads_of(fl: Flow, fn: Function, params: Iterable[str]) -> list[Call]:
    ps = set(params)
    return [c for kind, c, bases in fl.memory_ops(fn) if kind == "load" and bases & ps]


def computed_from(fl: Flow, e: Expr, fn: Function, stop: set[str], depth: int = 0,
                 seen: set[int] | None = None) -> Iterable[Expr]:
    """Nodes of the value ``e`` computes, following definitions, not descending into load addresses, subscript
    indices or the definitions of the names in ``stop`` (yielded themselves)."""
    seen = seen if seen is not None else set()
    if depth > 14 or id(e) in seen:
        return
    seen.add(id(e))
    yield e
    k = e.kind
    if k == "name":
        if e.op in stop:
            return
        for a in fl.defs(e.op, fn):
            v = a.value
            if v.kind == "other" and v.op in ("loop-var", "item-write"):
                if v.op == "item-write" and len(v.args) == 2:
                    yield from computed_from(fl, v.args[1], fn, stop, depth + 1, seen)
                continue
            yield from computed_from(fl, v, fn, stop, depth + 1, seen)
        return
    if k == "call" and (e.op in ("tl.load", "load", "tl.atomic_add") or e.op.startswith("__ld") or e.op == ".load"):
        return
    if k == "sub":
        if e.args:
            yield from computed_from(fl, e.args[0], fn, stop, depth + 1, seen)
        return
    if e.recv is not None:
        yield from computed_from(fl, e.recv, fn, stop, depth + 1, seen)
    for a in e.args:
        yield from computed_from(fl, a, fn, stop, depth + 1, seen)
    for a in (e.kwargs or {}).values():
        yield from computed_from(fl, a, fn, stop, depth + 1, seen)


def row_arange_sizes(fl: Flow, ptr: Expr, fn: Function) -> list[Expr]:
    """Sizes of the ``tl.arange`` s that index a tile's leading (row) axis: ``rows[:, None]``."""
    out = []
    for n, f, _ in fl.walk(ptr, fn, depth=5):
        if f is not fn or n.kind != "sub" or len(n.args) < 3:
            continue
        lead, rest = n.args[1], n.args[2:]
        if lead.kind == "other" and lead.op == "slice" and rest and all(i.kind == "const" and i.value is None
                                                                         for i in rest):
            for x, g, _ in fl.walk(n.args[0], fn, depth=4):
                if g is fn and x.kind == "call" and x.op == "tl.arange" and len(x.args) == 2:
                    out.append(x.args[1])
    return out


VECTOR_DEFAULT = ["float4", "uint4", "int4", "float2", "uint2", "int2", "double2", "half2", "__half2",
                  "__nv_bfloat162", "longlong2", "ulonglong2"]


def unit_arange(fl: Flow, e: Expr, fn: Function, depth: int = 0, hinted: bool = False) -> Expr | None:
    """The ``tl.arange`` that indexes the innermost dimension with unit stride (added, never multiplied).

    Under ``tl.max_contiguous(x, n)`` the programmer asserts runs of ``n`` contiguous values, so a flat index
    taken modulo a width (``tl.max_contiguous(tl.multiple_of(o % I, 8), 8)``) counts as well. A name and its
    definition are two levels, so 12 levels follow about five renamings."""
    if depth > 12:
        return None
    k = e.kind
    if k == "call" and e.op == "tl.arange":
        return e
    if k == "call" and e.op in ("tl.multiple_of", "tl.max_contiguous") and e.args:
        return unit_arange(fl, e.args[0], fn, depth + 1, hinted or e.op == "tl.max_contiguous")
    if k == "bin" and e.op in ("+", "-"):
        return (unit_arange(fl, e.args[1], fn, depth + 1, hinted)
                or unit_arange(fl, e.args[0], fn, depth + 1, hinted))
    if k == "bin" and e.op == "%" and hinted and e.args:
        return unit_arange(fl, e.args[0], fn, depth + 1, hinted)
    if k == "sub" and e.args:
        idx = e.args[1:]
        if len(idx) >= 1 and idx[-1].kind == "const" and idx[-1].value is None:
            return None  # x[:, None]: a column vector, its arange runs along rows
        return unit_arange(fl, e.args[0], fn, depth + 1, hinted)
    if k == "cast" and e.args:
        return unit_arange(fl, e.args[0], fn, depth + 1, hinted)
    if k == "name":
        for a in fn.defs().get(e.op, []):
            if a.value.kind == "other":
                continue
            hit = unit_arange(fl, a.value, fn, depth + 1, hinted)
            if hit is not None:
                return hit
    return None


def access_address(c: Call) -> Expr | None:
    """The address of a load/store: the pointer, or a descriptor access's coordinates."""
    if c.name.startswith("."):
        return c.expr.args[0] if c.expr.args else None
    return c.expr.kw("pointer", 0)


def is_global_read(n: Expr, fn: Function) -> bool:
    return n.kind == "call" and ((n.op in LOADS and n.op != "tl.atomic_add")
                                 or (n.op in (".load", ".gather") and fn.kind == "jit"))


def own_loads_feeding(fl: Flow, e: Expr, fn: Function, depth: int = 5) -> list[Expr]:
    """Load calls of ``fn`` that ``e`` (expanded through definitions) reads."""
    return [n for n, f, _ in fl.walk(e, fn, depth=depth) if f is fn and is_global_read(n, fn)]


def gather_loads(fl: Flow, fn: Function) -> dict[int, Call]:
    """Loads whose address depends on loaded data (``offsets[ids[i]]``), by id of their call expression."""
    return fl.facts.memo("moe:gathers:" + fn.key, lambda: compute_gathers(fl, fn))


def compute_gathers(fl: Flow, fn: Function) -> dict[int, Call]:
    out: dict[int, Call] = {}
    for kind, c, _ in fl.memory_ops(fn):
        addr = access_address(c) if kind == "load" else None
        if addr is None:
            continue
        if any(n is not c.expr for n in own_loads_feeding(fl, addr, fn, depth=4)):
            out[id(c.expr)] = c
    return out


def has_arange(fl: Flow, e: Expr, fn: Function) -> bool:
    return any(n.kind == "call" and n.op == "tl.arange" for n, f, _ in fl.walk(e, fn, depth=6) if f is fn)


def broadcast(e: Expr) -> bool:
    return any((n.kind == "call" and n.op in ("tl.broadcast_to", "tl.expand_dims")) or
               (n.kind == "sub" and any(x.kind == "const" and x.value is None for x in n.args[1:])) for n in e.walk())


def is_read(n: Expr, fn: Function) -> bool:
    """A node that reads global memory: a load, a descriptor load, or any atomic (which returns the old value)."""
    return n.kind == "call" and (n.op in LOADS or (n.op == ".load" and fn.kind == "jit")
                                 or matches(n.op, ATOMIC_READS))


def loads_of_fn(fl: Flow, fn: Function) -> list[tuple[Call, set[str]]]:
    return [(c, b) for kind, c, b in fl.memory_ops(fn) if kind == "load"]


def strip_view(e: Expr) -> Expr:
    for _ in range(8):
        if e.kind == "call" and e.op in VIEW_METHODS and e.recv is not None:
            e = e.recv
        elif e.kind == "call" and e.op in ("reinterpret_cast", "static_cast") and e.args:
            e = e.args[0]
        elif e.kind == "cast" and e.args:
            e = e.args[0]
        else:
            break
    return e


def element_value(a: Assign) -> Expr | None:
    """``u, z = (t.contiguous() for t in (u, z))``: the iterated element this target takes, when the element
    expression is a view of the loop variable."""
    v = a.value
    if a.index is None or v.kind != "other" or v.op != "comprehension":
        return None
    seqs = [x for x in v.args if x.kind == "tuple"]
    body = v.args[0] if v.args else None
    if not seqs or body is None or strip_view(body).kind != "name" or a.index >= len(seqs[-1].args):
        return None
    return seqs[-1].args[a.index]


def arange_size(fl: Flow, fn: Function, e: Expr, binding: dict[str, object]) -> int | None:
    r = fl.root(e, fn)
    v = fl.fold(r, fn)
    if isinstance(v, int):
        return v
    if r.kind == "name" and r.op in binding:
        b = binding[r.op]
        return b if isinstance(b, int) else None
    return None


def aranges(fl: Flow, e: Expr, fn: Function) -> list[Expr]:
    """The distinct ``tl.arange`` calls an address expression is built from."""
    out: dict[int, Expr] = {}
    for n, f, _ in fl.walk(e, fn, depth=6):
        if f is fn and n.kind == "call" and n.op == "tl.arange" and len(n.args) == 2:
            out[id(n)] = n
    return list(out.values())


def row_names(fl: Flow, fn: Function) -> set[str]:
    """Names holding a program-owned range of rows: a ``tl.arange`` offset by the program id
    (``offs_d = pid * BLOCK_D + tl.arange(0, BLOCK_D)``)."""
    out = set()
    for a in fn.assigns:
        if any(n.kind == "call" and n.op == "tl.arange" for n in a.value.walk()) and fl.pid_derived(a.value, fn):
            out.update(a.targets)
    return out
