"""Static checks of task ``moe_permute``: the ones only its rubric (``rubrics/moe_permute.yaml``) uses.

- ``global_atomic``
- ``keyed_destination``
- ``onchip_histogram``
- ``register_topk``
- ``row_copy``
- ``sort_of_all_pairs``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Expr, Function
from d2kgrade.static.patterns.access import (
    access_address,
    broadcast,
    gather_loads,
    has_arange,
    is_global_read,
    own_loads_feeding,
    unit_arange,
)
from d2kgrade.static.patterns.liveness import data_dependent
from d2kgrade.static.patterns.roles import entry_params
from d2kgrade.static.registry import CheckResult, check, found, missing

ATOMICS = {"tl.atomic_add", "tl.atomic_cas", "tl.atomic_xchg", "tl.atomic_max", "tl.atomic_min", "tl.atomic_or",
           "tl.atomic_and", "tl.atomic_xor", "atomicAdd", "atomicInc", "atomicCAS", "atomicExch", "atomicMax",
           "atomicMin", "atomicOr", "atomicAnd", "atomicSub", "atomicAdd_block", "atomicAdd_system"}


@check("keyed_destination")
def keyed_destination(facts: Facts, lang: str) -> CheckResult:
    """A store's address, or a stored index, is computed from a value gathered by a loaded key (``dest =
    offsets[e] + base[block, e] + rank`` with ``e = ids[i]``): each item's destination is looked up per key, as
    in a counting sort's scatter, instead of coming from the program id or a sort. A stored value that is itself
    a gathered load (a row copied through an index) does not count."""
    fl = flow(facts)
    for fn in code(facts, lang):
        gathers = gather_loads(fl, fn)
        if not gathers:
            continue
        for kind, c, _ in fl.memory_ops(fn):
            if kind != "store":
                continue
            addr = access_address(c)
            hit = None
            if addr is not None:
                hit = next((n for n, f, _ in fl.walk(addr, fn, depth=5) if f is fn and id(n) in gathers), None)
            val = fl.stored_value(c)
            if hit is None and val is not None and _bare_load(fl, val, fn) is None:
                hit = next((n for n, f, _ in fl.walk(val, fn, depth=5) if f is fn and id(n) in gathers), None)
            if hit is not None:
                return found(f"{fn.name} stores at (or stores) a destination looked up by a loaded key",
                             [span(c, "keyed store"), span(hit, "offset of the key")], 0.8)
    return missing("no store whose destination is looked up by a loaded key", confidence=0.75)


def _bare_load(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> Expr | None:
    """The load whose value ``e`` passes on unchanged (casts, broadcasts, reshapes and names aside), if any."""
    if depth > 4:
        return None
    if is_global_read(e, fn):
        return e
    if e.kind == "cast" and e.args:
        return _bare_load(fl, e.args[0], fn, depth + 1)
    if e.kind == "call" and e.op in (".to", "tl.broadcast_to", "tl.reshape", "tl.cast", "tl.expand_dims") and (
            e.recv is not None or e.args):
        return _bare_load(fl, e.recv if e.recv is not None else e.args[0], fn, depth + 1)
    if e.kind == "sub" and e.args:
        return _bare_load(fl, e.args[0], fn, depth + 1)
    if e.kind == "name":
        defs = fl.defs(e.op, fn)
        got = [_bare_load(fl, d.value, fn, depth + 1) for d in defs]
        return got[0] if got and all(g is not None for g in got) else None
    return None


@check("row_copy")
def row_copy(facts: Facts, lang: str, *, input_index: int = 1) -> CheckResult:
    """Rows of input ``input_index`` are copied in contiguous chunks (a unit-stride ``tl.arange`` innermost) and
    read once: by programs that own destination rows and gather their source row through a loaded index, or by
    programs that own source rows, load a chunk once and store it to several loaded destinations (stores in a
    loop inside the load's, or one broadcast ``[k, BLOCK]`` tile). A program per (row, copy) that re-reads its
    row, an element-wise copy with per-element index math, or a copy made in PyTorch does not count."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        targets = entry_params(fl, facts, fn, input_index)
        if not targets:
            continue
        gathers = gather_loads(fl, fn)
        mem = fl.memory_ops(fn)
        rows = {id(c.expr): c for kind, c, b in mem if kind == "load" and b & targets
                and c.expr.kw("pointer", 0) is not None and unit_arange(fl, c.expr.kw("pointer", 0), fn) is not None}
        if not rows:
            continue
        for kind, c, _ in mem:
            if kind != "store":
                continue
            val = fl.stored_value(c)
            src = _bare_load(fl, val, fn) if val is not None else None
            ld = rows.get(id(src)) if src is not None else None
            if ld is None:
                continue
            if id(ld.expr) in gathers:
                return found(f"{fn.name} gathers each destination row's source through a loaded index",
                             [span(ld, "gathered row"), span(c, "row store")], 0.75)
            addr = access_address(c)
            if addr is None or data_dependent(fl, addr, fn) is None:
                continue
            inner = len(c.loops) > len(ld.loops) and c.loops[:len(ld.loops)] == ld.loops
            if inner or broadcast(val):
                return found(f"{fn.name} loads each row chunk once and stores it to its destinations",
                             [span(ld, "row chunk loaded once"), span(c, "stored to each destination")], 0.75)
    return missing(f"no contiguous copy of input {input_index} rows that reads each row once", confidence=0.7)


@check("global_atomic")
def global_atomic(facts: Facts, lang: str) -> CheckResult:
    """An atomic read-modify-write on global memory (``tl.atomic_*``, ``atomicAdd`` on a pointer parameter);
    atomics on ``__shared__`` buffers do not count. Usually negated: counts and ranks taken without contention."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for c in fn.calls:
            if c.name not in ATOMICS:
                continue
            if fn.lang == "cuda":
                ptr = c.expr.args[0] if c.expr.args else None
                if ptr is None or not fl.bases(ptr, fn):
                    continue
            return found(f"global atomic {c.name} in {fn.name}", span(c, "global atomic"), 0.85)
    return missing("no atomic on global memory", confidence=0.85)


def _onehot(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> Expr | None:
    """The ``==`` of loaded keys with an ``arange`` that ``e`` is, up to casts, masks and products."""
    if depth > 6:
        return None
    k = e.kind
    if k == "cmp" and e.op == "==" and len(e.args) == 2:
        a, b = e.args
        for x, y in ((a, b), (b, a)):
            if has_arange(fl, x, fn) and own_loads_feeding(fl, y, fn, depth=10):  # keys may be packed and unpacked
                return e
        return None
    if k == "cast" and e.args:
        return _onehot(fl, e.args[0], fn, depth + 1)
    if k == "call" and e.op in (".to", "tl.cast") and (e.recv is not None or e.args):
        return _onehot(fl, e.recv if e.recv is not None else e.args[0], fn, depth + 1)
    if k == "sub" and e.args:
        return _onehot(fl, e.args[0], fn, depth + 1)
    if k == "bin" and e.op in ("&", "*") and len(e.args) == 2:
        return _onehot(fl, e.args[0], fn, depth + 1) or _onehot(fl, e.args[1], fn, depth + 1)
    if k == "name":
        for d in fl.defs(e.op, fn):
            hit = _onehot(fl, d.value, fn, depth + 1)
            if hit is not None:
                return hit
    return None


@check("onchip_histogram")
def onchip_histogram(facts: Facts, lang: str) -> CheckResult:
    """Keys are counted on chip and the counts stored: a ``tl.histogram`` of the block's keys, or a ``tl.sum`` of
    a one-hot comparison of loaded keys with an ``arange`` of bins; in CUDA a counter carried by a loop over a
    ``__shared__`` buffer, or ``__shared__`` bins updated by atomics, written to global memory."""
    fl = flow(facts)
    for fn in code(facts, lang):
        shared = {b.name for b in facts.shared if b.func == fn.key}
        for kind, c, _ in fl.memory_ops(fn):
            if kind != "store":
                continue
            val = fl.stored_value(c)
            if val is None:
                continue
            for n, f, _ in fl.walk(val, fn, depth=5):
                if f is not fn:
                    continue
                if n.kind == "call" and n.op == "tl.histogram":
                    return found(f"{fn.name} stores a tl.histogram of its keys", [span(c, "counts"), span(n, "bins")],
                                 0.85)
                if n.kind == "call" and n.op == "tl.sum" and n.args and _onehot(fl, n.args[0], fn) is not None:
                    return found(f"{fn.name} stores one-hot counts of its keys", [span(c, "counts"),
                                                                                   span(n, "one-hot sum")], 0.8)
                if fn.lang == "cuda" and n.kind == "name" and shared and _shared_count(fl, fn, n.op, shared):
                    return found(f"{fn.name} stores a count taken over shared memory", span(c, "counts"), 0.7)
        if fn.lang == "cuda" and shared:
            for c in fn.calls:
                if c.name in ATOMICS and c.expr.args and not fl.bases(c.expr.args[0], fn) and \
                        c.expr.args[0].names() & shared:
                    return found(f"{fn.name} counts with shared-memory atomics", span(c, "shared atomic"), 0.75)
    return missing("no on-chip count of keys stored (tl.histogram, one-hot sum, shared-memory counting)",
                   confidence=0.75)


def _shared_count(fl: Flow, fn: Function, name: str, shared: set[str]) -> bool:
    """Is ``name`` a counter incremented in a loop whose test or body reads a ``__shared__`` buffer?"""
    for lid, by_var in fl.carried(fn).items():
        for u in by_var.get(name, []):
            reads = set(u.value.names())
            for g in u.guards:
                reads |= g.names()
            if reads & shared:
                return True
    return False


@check("register_topk")
def register_topk(facts: Facts, lang: str) -> CheckResult:
    """Top-k selected in registers: k rounds of an arg-max in which, inside a loop, a carried tile is reduced to
    its maximum (or arg-max) and the winner is masked out of it for the next round (``x = tl.where(cols == idx,
    -inf, x)`` with ``idx`` from ``tl.argmax(x)``, or from ``tl.max`` then the smallest matching index), or
    ``tl.topk`` (on packed value/index keys). A general sort (``tl.sort``) does not count."""
    fl = flow(facts)
    for fn in code(facts, "triton" if lang == "any" else lang):
        for c in fn.calls:
            if c.name == "tl.topk":
                return found(f"tl.topk in {fn.name}", span(c, "register top-k"), 0.75)
        for lid, by_var in fl.carried(fn).items():
            loop = fn.loop(lid)
            for var, ups in by_var.items():
                for u in ups:
                    v = u.value
                    if not (v.kind == "call" and v.op == "tl.where" and len(v.args) == 3):
                        continue
                    for n, f, _ in fl.walk(v.args[0], fn, within=loop, depth=5):
                        if f is fn and n.kind == "call" and n.op in ("tl.argmax", "tl.max", "tl.argmin", "tl.min") \
                                and n.args and fl.refs(n.args[0], fn, var, within=loop):
                            return found(f"{fn.name}: {var} reduced by {n.op} and its winner masked each round",
                                         [span(u.value, "mask the winner"), span(n, "arg-max")], 0.8)
    return missing("no loop that takes an arg-max of a carried tile and masks the winner", confidence=0.75)


_HOST_SORTS = {"torch.sort", "torch.argsort", ".sort", ".argsort", "thrust::sort", "thrust::sort_by_key",
               "cub::DeviceRadixSort::SortPairs", "cub::DeviceRadixSort::SortKeys"}


@check("sort_of_all_pairs")
def sort_of_all_pairs(facts: Facts, lang: str) -> CheckResult:
    """The pairs are ordered by a comparison sort of all of them: a ``tl.sort`` in a kernel launched as one
    program (``grid=(1,)``: one program sorting the T*k keys), or a sort on the host (``torch.argsort``,
    ``torch.sort``, thrust / cub device sorts). A ``tl.sort`` of each block's own keys in a kernel launched over
    many blocks (in-block ranks of a counting sort) is not. Usually negated."""
    fl = flow(facts)
    for fn in facts.hosts(None):
        for c in fn.calls:
            if c.name in _HOST_SORTS:
                return found(f"{fn.name} sorts on the host with {c.name}", span(c, "host sort"), 0.8)
    for fn in code(facts, "triton" if lang == "any" else lang):
        sorts = [c for c in fn.calls if c.name == "tl.sort"]
        if not sorts:
            continue
        for la in fl.launches_of(fn):
            caller = facts.functions.get(la.caller)
            if caller is None or la.grid is None:
                continue
            g = la.grid
            dims = list(g.args) if g.kind in ("tuple", "list") else [g]
            if dims and all(fl.fold(d, caller) == 1 for d in dims):
                return found(f"{fn.name} sorts with tl.sort in a single program", [span(sorts[0], "tl.sort"),
                                                                                  span(la, "grid of one program")],
                             0.8)
    return missing("no sort of all pairs (single-program tl.sort or host sort)", confidence=0.7)
