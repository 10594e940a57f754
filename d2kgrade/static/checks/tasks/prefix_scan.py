"""Static checks of task ``prefix_scan``: the ones only its rubric (``rubrics/prefix_scan.yaml``) uses.

- ``carried_tile_scan``
- ``decoupled_lookback``
- ``dynamic_work_id``
- ``packed_state_publish``
- ``scan_tile_elements``
- ``vector_lookback``
- ``vector_types_templated``
"""

from __future__ import annotations

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


def _polling_loops(fl: Flow, fn: Function) -> list[tuple[Loop, list[Expr]]]:
    """``while`` loops whose condition depends on memory read inside the loop, with those reads."""
    out = []
    for lp in fn.loops:
        if lp.kind != "while" or lp.stop is None:
            continue
        inside = [a for a in fn.assigns if lp.id in a.loops]
        reads = [n for a in inside for n in a.value.walk() if is_read(n, fn)]
        reads += [c.expr for c in fn.calls if lp.id in c.loops and is_read(c.expr, fn) and c.expr not in reads]
        if not reads:
            continue
        dep = dependents(inside, {t for a in inside if any(is_read(n, fn) for n in a.value.walk())
                                  for t in a.targets})
        if lp.stop.names() & dep or any(is_read(n, fn) for n in lp.stop.walk()):
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
    """A look-back inspects a window of predecessors per step: a polling loop (see ``decoupled_lookback``) reads
    a vector of states (the read address holds a ``tl.arange``) or, in CUDA, votes or reduces across the warp
    inside the loop (``__ballot_sync``, ``__reduce_*_sync``, shuffles)."""
    fl = flow(facts)
    loops = 0
    for fn in code(facts, lang):
        for lp, reads in _polling_loops(fl, fn):
            loops += 1
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
        return missing(f"{loops} polling loop(s), each reading one scalar state per step", confidence=0.8)
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
    ``scan_with_carry``: one block walking its row with the running total in a register."""
    fl = flow(facts)
    for fn in code(facts, lang):
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
    (``row_scan<float, float4><<<...>>>``), besides the direct forms ``vector_access`` accepts."""

    direct = vector_access(facts, lang)
    if direct.passed:
        return direct
    want = set(VECTOR_DEFAULT)
    for t in facts.reachable_tokens("reinterpret"):
        fn = facts.functions.get(t.func)
        if fn is None or t.text not in fn.constexprs:
            continue
        for la in facts.launches:
            if la.kernel == fn.key and la.template and any(x.strip() in want for x in la.template.split(",")):
                return found(f"vector accesses through template parameter {t.text} ({la.template})",
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
