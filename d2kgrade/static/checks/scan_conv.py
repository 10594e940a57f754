"""Checks for scans, recurrences and sliding-window (stencil) kernels: chained scans with a look-back over
published tile states, carried tile scans, first-order recurrences with on-the-fly decays, shifted tile loads and
register windows, sequence-boundary masks, and which input of ``kernel(...)`` a load reads.

Several checks take ``inputs``: positions (0-based) of ``kernel(...)``'s parameters. A kernel parameter receives
input ``i`` when a launch passes that input itself or a view of it (``x.contiguous()``, ``x.view(...)``,
``x.to(...)``, ``t.contiguous() for t in (u, z)``, ``x.data_ptr()`` in the C++ host code of ``load_inline``), not a
tensor computed from it (``F.softplus(delta)``, ``exp(dt * A)``, ``B.expand(...)``).
"""

from __future__ import annotations

from d2kgrade.static.checks.values import dependents
from d2kgrade.static.checkutil import as_list, code, matches, span
from d2kgrade.static.dataflow import EXPS, LOADS, STORES, Flow, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Assign, Call, Expr, Function, Loop, end_pos, pos
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

ATOMIC_READS = ("tl.atomic_*", "atomic*", "__atomic_*", "cuda::atomic*")
VIEWS = {".contiguous", ".view", ".reshape", ".to", ".float", ".flatten", ".t", ".transpose", ".permute",
         ".squeeze", ".unsqueeze", ".clone", ".type", ".half", ".bfloat16", ".int", ".long", ".cuda", ".detach",
         ".data_ptr", ".view_as", ".reshape_as"}
SCAN_CALLS = ["tl.cumsum", "tl.associative_scan", "tl.cumprod", "__shfl_up_sync", "__shfl_up", "*InclusiveScan",
              "*InclusiveSum", "*ExclusiveScan", "*ExclusiveSum", "cg::inclusive_scan", "cg::exclusive_scan"]
SIXTEEN_BIT = {"bf16", "fp16"}
ACTIVATIONS = {"tl.sigmoid", *EXPS}
LOG2E = 1.4426950408889634


# ------------------------------------------------------------------------------------------------ helpers


def _is_read(n: Expr, fn: Function) -> bool:
    """A node that reads global memory: a load, a descriptor load, or any atomic (which returns the old value)."""
    return n.kind == "call" and (n.op in LOADS or (n.op == ".load" and fn.kind == "jit")
                                 or matches(n.op, ATOMIC_READS))


def _loads(fl: Flow, fn: Function) -> list[tuple[Call, set[str]]]:
    return [(c, b) for kind, c, b in fl.memory_ops(fn) if kind == "load"]


def _address(c: Call) -> Expr | None:
    if c.name.startswith("."):
        return c.expr.recv
    return c.expr.kw("pointer", 0)


def _strip_view(e: Expr) -> Expr:
    for _ in range(8):
        if e.kind == "call" and e.op in VIEWS and e.recv is not None:
            e = e.recv
        elif e.kind == "call" and e.op in ("reinterpret_cast", "static_cast") and e.args:
            e = e.args[0]
        elif e.kind == "cast" and e.args:
            e = e.args[0]
        else:
            break
    return e


def _element(a: Assign) -> Expr | None:
    """``u, z = (t.contiguous() for t in (u, z))``: the iterated element this target takes, when the element
    expression is a view of the loop variable."""
    v = a.value
    if a.index is None or v.kind != "other" or v.op != "comprehension":
        return None
    seqs = [x for x in v.args if x.kind == "tuple"]
    body = v.args[0] if v.args else None
    if not seqs or body is None or _strip_view(body).kind != "name" or a.index >= len(seqs[-1].args):
        return None
    return seqs[-1].args[a.index]


def _python_callers(fl: Flow, fn: Function) -> list[tuple[Expr, Function]]:
    """Where a C++ host function of a ``load_inline`` source is called from Python (``mod.f(...)``)."""
    out = []
    for h in fl.facts.hosts("py"):
        for c in h.calls:
            if c.expr.recv is not None and c.name == "." + fn.name:
                out.append((c.expr, h))
    return out


def _is_input(fl: Flow, e: Expr, fn: Function, target: str, seen: set[int], depth: int = 0) -> bool:
    """Is host expression ``e`` (in ``fn``) the entry's input ``target`` or a view of it?"""
    if depth > 8:
        return False
    e = _strip_view(e)
    if e.kind != "name":
        return False
    entry = fl.facts.functions.get("kernel")
    defs = fl.defs(e.op, fn) if fn.lang == "py" else fn.defs().get(e.op, [])
    for a in defs:
        if id(a) in seen:
            continue
        seen.add(id(a))
        v = _element(a)
        if v is None:
            v = a.value if a.index is None else None
        if v is None:
            continue
        inner = _strip_view(v)
        if inner.kind == "name" and inner.op == e.op and e.op in fn.params:
            if _param_is_input(fl, fn, e.op, target, entry, seen, depth):
                return True
            continue
        if _is_input(fl, v, fn, target, seen, depth + 1):
            return True
    if e.op in fn.params and not any(_strip_view(_element(a) or a.value).op != e.op for a in defs):
        return _param_is_input(fl, fn, e.op, target, entry, seen, depth)
    return False


def _param_is_input(fl: Flow, fn: Function, param: str, target: str, entry: Function | None, seen: set[int],
                    depth: int) -> bool:
    if fn is entry:
        return param == target
    sites = list(fl.call_sites(fn)) if fn.lang == "py" else _python_callers(fl, fn)
    for call, caller in sites:
        arg = fl.bind_arg(call.args, call.kwargs, fn, param, caller)
        if arg is not None and _is_input(fl, arg, caller, target, seen, depth + 1):
            return True
    return False


def input_params(fl: Flow, kfn: Function, inputs: list[int]) -> set[str]:
    """Parameters of kernel ``kfn`` that receive one of the entry's ``inputs`` (by position) at some launch."""
    entry = fl.facts.functions.get("kernel")
    if entry is None:
        return set()
    names = [entry.params[i] for i in inputs if 0 <= i < len(entry.params)]
    key = f"scan_conv.inputs:{kfn.key}:{names}"

    def compute() -> set[str]:
        out: set[str] = set()
        for la in fl.launches_of(kfn):
            caller = fl.facts.functions.get(la.caller)
            if caller is None:
                continue
            for p in kfn.params:
                arg = fl.launch_arg(la, kfn, p)
                if arg is not None and any(_is_input(fl, arg, caller, t, set()) for t in names):
                    out.add(p)
        return out

    return fl.facts.memo(key, compute)


def _input_loads(fl: Flow, fn: Function, inputs: list[int]) -> list[Call]:
    params = input_params(fl, fn, inputs)
    return [c for c, b in _loads(fl, fn) if b & params]


def _polling_loops(fl: Flow, fn: Function) -> list[tuple[Loop, list[Expr]]]:
    """``while`` loops whose condition depends on memory read inside the loop, with those reads."""
    out = []
    for lp in fn.loops:
        if lp.kind != "while" or lp.stop is None:
            continue
        inside = [a for a in fn.assigns if lp.id in a.loops]
        reads = [n for a in inside for n in a.value.walk() if _is_read(n, fn)]
        reads += [c.expr for c in fn.calls if lp.id in c.loops and _is_read(c.expr, fn) and c.expr not in reads]
        if not reads:
            continue
        dep = dependents(inside, {t for a in inside if any(_is_read(n, fn) for n in a.value.walk())
                                  for t in a.targets})
        if lp.stop.names() & dep or any(_is_read(n, fn) for n in lp.stop.walk()):
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
            if any(_is_read(n, f) for n, f, _ in fl.walk(a.value, fn, within=lp, depth=6)):
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
        reads = {b for c, bs in _loads(fl, fn) for b in bs}
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


def _launch_values(fl: Flow, fn: Function) -> list[dict[str, object]]:
    """Bindings of ``fn``'s compile-time parameters and ``num_warps`` at each launch (one per autotune config when
    the kernel is autotuned): parameter -> int, or None when not a compile-time constant there."""
    out: list[dict[str, object]] = []
    launches = fl.launches_of(fn)
    configs = fn.autotune.configs if fn.autotune else [None]
    for la in launches:
        caller = fl.facts.functions.get(la.caller)
        for cfg in configs:
            b: dict[str, object] = {}
            for p in fn.params:
                if cfg is not None and p in cfg.kwargs:
                    b[p] = cfg.kwargs[p] if isinstance(cfg.kwargs[p], int) else None
                    continue
                e = fl.launch_arg(la, fn, p)
                v = fl.fold(e, caller) if e is not None and caller is not None else None
                b[p] = v if isinstance(v, int) and not isinstance(v, bool) else None
            if cfg is not None and cfg.num_warps is not None:
                nw = cfg.num_warps
            elif "num_warps" in la.kwargs:
                nw = fl.fold(la.kwargs["num_warps"], caller) if caller is not None else None
            else:
                nw = 4  # Triton's default
            b["num_warps"] = nw if isinstance(nw, int) else None
            out.append(b)
    return out


def _size(fl: Flow, fn: Function, e: Expr, binding: dict[str, object]) -> int | None:
    r = fl.root(e, fn)
    v = fl.fold(r, fn)
    if isinstance(v, int):
        return v
    if r.kind == "name" and r.op in binding:
        b = binding[r.op]
        return b if isinstance(b, int) else None
    return None


def _aranges(fl: Flow, e: Expr, fn: Function) -> list[Expr]:
    """The distinct ``tl.arange`` calls an address expression is built from."""
    out: dict[int, Expr] = {}
    for n, f, _ in fl.walk(e, fn, depth=6):
        if f is fn and n.kind == "call" and n.op == "tl.arange" and len(n.args) == 2:
            out[id(n)] = n
    return list(out.values())


def _tile_elems(fl: Flow, fn: Function, ptr: Expr) -> list[int | None]:
    """Elements of the tile an address covers, per launch binding (None: not a compile-time constant)."""
    ars = _aranges(fl, ptr, fn)
    if not ars:
        return [1]
    out: list[int | None] = []
    for b in _launch_values(fl, fn) or [{}]:
        total: int | None = 1
        for a in ars:
            s = _size(fl, fn, a.args[1], b)
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
        params = input_params(fl, fn, inputs) if inputs is not None else None
        scans = [c for c in fn.calls if c.name in ("tl.cumsum", "tl.associative_scan", "tl.cumprod")]
        if not scans:
            continue
        for c, bases in _loads(fl, fn):
            if params is not None and not bases & params:
                continue
            ptr = _address(c)
            if ptr is None or c.name.startswith("."):
                continue
            t = fl.taint(fn, None, {id(c.expr)})
            fed = [s for s in scans if any(fl.reads_through(a, fn, t, {id(c.expr)}, site_of(s))
                                           for a in s.expr.args[:1])]
            fed = [s for s in fed if fl.fold(s.expr.kw("axis", 1) or Expr("const", value=0), fn) in (0, None)
                   and len(_aranges(fl, ptr, fn)) <= 1]
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


def _per_thread(fl: Flow, fn: Function, ptr: Expr, inner: Expr) -> tuple[list[int], list[int]]:
    """(inner sizes, contiguous elements per thread) of an address's unit-stride arange, per known launch."""
    inners, per = [], []
    others = [a for a in _aranges(fl, ptr, fn) if a is not inner]
    for b in _launch_values(fl, fn) or [{}]:
        iv = _size(fl, fn, inner.args[1], b)
        if iv is None:
            continue
        inners.append(iv)
        rest = 1
        for o in others:
            ov = _size(fl, fn, o.args[1], b)
            rest = rest * ov if rest is not None and ov is not None else None
        nw = b.get("num_warps")
        if rest is not None and isinstance(nw, int):
            per.append(int(min(iv, iv * rest / (32 * nw))))
    return inners, per


@check("contiguous_input_access")
def contiguous_input_access(facts: Facts, lang: str, *, inputs: list[int], min_per_thread: int = 1,
                            min_inner: int = 1, stores: bool = False) -> CheckResult:
    """Every load of the given ``inputs`` of ``kernel(...)`` (positions) is a tile whose innermost index is a
    unit-stride ``tl.arange`` (``row * L + l0 + tl.arange(0, BLOCK_L)``), at least one such load exists, and at
    every launch whose sizes are compile-time constants the arange spans >= ``min_inner`` elements and each thread
    holds >= ``min_per_thread`` contiguous ones (``min(BLOCK, tile / (32 * num_warps))``). ``stores``: the
    stores of the kernels that load them satisfy the same. Per-element scalar loads, loads along a strided
    dimension, and loads of other tensors (weights, states) do not make it pass."""
    from d2kgrade.static.checks.memory import _unit_arange

    fl = flow(facts)
    ok: list[Call] = []
    for fn in code(facts, "triton"):
        calls = _input_loads(fl, fn, inputs)
        if not calls:
            continue
        if stores:
            calls += [c for kind, c, _ in fl.memory_ops(fn) if kind == "store"]
        for c in calls:
            ptr = _address(c)
            if c.name.startswith("."):
                ok.append(c)
                continue
            ar = _unit_arange(fl, ptr, fn) if ptr is not None else None
            if ar is None or len(ar.args) != 2:
                return missing(f"the access at line {c.line} of {fn.name} has no unit-stride tl.arange innermost "
                               "index", [span(c, "strided or scalar access")], 0.8)
            inners, per = _per_thread(fl, fn, ptr, ar)
            if inners and min(inners) < min_inner:
                return missing(f"the access at line {c.line} of {fn.name} spans {min(inners)} contiguous elements "
                               f"(< {min_inner})", [span(c, "narrow tile")], 0.8)
            if per and min(per) < min_per_thread:
                return missing(f"the access at line {c.line} of {fn.name} gives each thread {min(per)} contiguous "
                               f"elements (< {min_per_thread})", [span(c, "narrow per thread")], 0.8)
            ok.append(c)
    if ok:
        return found(f"{len(ok)} contiguous tile access(es) of the input(s)", [span(c, "contiguous") for c in ok[:4]],
                     0.8)
    return missing("no kernel loads the input(s)", confidence=0.8)


@check("vector_types_templated")
def vector_types_templated(facts: Facts, lang: str) -> CheckResult:
    """Reachable CUDA code moves data as vector types, also through a template parameter: a
    ``reinterpret_cast<const V*>`` whose ``V`` is a template parameter that a launch binds to a vector type
    (``row_scan<float, float4><<<...>>>``), besides the direct forms ``vector_access`` accepts."""
    from d2kgrade.static.checks.memory import VECTOR_DEFAULT, vector_access

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


# ------------------------------------------------------------------------------------------------ recurrences


@check("carried_exp_recurrence")
def carried_exp_recurrence(facts: Facts, lang: str) -> CheckResult:
    """A loop-carried state is updated through an exponential computed in the loop from data loaded in the loop
    (``h = exp(dt * A) * h + dt * B * u``, or a scan of ``(exp2(dt * A2), dBu)`` whose last state becomes the next
    carry): the decay is formed on the fly and the state stays in registers across the loop, instead of being read
    from a materialized ``exp(dt * A)`` tensor or from a workspace."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for lid, by_var in fl.carried(fn).items():
            loop = fn.loop(lid)
            for v, ups in by_var.items():
                for a in ups:
                    for n, f, env in fl.walk(a.value, fn, within=loop, depth=10):
                        if n.kind == "call" and matches(n.op, EXPS) and any(
                                _is_read(x, g) for arg in n.args for x, g, _ in fl.walk(arg, f, env, within=loop,
                                                                                       depth=6)):
                            return found(f"{v} is carried across the loop at line {loop.line} of {fn.name} and "
                                         f"updated through {n.op} of loaded data",
                                         [Span(a.line, a.end_line, f"{v} updated"), span(n, "decay")], 0.8)
    return missing("no loop-carried state updated through an exponential of data loaded in the loop",
                   confidence=0.75)


@check("chunk_loop_tiles")
def chunk_loop_tiles(facts: Facts, lang: str, *, inputs: list[int]) -> CheckResult:
    """A program walks the given ``inputs`` of ``kernel(...)`` in chunks: inside a loop with a step other than 1,
    a load of them addresses a tile whose unit-stride innermost ``tl.arange`` is offset by the loop variable
    (``l0 + tl.arange(0, BLOCK_L)``): several consecutive positions per iteration, held as one axis of a tile,
    instead of one element per step or the whole extent at once."""
    from d2kgrade.static.checks.memory import _unit_arange

    fl = flow(facts)
    for fn in code(facts, "triton"):
        for c in _input_loads(fl, fn, inputs):
            ptr = _address(c)
            if ptr is None or not c.loops:
                continue
            ar = _unit_arange(fl, ptr, fn)
            if ar is None:
                continue
            for lid in c.loops:
                lp = fn.loop(lid)
                if lp is None or lp.var is None or lp.kind not in ("range", "tl.range", "for", "while"):
                    continue
                step = fl.fold(lp.step, fn) if lp.step is not None else 1
                if step == 1 or (lp.step is None and lp.kind in ("range", "tl.range")):
                    continue
                if fl.refs(ptr, fn, lp.var):
                    return found(f"{fn.name} loads chunks of the input along the loop at line {lp.line}",
                                 [span(lp, "chunk loop"), span(c, "chunk tile")], 0.8)
    return missing("no loop that loads the input in chunks of consecutive positions", confidence=0.75)


def _row_names(fl: Flow, fn: Function) -> set[str]:
    """Names holding a program-owned range of rows: a ``tl.arange`` offset by the program id
    (``offs_d = pid * BLOCK_D + tl.arange(0, BLOCK_D)``)."""
    out = set()
    for a in fn.assigns:
        if any(n.kind == "call" and n.op == "tl.arange" for n in a.value.walk()) and fl.pid_derived(a.value, fn):
            out.update(a.targets)
    return out


@check("broadcast_shared_load")
def broadcast_shared_load(facts: Facts, lang: str) -> CheckResult:
    """One load serves several rows of the program: a value loaded without the program's row index (its address
    reads none of the program-id-offset aranges that index the rows) is broadcast along a new leading axis
    (``b[None, :]``) and combined element-wise with data loaded for those rows (``(dt * u)[:, None] * b[None, :]``):
    B/C shared by all channels of a program, not reloaded per channel."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        rows = _row_names(fl, fn)
        if not rows:
            continue
        loads = _loads(fl, fn)
        row_loads = {id(c.expr) for c, _ in loads if (p := _address(c)) is not None
                     and any(fl.refs(p, fn, r) for r in rows)}
        if not row_loads:
            continue
        exprs = [(a.value, a) for a in fn.assigns] + [(c.expr, c) for c in fn.calls if c.name in STORES]
        for e, where in exprs:
            for s in e.walk():
                if s.kind != "sub" or len(s.args) < 3 or s.args[1].kind != "const" or s.args[1].value is not None:
                    continue
                shared = [x for x, f, _ in fl.walk(s.args[0], fn, depth=4) if f is fn and _is_read(x, fn)
                          and id(x) not in row_loads]
                shared = [x for x in shared if (p := x.kw("pointer", 0)) is not None
                          and not any(fl.refs(p, fn, r) for r in rows)]
                if not shared:
                    continue
                partner = any(id(x) in row_loads for x, f, _ in fl.walk(e, fn, depth=6) if f is fn)
                if partner:
                    return found(f"{fn.name} broadcasts a load made without its row index over its rows",
                                 [Span(shared[0].line, shared[0].end_line, "shared load"),
                                  Span(where.line, where.end_line, "broadcast over rows")], 0.8)
    return missing("no load broadcast over the rows a program owns", confidence=0.75)


@check("input_call")
def input_call(facts: Facts, lang: str, *, input_index: int, name: str | list[str], same_loop: bool = False
               ) -> CheckResult:
    """A value loaded from input ``input_index`` of ``kernel(...)`` reaches a call named ``name`` element-wise
    in the same kernel (softplus's ``tl.log`` of ``delta + bias``). ``same_loop``: the call sits in the loop nest of
    the load (computed once per loaded element, not again in an inner loop over states)."""
    fl = flow(facts)
    names = as_list(name)
    for fn in code(facts, lang):
        for c in _input_loads(fl, fn, [input_index]):
            t = fl.taint(fn, None, {id(c.expr)})
            for x in fn.calls:
                if not matches(x.name, names) or (same_loop and x.loops != c.loops):
                    continue
                if any(fl.reads_through(a, fn, t, {id(c.expr)}, site_of(x)) for a in x.expr.args):
                    return found(f"{x.name} of input {input_index} in {fn.name}", [span(c, "load"), span(x, x.name)],
                                 0.8)
    return missing(f"no {' / '.join(names)} of data loaded from input {input_index}"
                   + (" in the loop nest of its load" if same_loop else ""), confidence=0.75)


@check("store_combines_inputs")
def store_combines_inputs(facts: Facts, lang: str, *, inputs: list[int]) -> CheckResult:
    """One store of a kernel writes a value computed element-wise from loads of every listed input of
    ``kernel(...)`` (``y = (C.h + D * u) * silu(z)`` reads D, u and z): the epilogue is applied in the kernel, not
    by PyTorch or a second pass."""
    fl = flow(facts)
    best = ""
    for fn in code(facts, lang):
        per = {i: _input_loads(fl, fn, [i]) for i in inputs}
        if not all(per.values()):
            best = best or f"{fn.name} does not load input(s) {[i for i, v in per.items() if not v]}"
            continue
        for kind, st, _ in fl.memory_ops(fn):
            v = fl.stored_value(st) if kind == "store" else None
            if v is None:
                continue
            if all(any(fl.reads_through(v, fn, fl.taint(fn, None, {id(c.expr)}), {id(c.expr)}, site_of(st))
                       for c in per[i]) for i in inputs):
                return found(f"{fn.name} stores a value combining inputs {inputs}", span(st, "fused store"), 0.8)
        best = f"no store of {fn.name} combines inputs {inputs}"
    return missing(best or f"no kernel loads inputs {inputs}", confidence=0.75)


def _init_dtype(v: Expr) -> str | None:
    from d2kgrade.static.lower import dtype_of

    if v.kind == "call" and v.op in ("tl.zeros", "tl.full", "tl.zeros_like", "tl.full_like"):
        return dtype_of(v.kw("dtype", 1 if v.op == "tl.zeros" else 2))
    if v.kind == "cast":
        return v.op
    if v.kind == "const" and isinstance(v.value, float):
        return "fp32"
    if v.kind == "other" and v.op == "item-write" and len(v.args) == 2:
        return _init_dtype(v.args[1])
    return None


@check("fp32_carried_state")
def fp32_carried_state(facts: Facts, lang: str) -> CheckResult:
    """Loop-carried state that depends on loaded data (recurrence states and accumulators, whatever their update
    form) is created in fp32 (``tl.zeros(..., tl.float32)``, a float literal, a ``float`` declaration), at least one
    exists, and no value converted to a 16-bit type feeds anything but a store (scan operands, carried states and
    contractions stay fp32; only the output is rounded)."""
    fl = flow(facts)
    good: list[Span] = []
    for fn in code(facts, lang):
        store_exprs = {id(n) for c in fn.calls if c.name in STORES for n in c.expr.walk()}
        readers: dict[str, list[Assign]] = {}
        for a in fn.assigns:
            for nm in a.value.names():
                readers.setdefault(nm, []).append(a)
        for a in fn.assigns:
            for n in a.value.walk():
                if n.kind != "cast" or n.op not in SIXTEEN_BIT or id(n) in store_exprs:
                    continue
                uses = [r for t in a.targets for r in readers.get(t, []) if r is not a]
                calls = [c for c in fn.calls if c.name not in STORES and set(a.targets) & c.expr.names()
                         and not any(c.expr is n2 for n2 in a.value.walk())]
                if uses or [c for c in calls if c.name != "cast"]:
                    return missing(f"{', '.join(a.targets)} in {fn.name} is converted to {n.op} and used in the "
                                   f"computation", [Span(a.line, a.end_line, f"{n.op} intermediate")], 0.8)
        for lid, by_var in fl.carried(fn).items():
            loop = fn.loop(lid)
            for v, ups in by_var.items():
                if not any(_is_read(x, f) for u in ups for x, f, _ in fl.walk(u.value, fn, within=loop, depth=8)):
                    continue
                inits = [a for a in fn.defs().get(v, []) if lid not in a.loops and pos(a) < pos(ups[0])]
                for a in inits:
                    dt = _init_dtype(a.value)
                    if dt is not None and dt != "fp32" and not dt.startswith("int"):
                        return missing(f"carried {v} in {fn.name} starts as {dt}",
                                       [Span(a.line, a.end_line, "carried state init")], 0.8)
                    if dt == "fp32":
                        good.append(Span(a.line, a.end_line, f"{v}: fp32 carried state"))
    if good:
        return found(f"{len(good)} fp32 carried state(s), no 16-bit intermediates", good[:4], 0.8)
    return missing("no fp32 loop-carried state of loaded data", confidence=0.7)


EXP2_CALLS = {"tl.exp2", "libdevice.exp2", "exp2f", "exp2", "__exp2f", "fast_exp2", "tl.math.exp2"}


def _log2e_product(fl: Flow, e: Expr, fn: Function) -> bool:
    """Is ``e`` (this node only, names not followed) a product with log2(e) or a division by ln 2?"""
    import math

    for n in e.walk():
        if n.kind == "bin" and len(n.args) == 2:
            vals = [fl.fold(a, fn) for a in n.args]
            if n.op == "*" and any(isinstance(v, (int, float)) and abs(abs(v) - LOG2E) < 1e-3 for v in vals):
                return True
            if n.op == "/" and isinstance(vals[1], (int, float)) and abs(abs(vals[1]) - math.log(2.0)) < 1e-3:
                return True
    return False


@check("hoisted_log2e_exp2")
def hoisted_log2e_exp2(facts: Facts, lang: str, *, inputs: list[int] | None = None) -> CheckResult:
    """An ``exp2`` inside a loop takes a value scaled by log2(e) outside that loop: the scale is folded into a
    loaded operand once (``a2 = tl.load(A + ...) * LOG2E`` before the time loop; ``exp2(dt * a2)`` per element),
    so each exponential costs one multiply and one ``ex2``. ``inputs``: the scaled value must be loaded from those
    inputs of ``kernel(...)``. A log2(e) multiply in the exponential's own innermost loop does not count."""
    fl = flow(facts)
    n_exp2 = 0
    for fn in code(facts, lang):
        params = input_params(fl, fn, inputs) if inputs is not None else None
        scaled = []
        for a in fn.assigns:
            if not _log2e_product(fl, a.value, fn):
                continue
            reads = [x for x, f, _ in fl.walk(a.value, fn, depth=6) if f is fn and _is_read(x, fn)]
            if params is not None:
                reads = [x for x in reads if (p := x.kw("pointer", 0)) is not None and fl.bases(p, fn) & params]
            if reads:
                scaled.append(a)
        for c in fn.calls:
            if c.name not in EXP2_CALLS or not c.loops:
                continue
            n_exp2 += 1
            for a in scaled:
                if c.loops[-1] in a.loops or pos(a) > pos(c):
                    continue
                if any(fl.refs(arg, fn, t) for arg in c.expr.args for t in a.targets):
                    return found(f"{c.name} in {fn.name} takes {', '.join(a.targets)}, scaled by log2(e) outside "
                                 f"its loop", [Span(a.line, a.end_line, "log2(e) folded once"), span(c, "exp2")], 0.85)
    if n_exp2:
        return missing(f"{n_exp2} exp2 call(s) in loops, none on a loaded value pre-scaled by log2(e) outside the "
                       "loop", confidence=0.8)
    return missing("no exp2 inside a loop", confidence=0.85)


def _combine_fn(fl: Flow, call: Expr, fn: Function) -> Function | None:
    cf = call.kw("combine_fn", 2)
    if cf is None or cf.kind != "name":
        return None
    return fl.callee(cf.op, fn)


def _first_order(comb: Function) -> bool:
    """Does a 4-parameter combine return ``(a1 * a2, a2 * b1 + b2)`` (operands in any order)?"""
    if len(comb.params) != 4 or not comb.returns:
        return False
    a1, b1, a2, b2 = comb.params
    r = comb.returns[-1]
    if r.kind != "tuple" or len(r.args) != 2:
        return False
    first, second = r.args

    def product_of(e: Expr, x: str, y: str) -> bool:
        return e.kind == "bin" and e.op == "*" and len(e.args) == 2 and {a.op for a in e.args
                                                                         if a.kind == "name"} == {x, y}

    if not product_of(first, a1, a2):
        return False
    if second.kind != "bin" or second.op != "+" or len(second.args) != 2:
        return False
    x, y = second.args
    return (product_of(x, a2, b1) and y.kind == "name" and y.op == b2) or (
        product_of(y, a2, b1) and x.kind == "name" and x.op == b2)


@check("first_order_scan")
def first_order_scan(facts: Facts, lang: str) -> CheckResult:
    """A linear recurrence evaluated as a parallel scan with a carry: ``tl.associative_scan`` over a pair of tiles
    with a combine that returns ``(a1 * a2, a2 * b1 + b2)`` (in any operand order), inside a loop whose carried
    state is updated from the scan's result (the chunk's last state enters the next chunk). CUDA: a block scan
    (``cub::BlockScan``) inside such a loop. A wrong operator (``b1 + b2``) or a scan that restarts from zero at
    every chunk does not count."""
    fl = flow(facts)
    best = "no tl.associative_scan of a (decay, input) pair"
    for fn in code(facts, lang):
        for c in fn.calls:
            is_cub = matches(c.name, ("cub::BlockScan*", "BlockScan*", "*InclusiveScan")) and fn.lang == "cuda"
            if c.name != "tl.associative_scan" and not is_cub:
                continue
            if not is_cub:
                comb = _combine_fn(fl, c.expr, fn)
                if comb is None or not _first_order(comb):
                    best = f"the scan at line {c.line} of {fn.name} does not combine with (a1*a2, a2*b1 + b2)"
                    continue
            for lid in c.loops:
                loop = fn.loop(lid)
                for v, ups in fl.carried(fn).get(lid, {}).items():
                    if any(n is c.expr for u in ups for n, _, _ in fl.walk(u.value, fn, within=loop, depth=10)):
                        return found(f"first-order scan in {fn.name}, its last state carried in {v}",
                                     [span(c, "scan"), Span(ups[0].line, ups[0].end_line, "carry")], 0.85)
            best = f"the scan at line {c.line} of {fn.name} feeds no state carried to the next chunk"
    return missing(best, confidence=0.8)


# ------------------------------------------------------------------------------------------------ stencils


def _gathered(fl: Flow, ptr: Expr, fn: Function) -> bool:
    """Does an address depend on a value read from memory (directly or through a loop that starts at one)?"""
    return any(_is_read(n, f) for n, f, _ in fl.walk(ptr, fn, depth=8) if f is fn)


def _static_trip(fl: Flow, fn: Function, lp: Loop) -> bool:
    """A loop with a compile-time trip count (``tl.static_range(W)``, ``range(W)`` with ``W: tl.constexpr``)."""
    if lp.kind == "tl.static_range" or lp.unroll:
        return True
    if lp.kind in ("range", "tl.range") and lp.stop is not None:
        return all(fl.is_constexpr(e, fn) for e in (lp.start, lp.stop, lp.step) if e is not None)
    return False


@check("shifted_tile_loads")
def shifted_tile_loads(facts: Facts, lang: str, *, min_rank: int = 2, inputs: list[int] | None = None
                       ) -> CheckResult:
    """One program forms several taps from shifted loads of one tile: a pointer (of ``inputs`` when given) is loaded
    as a tile of rank >= ``min_rank`` (``src[:, None] * D + offs_d[None, :]``) at two or more load sites, or at one
    site inside a loop with a compile-time trip count whose variable shifts the address (``for j in
    tl.static_range(W)``). The overlapping rows of the shifted tiles hit L1, so the halo is read from HBM once."""
    from d2kgrade.static.checks.tiling import _arange_dims

    fl = flow(facts)
    best = 0
    for fn in code(facts, "triton"):
        params = input_params(fl, fn, inputs) if inputs is not None else None
        by_base: dict[str, list[Call]] = {}
        for c, bases in _loads(fl, fn):
            ptr = _address(c)
            if ptr is None or c.name.startswith(".") or (params is not None and not bases & params):
                continue
            r = _arange_dims(fl, ptr, fn)
            best = max(best, r)
            if r < min_rank:
                continue
            for b in bases:
                by_base.setdefault(b, []).append(c)
            for lid in c.loops:
                lp = fn.loop(lid)
                if lp is not None and lp.var and _static_trip(fl, fn, lp) and fl.refs(ptr, fn, lp.var):
                    return found(f"{fn.name} loads {', '.join(sorted(bases))} as shifted {r}-D tiles in the tap "
                                 f"loop at line {lp.line}", [span(lp, "tap loop"), span(c, "shifted tile")], 0.8)
        for b, cs in by_base.items():
            if len(cs) >= 2:
                return found(f"{fn.name} loads {b} as {len(cs)} shifted tiles",
                             [span(c, "shifted tile") for c in cs[:4]], 0.8)
    return missing(f"no pointer loaded as shifted tiles of rank >= {min_rank} (largest tile rank: {best})",
                   confidence=0.75)


@check("register_shift_window")
def register_shift_window(facts: Facts, lang: str, *, min_taps: int = 2) -> CheckResult:
    """A walk over positions keeps the previous inputs in registers: inside a loop, at least ``min_taps`` variables
    defined before it form a shift chain (``x_m3 = x_m2; x_m2 = x_m1; x_m1 = x_t``) that ends in a value loaded in
    that loop, or a local array defined before it is shifted (``win[k] = win[k - 1]``) and refilled from a load
    (``win[0] = x_t``); each input is loaded once and the earlier ones are reused from registers."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for lp in fn.loops:
            inside = [a for a in fn.assigns if lp.id in a.loops and len(a.targets) == 1]
            assigned = {a.targets[0] for a in inside}
            copies = {a.targets[0]: a.value.op for a in inside if a.value.kind == "name" and a.value.op in assigned}
            loaded = {a.targets[0] for a in inside if any(_is_read(n, f) for n, f, _ in
                                                          fl.walk(a.value, fn, within=lp, depth=3))}
            before = {t for t in assigned if any(lp.id not in d.loops and pos(d) < pos(lp)
                                                 for d in fn.defs().get(t, []))}
            for start in copies:
                chain, v = [], start
                while v in copies and v not in chain and len(chain) < 16:
                    chain.append(v)
                    v = copies[v]
                regs = [x for x in chain if x in before]
                if v in loaded and len(regs) >= min_taps:
                    return found(f"{fn.name} shifts {' <- '.join(chain + [v])} in the loop at line {lp.line}",
                                 span(lp, "register window"), 0.8)
            # a local array used as the window: win[k] = win[k - 1] (in an inner loop) and win[0] = x_t
            writes = [a for a in inside if a.value.kind == "other" and a.value.op == "item-write"
                      and len(a.value.args) == 2]
            for a in writes:
                arr = a.targets[0]
                if arr not in before or not any(n.kind == "sub" and arr in n.names() for n in a.value.args[1].walk()):
                    continue
                refill = [b for b in writes if b is not a and b.targets[0] == arr and any(
                    _is_read(n, f) for n, f, _ in fl.walk(b.value.args[1], fn, within=lp, depth=4))]
                if refill:
                    return found(f"{fn.name} shifts the register array {arr} in the loop at line {lp.line} and "
                                 f"refills it from a load", [Span(a.line, a.end_line, "shift"),
                                                             Span(refill[0].line, refill[0].end_line, "refill")], 0.8)
    return missing(f"no chain of >= {min_taps} registers shifted through a loop and fed by a load", confidence=0.75)


def _fp32_origin(fl: Flow, e: Expr, fn: Function) -> bool:
    """Is ``e`` computed in fp32: some value it is built from is converted to (or created as) fp32, and no 16-bit
    accumulator or conversion sits on the way?"""
    fp32 = False
    for n, f, _ in fl.walk(e, fn, depth=8):
        if n.kind == "cast":
            if n.op in SIXTEEN_BIT:
                return False
            fp32 = fp32 or n.op == "fp32"
        dt = _init_dtype(n) if n.kind == "call" else None
        if dt in SIXTEEN_BIT:
            return False
        fp32 = fp32 or dt == "fp32"
    return fp32


@check("fused_activation")
def fused_activation(facts: Facts, lang: str, *, inputs: list[int] | None = None, min_sources: int = 2,
                     fp32: bool = True, calls: list[str] | None = None) -> CheckResult:
    """One kernel that stores applies an activation (``tl.sigmoid`` or an exponential; ``calls`` to choose) to a
    value computed from loaded data: with ``inputs`` (positions in ``kernel(...)``), from loads of every one of
    them (input, weights, bias: any value path, including a tap picked out of a weight tile); otherwise combined
    element-wise from loads of at least ``min_sources`` different pointers. The bias, the FMA chain and the
    activation are then fused. ``fp32``: that value is computed in fp32 (an operand converted to or created as
    fp32, no 16-bit accumulator on the way)."""
    fl = flow(facts)
    names = calls or sorted(ACTIVATIONS)
    best = ""
    for fn in code(facts, lang):
        if not any(kind == "store" for kind, _, _ in fl.memory_ops(fn)):
            continue
        loads = _loads(fl, fn)
        taints = [(c, b, fl.taint(fn, None, {id(c.expr)})) for c, b in loads if b] if inputs is None else []
        wanted = {i: input_params(fl, fn, [i]) for i in inputs} if inputs is not None else {}
        for c in fn.calls:
            if not matches(c.name, names) or not c.expr.args:
                continue
            arg = c.expr.args[0]
            if inputs is not None:
                bases = set()
                for n, f, _ in fl.walk(arg, fn, depth=10):
                    if f is fn and _is_read(n, fn) and (p := n.kw("pointer", 0)) is not None:
                        bases |= fl.bases(p, fn)
                lacking = [i for i, ps in wanted.items() if not ps & bases]
                if lacking:
                    best = best or f"the {c.name} at line {c.line} of {fn.name} does not read input(s) {lacking}"
                    continue
            else:
                bases = set()
                for lc, b, t in taints:
                    if fl.reads_through(arg, fn, t, {id(lc.expr)}, site_of(c)):
                        bases |= b
                if len(bases) < min_sources:
                    best = best or f"the {c.name} at line {c.line} of {fn.name} combines {len(bases)} input(s)"
                    continue
            if fp32 and not _fp32_origin(fl, arg, fn):
                best = f"the {c.name} at line {c.line} of {fn.name} acts on a value not computed in fp32"
                continue
            return found(f"{fn.name} applies {c.name} to a value computed from {', '.join(sorted(bases))}",
                         span(c, "fused activation"), 0.8)
    return missing(best or "no activation applied to a combination of loaded inputs", confidence=0.75)


@check("pid_tile_load")
def pid_tile_load(facts: Facts, lang: str, *, inputs: list[int]) -> CheckResult:
    """A program owns a block of the input along two axes: a load of ``inputs`` has a unit-stride innermost
    ``tl.arange`` offset by the program id (a column block), and its other index is program-id-derived and
    spans several rows: a broadcast ``rows[:, None]`` arange offset by the program id, or the variable of a loop
    that starts at a program-id-derived position (a run of rows). Neither comes from a value read from memory (one
    program per packed sequence, placed by ``cu_seqlens[pid]``, does not count)."""
    from d2kgrade.static.checks.memory import _unit_arange

    fl = flow(facts)
    best = "no load of the input"
    for fn in code(facts, "triton"):
        rows = _row_names(fl, fn)
        owners = {id(n) for a in fn.assigns if fl.pid_derived(a.value, fn) for n in a.value.walk()
                  if n.kind == "call" and n.op == "tl.arange"}
        for c in _input_loads(fl, fn, inputs):
            ptr = _address(c)
            if ptr is None or c.name.startswith("."):
                continue
            ar = _unit_arange(fl, ptr, fn)
            if ar is None or id(ar) not in owners:
                best = f"the load at line {c.line} of {fn.name} has no program-id-offset contiguous column block"
                continue
            if _gathered(fl, ptr, fn):
                best = f"the load at line {c.line} of {fn.name} is placed by a value read from memory"
                continue
            other = [a for a in _aranges(fl, ptr, fn) if a is not ar and id(a) in owners]
            run = [fn.loop(l) for l in c.loops]
            run = [lp for lp in run if lp is not None and lp.var and lp.start is not None
                   and fl.pid_derived(lp.start, fn) and fl.refs(ptr, fn, lp.var)]
            if other or run:
                what = "a program-id-offset row range" if other else f"the run of the loop at line {run[0].line}"
                return found(f"{fn.name} owns a 2-D block: columns offset by the program id and {what}",
                             span(c, "owned tile"), 0.8)
            best = f"the load at line {c.line} of {fn.name} covers no program-owned range of rows"
    return missing(best, confidence=0.75)


def _bound_loads(fl: Flow, e: Expr, fn: Function) -> list[Expr]:
    """Reads of memory ``e`` depends on whose address varies (not a fixed ``cu_seqlens[0]``)."""
    out = []
    for n, f, _ in fl.walk(e, fn, depth=8):
        if f is fn and _is_read(n, fn):
            ptr = n.kw("pointer", 0) if not n.op.startswith(".") else n.recv
            if ptr is not None and any(x.kind == "name" and not fl.is_constexpr(x, fn) and x.op not in fn.params
                                       for x in ptr.walk()):
                out.append(n)
    return out


@check("loaded_bound_mask")
def loaded_bound_mask(facts: Facts, lang: str, *, inputs: list[int]) -> CheckResult:
    """Tiles on the global axis with data-dependent boundaries: a load of ``inputs`` whose address does not depend
    on memory is masked by a comparison with a value read from memory at a position-dependent address (each token's
    sequence start from a binary search of ``cu_seqlens`` or a per-token array); or a loop over positions that
    starts at a program-id-derived index branches on such a value (clearing a register window at the next sequence
    start). A start read from a fixed address, a start passed per launch, or tiles placed by ``cu_seqlens[pid]`` do
    not count."""
    fl = flow(facts)
    for fn in code(facts, lang):
        params = input_params(fl, fn, inputs)
        xs = [(c, _address(c)) for c, b in _loads(fl, fn) if b & params]
        xs = [(c, p) for c, p in xs if p is not None and not _gathered(fl, p, fn)]
        if not xs:
            continue
        for c, _ in xs:
            mask = c.expr.kw("mask", 1) if c.name == "tl.load" else None
            if mask is None:
                continue
            for n, f, _ in fl.walk(mask, fn, depth=6):
                if f is fn and n.kind == "cmp" and n.op in ("<", "<=", ">", ">="):
                    hit = [b for side in n.args for b in _bound_loads(fl, side, fn)]
                    if hit:
                        return found(f"the load at line {c.line} of {fn.name} is masked against a boundary read "
                                     "from memory", [span(c, "masked tap"), Span(hit[0].line, hit[0].end_line,
                                                                                 "boundary")], 0.8)
        for lp in fn.loops:
            if lp.start is None or not fl.pid_derived(lp.start, fn) or _gathered(fl, lp.start, fn):
                continue
            if not any(lp.id in c.loops for c, _ in xs):
                continue
            for x in list(fn.assigns) + list(fn.calls):
                if lp.id not in x.loops:
                    continue
                for g in x.guards:
                    cond = g.args[0] if g.kind == "unary" and g.op == "not" and g.args else g
                    if cond.kind == "cmp" and _bound_loads(fl, cond, fn):
                        return found(f"the walk at line {lp.line} of {fn.name} branches on a boundary read from "
                                     "memory", [span(lp, "walk"), Span(cond.line, cond.end_line, "boundary")], 0.8)
    return missing("no input load masked (or walk reset) at a boundary read from memory", confidence=0.75)


@check("fast_sigmoid_fp32")
def fast_sigmoid_fp32(facts: Facts, lang: str) -> CheckResult:
    """A sigmoid with a fast exponential, in fp32: ``tl.sigmoid(v)`` or ``exp2`` of a value scaled by log2(e) (either
    sign: ``exp2(-v * LOG2E)``, ``exp2(v * NEG_LOG2E)``), whose argument is computed in fp32 (an operand converted to
    or created as fp32, no 16-bit value on the way)."""
    fl = flow(facts)
    best = "no tl.sigmoid or log2(e)-scaled exp2"
    for fn in code(facts, "triton"):
        for c in fn.calls:
            if not c.expr.args:
                continue
            arg = c.expr.args[0]
            if c.name in EXP2_CALLS:
                scaled = any(_log2e_product(fl, n, f) or (n.kind in ("name", "const") and isinstance(
                    v := fl.fold(n, f, env), (int, float)) and abs(abs(v) - LOG2E) < 1e-3)
                    for n, f, env in fl.walk(arg, fn, depth=6) if f is fn)
                if not scaled:
                    continue
            elif c.name != "tl.sigmoid":
                continue
            if _fp32_origin(fl, arg, fn):
                return found(f"{c.name} on an fp32 value in {fn.name}", span(c, "fast sigmoid"), 0.8)
            best = f"the {c.name} at line {c.line} of {fn.name} acts on a value not computed in fp32"
    return missing(best, confidence=0.75)
