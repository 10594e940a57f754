"""Static checks of task ``prefix_scan``: the ones only its rubric (``rubrics/prefix_scan.yaml``) uses.

- ``carried_tile_scan``
- ``decoupled_lookback``
- ``dynamic_work_id``
- ``packed_state_publish``
- ``scan_tile_elements``
- ``vector_lookback``
- ``vector_types_templated``
- ``warp_row_scan``
"""

from __future__ import annotations

import re

from d2kgrade.static.checks.cuda import _instantiations, warp_per_row
from d2kgrade.static.checks.memory import vector_access
from d2kgrade.static.checkutil import code, matches, span
from d2kgrade.static.dataflow import STORES, Flow, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Assign, Call, Expr, Function, Loop, end_pos, pos
from d2kgrade.static.patterns.access import (
    VECTOR_DEFAULT,
    access_address,
    access_base,
    arange_size,
    aranges,
    is_read,
    loads_of_fn,
)
from d2kgrade.static.patterns.config import launch_values
from d2kgrade.static.patterns.names import ATOMIC_READS, ATOMICS
from d2kgrade.static.patterns.roles import input_params_of
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

SCAN_CALLS = ["tl.cumsum", "tl.associative_scan", "tl.cumprod", "__shfl_up_sync", "__shfl_up", "*InclusiveScan",
              "*InclusiveSum", "*ExclusiveScan", "*ExclusiveSum", "cg::inclusive_scan", "cg::exclusive_scan"]


def _unbounded(fl: Flow, fn: Function, lp: Loop) -> bool:
    """A loop with no exit condition of its own (``for (;;)``, ``while (true)``, ``while True``): it ends only
    through a ``break`` or ``return`` inside it."""
    if lp.kind not in ("while", "for"):
        return False
    return lp.stop is None or fl.fold(lp.stop, fn) in (True, 1)


def _polling_loops(fl: Flow, fn: Function) -> list[tuple[Loop, list[Expr]]]:
    """Loops that poll memory: a ``while`` whose condition depends on memory read inside the loop, or an
    unbounded loop (``for (;;)``, CUB's look-back form) whose statements are guarded by a condition that depends
    on such a read (the ``if (...) break;`` that ends it), with those reads."""
    out = []
    for lp in fn.loops:
        polls_cond = lp.kind == "while" and lp.stop is not None and fl.fold(lp.stop, fn) not in (True, 1)
        if not polls_cond and not _unbounded(fl, fn, lp):
            continue
        inside = [a for a in fn.assigns if lp.id in a.loops]
        reads = [n for a in inside for n in a.value.walk() if is_read(n, fn)]
        reads += [c.expr for c in fn.calls if lp.id in c.loops and is_read(c.expr, fn) and c.expr not in reads]
        if not reads:
            continue
        dep = dependents(inside, {t for a in inside if any(is_read(n, fn) for n in a.value.walk())
                                  for t in a.targets})
        if polls_cond:
            if lp.stop.names() & dep or any(is_read(n, fn) for n in lp.stop.walk()):
                out.append((lp, reads))
            continue
        guards = [g for x in [*inside, *(c for c in fn.calls if lp.id in c.loops)] for g in x.guards]
        if any(g.names() & dep for g in guards):
            out.append((lp, reads))
    return out


def _written_bases(fl: Flow, fn: Function) -> list[tuple[Call, set[str]]]:
    """Stores and atomic writes of ``fn`` with the pointers they write."""
    out = []
    for c in fn.calls:
        if c.name in STORES or matches(c.name, ATOMIC_READS):
            ptr = c.expr.kw("pointer", 0)
            if ptr is not None:
                out.append((c, fl.bases(ptr, fn)))
    return out


def _accumulates_read(fl: Flow, fn: Function, lp: Loop) -> Assign | None:
    """An assignment in ``lp`` to a variable the loop carries whose value reads memory read inside the loop (a
    running sum of polled values: ``prefix += val``, ``excl += tl.sum(tl.where(..., val, 0))``)."""
    for v, ups in fl.carried(fn).get(lp.id, {}).items():
        for a in ups:
            if any(is_read(n, f) for n, f, _ in fl.walk(a.value, fn, within=lp, depth=6)):
                return a
    return None


@check("decoupled_lookback")
def decoupled_lookback(facts: Facts, lang: str) -> CheckResult:
    """A single-pass chained scan with a look-back: in one kernel, a loop polls memory written by other programs
    (a ``while`` whose condition depends on a value read inside it), carries a running sum of the values it reads
    (the predecessors' published aggregates), and the buffer it polls is written by the same kernel both before
    that loop (the tile's own aggregate) and after it (its inclusive prefix). A chained scan that only waits for
    the predecessor's final value publishes nothing before its wait; reduce-then-scan has no polling loop."""
    fl = flow(facts)
    best = "no loop that waits on values written by other programs"
    for fn in code(facts, lang):
        writes = _written_bases(fl, fn)
        for lp, reads in _polling_loops(fl, fn):
            acc = _accumulates_read(fl, fn, lp)
            if acc is None:
                best = f"the polling loop at line {lp.line} of {fn.name} sums no polled values"
                continue
            polled = set()
            for r in reads:
                ptr = r.kw("pointer", 0) if not r.op.startswith(".") else r.recv
                if ptr is not None:
                    polled |= fl.bases(ptr, fn)
            before = [c for c, b in writes if b & polled and lp.id not in c.loops and pos(c) < pos(lp)]
            after = [c for c, b in writes if b & polled and lp.id not in c.loops and pos(c) > end_pos(lp)]
            if before and after:
                return found(f"{fn.name} publishes to {', '.join(sorted(polled))} before and after a look-back "
                             f"loop that sums polled values",
                             [span(before[0], "publish aggregate"), span(lp, "look-back"),
                              Span(acc.line, acc.end_line, "sum of polled values"), span(after[0], "publish prefix")],
                             0.85)
            best = (f"the polling loop at line {lp.line} of {fn.name} is not preceded and followed by writes to "
                    f"the polled buffer (no aggregate published before the wait)")
    return missing(best, confidence=0.8)


@check("vector_lookback")
def vector_lookback(facts: Facts, lang: str) -> CheckResult:
    """A look-back inspects a window of predecessors per step: a polling loop (see ``decoupled_lookback``) that
    sums the values it polls reads a vector of states (the read address holds a ``tl.arange``) or, in CUDA, votes
    or reduces across the warp inside the loop (``__ballot_sync``, ``__reduce_*_sync``, shuffles). A window that
    only waits until all its predecessors are INCLUSIVE, summing nothing, does not count."""
    fl = flow(facts)
    loops = 0
    for fn in code(facts, lang):
        for lp, reads in _polling_loops(fl, fn):
            loops += 1
            if _accumulates_read(fl, fn, lp) is None:
                continue  # a window that only waits (until every predecessor is INCLUSIVE) sums nothing
            for r in reads:
                ptr = r.kw("pointer", 0) if not r.op.startswith(".") else r.recv
                if ptr is not None and any(n.kind == "call" and n.op == "tl.arange"
                                           for n, _, _ in fl.walk(ptr, fn, depth=5)):
                    return found(f"{fn.name} polls a vector of states per look-back step",
                                 [span(lp, "look-back"), Span(r.line, r.end_line, "window read")], 0.85)
            votes = [c for c in fn.calls if lp.id in c.loops and (c.name.startswith(("__ballot", "__reduce_"))
                                                                  or c.name.startswith("__shfl"))]
            if votes:
                return found(f"{fn.name} votes across the warp inside its look-back loop",
                             [span(lp, "look-back"), span(votes[0], votes[0].name)], 0.8)
    if loops:
        return missing(f"{loops} polling loop(s), none summing a window of states per step", confidence=0.8)
    return missing("no look-back loop", confidence=0.8)


def _shift32(fl: Flow, e: Expr, fn: Function) -> Expr | None:
    """A node of ``e`` (expanded) that moves a field into the high half of a 64-bit word: ``s << 32`` or
    ``s * 2**32``."""
    for n, f, env in fl.walk(e, fn, depth=6):
        if n.kind == "bin" and len(n.args) == 2:
            if n.op == "<<" and fl.fold(n.args[1], f, env) == 32:
                return n
            if n.op == "*" and any(fl.fold(a, f, env) == 2 ** 32 for a in n.args):
                return n
    return None


@check("packed_state_publish")
def packed_state_publish(facts: Facts, lang: str) -> CheckResult:
    """A tile state is published as one 64-bit word: an atomic exchange/CAS (or a release store in inline PTX)
    writes a value that packs a field into the high 32 bits (``(status << 32) | bits``, ``lo + tag * 2**32``), and
    the same kernel reads that buffer back with an atomic or a load (other programs' states), so a reader never
    sees a flag without its value. Separate flag and value writes, or packed words written with plain stores and
    read by a later launch, do not count."""
    fl = flow(facts)
    for t in facts.reachable_tokens("asm"):
        if "st.release" in t.text and ("64" in t.text):
            return found("64-bit release store in inline PTX", Span(t.line, t.end_line, "st.release"), 0.8)
    seen_atomic = ""
    for fn in code(facts, lang):
        reads = {b for c, bs in loads_of_fn(fl, fn) for b in bs}
        for c in fn.calls:
            if not matches(c.name, ("tl.atomic_*", "atomic*")):
                continue
            ptr = c.expr.kw("pointer", 0)
            bases = fl.bases(ptr, fn) if ptr is not None else set()
            atomic_reads = {b for c2 in fn.calls if c2 is not c and matches(c2.name, ("tl.atomic_*", "atomic*"))
                            and (p2 := c2.expr.kw("pointer", 0)) is not None for b in fl.bases(p2, fn)}
            if c.name not in ("tl.atomic_xchg", "tl.atomic_cas", "atomicExch", "atomicCAS"):
                continue
            val = c.expr.kw("val", 1) if c.name in ("tl.atomic_xchg", "atomicExch") else c.expr.kw("val", 2)
            if val is None:
                continue
            seen_atomic = f"{c.name} at line {c.line}"
            sh = _shift32(fl, val, fn)
            if sh is not None and bases & (reads | atomic_reads):
                return found(f"{fn.name} publishes packed 64-bit states with {c.name} and reads them back",
                             [span(c, "packed publish"), span(sh, "high half")], 0.85)
    if seen_atomic:
        return missing(f"{seen_atomic} does not publish a packed (high half, low half) word that the kernel "
                       "reads back", confidence=0.8)
    return missing("no atomic publication of a packed 64-bit state", confidence=0.8)


@check("carried_tile_scan")
def carried_tile_scan(facts: Facts, lang: str) -> CheckResult:
    """A loop over tiles stores a scan of each tile plus a total carried across iterations: the stored value
    reads a scan (``tl.cumsum``/``tl.associative_scan``; in CUDA a ``__shfl_up_sync`` scan or a block/warp scan)
    and a variable the loop carries (``y = tl.cumsum(x, 0) + carry; carry += tl.sum(x, 0)``). CUDA form of
    ``scan_with_carry``: one block walking its row with the running total in a register, also as CUB writes it: a
    block scan inside the tile loop handed a prefix-callback object made before the loop
    (``BlockScan(tmp).InclusiveSum(items, items, carry)``) whose ``operator()`` adds each tile total to a member
    it keeps (``running += tile_total``)."""
    fl = flow(facts)
    op = _stateful_prefix_op(facts)
    for fn in code(facts, lang):
        if op is not None and fn.lang == "cuda":
            hit = _callback_scan_in_loop(fl, fn)
            if hit is not None:
                return found(f"block scan with a running-total prefix callback in a tile loop of {fn.name}",
                             [span(hit, "scan with prefix callback"),
                              Span(op[1].line, op[1].end_line, "callback carries the total")], 0.8)
        carried = fl.carried(fn)
        for kind, st, _ in fl.memory_ops(fn):
            if kind != "store" or not st.loops:
                continue
            v = fl.stored_value(st)
            if v is None:
                continue
            scans = [n for n, _, _ in fl.walk(v, fn, depth=8) if n.kind == "call" and matches(n.op, SCAN_CALLS)]
            if not scans:
                continue
            for lid in st.loops:
                loop = fn.loop(lid)
                hit = [c for c in carried.get(lid, {}) if fl.refs(v, fn, c, within=loop)]
                if hit:
                    return found(f"tile scan plus carried total {hit[0]} in {fn.name}",
                                 [span(scans[0], "tile scan"), span(st, "store with carry")], 0.85)
    return missing("no tile scan combined with a carry across loop iterations", confidence=0.8)


_BLOCK_SCANS = (".InclusiveSum", ".ExclusiveSum", ".InclusiveScan", ".ExclusiveScan")


def _stateful_prefix_op(facts: Facts) -> tuple[Function, Assign] | None:
    """A functor ``operator()(T total)`` that adds its argument to state it keeps across calls (a member: assigned
    from itself, neither a parameter nor a local it declares first): CUB's running-total prefix callback."""
    for fn in facts.functions.values():
        if fn.lang != "cuda" or fn.name != "operator()" or not fn.params:
            continue
        for a in fn.assigns:
            t = a.targets[0] if len(a.targets) == 1 else None
            if t is None or t in fn.params or not a.aug:
                continue
            if any(d is not a and d.line < a.line for d in fn.defs().get(t, [])):
                continue
            if t in a.value.names() and a.value.names() & set(fn.params):
                return fn, a
    return None


def _callback_scan_in_loop(fl: Flow, fn: Function) -> Call | None:
    """A block scan inside a loop whose last argument is an object defined before that loop and not reassigned in
    it (the prefix callback), and whose output array the loop stores."""
    for c in fn.calls:
        if not c.loops or not matches(c.name, _BLOCK_SCANS) or len(c.expr.args) < 3:
            continue
        cb, out = c.expr.args[-1], c.expr.args[1]
        if cb.kind != "name" or out.kind != "name":
            continue
        lid = c.loops[-1]
        defs = fn.defs().get(cb.op, [])
        if not defs or any(lid in d.loops for d in defs) or not all(pos(d) < pos(c) for d in defs):
            continue
        stores = [x for x in fn.calls if lid in x.loops and pos(x) > pos(c)
                  and (x.name in STORES or x.name.endswith(".Store")) and out.op in x.expr.names()]
        if stores:
            return c
    return None


def _tile_elems(fl: Flow, fn: Function, ptr: Expr) -> list[int | None]:
    """Elements of the tile an address covers, per launch binding (None: not a compile-time constant)."""
    ars = aranges(fl, ptr, fn)
    if not ars:
        return [1]
    out: list[int | None] = []
    for b in launch_values(fl, fn) or [{}]:
        total: int | None = 1
        for a in ars:
            s = arange_size(fl, fn, a.args[1], b)
            total = total * s if total is not None and s is not None else None
        out.append(total)
    return out


@check("scan_tile_elements")
def scan_tile_elements(facts: Facts, lang: str, *, min_elements: int = 4096, inputs: list[int] | None = None
                       ) -> CheckResult:
    """Every 1-D tile scanned along a long row is large: each load of ``inputs`` (positions in ``kernel(...)``;
    default: any load) whose value reaches a scan (``tl.cumsum``/``tl.associative_scan``) along axis 0 covers at
    least ``min_elements`` elements at every launch (sizes from constants, launch arguments or autotune
    configs; sizes known only at run time count as large). 2-D tiles scanned along axis 1 (short rows, bounded by
    the row length) are not judged."""
    fl = flow(facts)
    seen: list[tuple[Function, Call, list[int | None]]] = []
    for fn in code(facts, "triton"):
        params = input_params_of(fl, fn, inputs) if inputs is not None else None
        scans = [c for c in fn.calls if c.name in ("tl.cumsum", "tl.associative_scan", "tl.cumprod")]
        if not scans:
            continue
        for c, bases in loads_of_fn(fl, fn):
            if params is not None and not bases & params:
                continue
            ptr = access_base(c)
            if ptr is None or c.name.startswith("."):
                continue
            t = fl.taint(fn, None, {id(c.expr)})
            fed = [s for s in scans if any(fl.reads_through(a, fn, t, {id(c.expr)}, site_of(s))
                                           for a in s.expr.args[:1])]
            fed = [s for s in fed if fl.fold(s.expr.kw("axis", 1) or Expr("const", value=0), fn) in (0, None)
                   and len(aranges(fl, ptr, fn)) <= 1]
            if fed:
                seen.append((fn, c, _tile_elems(fl, fn, ptr)))
    if not seen:
        return missing("no 1-D tile of the input is scanned", confidence=0.75)
    for fn, c, sizes in seen:
        small = [s for s in sizes if s is not None and s < min_elements]
        if small:
            return missing(f"{fn.name} scans tiles of {min(small)} elements (< {min_elements})",
                           [span(c, "small tile")], 0.8)
    known = [s for _, _, sizes in seen for s in sizes if s is not None]
    return found(f"scanned tiles of >= {min(known) if known else 'run-time sized'} elements "
                 f"({len(seen)} load(s))", [span(c, "tile load") for _, c, _ in seen[:3]], 0.8)


@check("vector_types_templated")
def vector_types_templated(facts: Facts, lang: str) -> CheckResult:
    """Reachable CUDA code moves data as vector types, also through a template parameter: a
    ``reinterpret_cast<const V*>`` whose ``V`` is a template parameter that a launch binds to a vector type
    (``row_scan<float, float4><<<...>>>``), also when the cast sits in a device helper the kernel calls with its
    own ``V`` (``load4<T, V>``) and the launch's arguments come from a host template's instantiation
    (``launch<float, float4>(...)``), besides the direct forms ``vector_access`` accepts."""

    direct = vector_access(facts, lang)
    if direct.passed:
        return direct
    want = set(VECTOR_DEFAULT)
    for t in facts.reachable_tokens("reinterpret"):
        fn = facts.functions.get(t.func)
        if fn is None or t.text not in fn.constexprs:
            continue
        # the cast may sit in a device helper (load4<T, V>) called from kernels that forward the parameter by name
        holders = [fn] + [k for k in code(facts, "cuda") if k is not fn and t.text in k.constexprs and any(
            c.name == fn.name and t.text in re.findall(r"\w+", str(c.expr.value or "")) for c in k.calls)]
        for k in holders:
            for la in facts.launches:
                if la.kernel != k.key or not la.template:
                    continue
                for inst in dict.fromkeys([la.template, *_instantiations(facts, la)]):
                    if any(x.strip() in want for x in inst.split(",")):
                        return found(f"vector accesses through template parameter {t.text} ({inst})",
                                     [Span(t.line, t.end_line, "vector cast"), span(la, "launch")], 0.8)
    return direct


@check("dynamic_work_id")
def dynamic_work_id(facts: Facts, lang: str) -> CheckResult:
    """Work items are claimed at run time from an atomic counter (``tile = tl.atomic_add(counter, 1)``) and the
    claimed id addresses the data, instead of taking the program id."""
    fl = flow(facts)
    for fn in code(facts, lang):
        ids = {t: a for a in fn.assigns for t in a.targets
               if any(n.kind == "call" and n.op in ATOMICS and len(n.args) >= 2 and fl.fold(n.args[1], fn) == 1
                      for n in a.value.walk())}
        if not ids:
            continue
        for kind, c, _ in fl.memory_ops(fn):
            addr = access_address(c)
            if addr is not None and any(fl.refs(addr, fn, t) for t in ids):
                a = next(iter(ids.values()))
                return found(f"work id claimed with an atomic counter in {fn.name}",
                             [Span(a.line, a.end_line, "atomic work id"), span(c, "addressed by it")], 0.85)
    return missing("no work id taken from an atomic counter", confidence=0.8)


def dependents(assigns: list, dep: set[str]) -> set[str]:
    """``dep`` grown to a fixpoint with the targets of ``assigns`` whose value or guarding ``if`` conditions read
    a name already in it (updated in place and returned)."""
    changed = True
    while changed:
        changed = False
        for a in assigns:
            if set(a.targets) <= dep:
                continue
            names = a.value.names().union(*(g.names() for g in a.guards)) if a.guards else a.value.names()
            if names & dep:
                dep.update(a.targets)
                changed = True
    return dep


def _block_x(fl: Flow, facts: Facts, la) -> int | None:
    """The x extent of a CUDA launch's block: a literal, or ``dim3 block(32, 8)`` / ``dim3(32, 8)``."""
    b = la.block
    caller = facts.functions.get(la.caller)
    if b is None or caller is None:
        return None
    if b.kind == "name":
        defs = caller.defs().get(b.op, [])
        b = defs[-1].value if len(defs) == 1 else b
    if b.kind == "tuple" or (b.kind == "call" and b.op == "dim3"):
        return fl.fold(b.args[0], caller) if b.args else None
    v = fl.fold(b, caller)
    return v if isinstance(v, int) else None


@check("warp_row_scan")
def warp_row_scan(facts: Facts, lang: str) -> CheckResult:
    """A warp owns a row and scans it with shuffles: ``warp_per_row`` (a warp index from ``threadIdx.x / 32``
    combined with ``blockIdx``), or a 2-D block whose x extent is one warp (``dim3 block(32, 8)``), where
    ``threadIdx.y`` is the warp index and the row index is built from it and ``blockIdx``; the kernel scans with
    ``__shfl_up_sync``."""
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        if not any(c.name.startswith("__shfl_up") for c in fn.calls):
            continue
        if not any(la.kernel == fn.key and _block_x(fl, facts, la) == 32 for la in facts.launches):
            continue
        mem = fl.memory_ops(fn)
        for a in fn.assigns:
            names = a.value.names()
            if "threadIdx.y" in names and any(x.startswith("blockIdx") for x in names):
                row = a.targets[0]
                used = [c for _, c, _ in mem if c.expr.args and fl.refs(c.expr.args[0], fn, row)]
                if used:
                    return found(f"warp-wide block x: row {row} from blockIdx and threadIdx.y in {fn.name}, "
                                 "shuffle scan", [Span(a.line, a.end_line, "row = block * warps + threadIdx.y"),
                                                  span(used[0], "row access")], 0.8)
    res = warp_per_row(facts, lang)
    if res.passed and any(c.name.startswith("__shfl_up") for fn in code(facts, "cuda") for c in fn.calls):
        return res
    return missing("no warp-per-row scan (warp index from threadIdx.x / 32, or threadIdx.y in 32-wide blocks)",
                   confidence=0.8)
