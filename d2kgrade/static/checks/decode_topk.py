"""Checks for split-KV decode attention (contiguous and paged caches) and radix top-k selection: split loops with an
online softmax, split counts from the SM count, work lists, page-table gathers, direct-or-partial stores, widened
indices, pipelined gathers, digit histograms that drive a selection, compaction buffers and packed sort words."""

from __future__ import annotations

from d2kgrade.static.checks.reductions import _is_max_update, _rescale
from d2kgrade.static.checks.tiling import SM_SOURCES, _param_values
from d2kgrade.static.checks.values import ATOMICS
from d2kgrade.static.checkutil import code, deciding_condition, is_persistent, matches, span
from d2kgrade.static.dataflow import LOADS, Flow, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.patterns.roles import launch_tensors
from d2kgrade.static.patterns.sorts import sort_sites
from d2kgrade.static.ir import Call, Expr, Function, Loop
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

SCANS = ("tl.cumsum", "tl.associative_scan")
SORTS = ("tl.sort", "tl.topk")
LOW_PRECISION = ("bf16", "fp16", "fp8")


# ---------------------------------------------------------------------------------------------------- helpers


def _is_load(n: Expr, fn: Function) -> bool:
    """A read of global memory (``tl.load``, a CUDA pointer read, a descriptor ``.load``)."""
    return n.kind == "call" and ((n.op in LOADS and n.op != "tl.atomic_add") or (n.op == ".load" and fn.kind == "jit"))


def _address(c: Call | Expr) -> Expr | None:
    e = c.expr if isinstance(c, Call) else c
    if e.op.startswith("."):
        return e.recv
    return e.kw("pointer", 0)


def _loads(fl: Flow, fn: Function) -> list[tuple[Call, set[str]]]:
    return [(c, b) for kind, c, b in fl.memory_ops(fn) if kind == "load"]


def _reaches(fl: Flow, e: Expr, fn: Function, pred, depth: int = 6) -> Expr | None:  # noqa: ANN001
    """The first node reached from ``e`` (through definitions and helper returns) that satisfies ``pred``."""
    for n, f, _ in fl.walk(e, fn, depth=depth):
        if pred(n, f):
            return n
    return None


def _value_nodes(e: Expr, fn: Function, depth: int = 4, within: Loop | None = None,
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
        if opaque_loads and _is_load(x, fn):
            continue
        stack.extend((a, d) for a in x.args)
        if x.kwargs:
            stack.extend((v, d) for v in x.kwargs.values())
        if x.recv is not None:
            stack.append((x.recv, d))
    return out


def _loads_in(fl: Flow, e: Expr, fn: Function, depth: int = 4) -> list[Expr]:
    """Load expressions ``e``'s value comes from."""
    return [n for n, f, _ in fl.walk(e, fn, depth=depth) if _is_load(n, f)]


def _has_arange(fl: Flow, e: Expr, fn: Function, depth: int = 4) -> bool:
    return _reaches(fl, e, fn, lambda n, f: n.kind == "call" and n.op == "tl.arange", depth) is not None


def _online(fl: Flow, fn: Function, lp: Loop) -> tuple[str, str] | None:
    """(running max, rescaled sum) carried by ``lp``: an online softmax in that loop."""
    by_var = fl.carried(fn).get(lp.id, {})
    for m, ups in by_var.items():
        if not any(_is_max_update(fl, fn, a, m, lp) for a in ups):
            continue
        for s, ups_s in by_var.items():
            if s != m and any(_rescale(fl, fn, a, s, m, lp) is not None for a in ups_s):
                return m, s
    return None


def _step_amount(lp: Loop) -> Expr | None:
    """What one iteration adds to the loop variable (``range(lo, hi, STEP)``; C ``t += STEP``)."""
    if lp.kind in ("range", "tl.range"):
        return lp.step
    st = lp.step
    if st is not None and st.kind == "bin" and st.op == "+" and len(st.args) == 2:
        a, b = st.args
        if a.kind == "name" and a.op == lp.var:
            return b
        if b.kind == "name" and b.op == lp.var:
            return a
    return None


def _sm_source(fl: Flow, e: Expr, fn: Function) -> Expr | None:
    """A host value ``e`` is computed from the SM count (followed through host variables, helper returns and, from
    a C++ host function, back to the Python call that passes it)."""
    for n, _, _ in fl.walk(e, fn, depth=10, params=True):
        if n.kind in ("call", "name", "attr") and (matches(n.op, SM_SOURCES) or n.op.rsplit(".", 1)[-1] in SM_SOURCES):
            return n
        if n.kind == "const" and isinstance(n.value, str) and n.value in SM_SOURCES:
            return n
    return None


def _grid_axes(grid: Expr | None) -> list[Expr]:
    if grid is None:
        return []
    if grid.kind == "tuple" or (grid.kind == "call" and grid.op == "dim3"):
        return list(grid.args)
    return [grid]


def _guards(fn: Function) -> list[Expr]:
    """The ``if`` conditions of a function's statements (a negated one by its condition), once each."""
    out: list[Expr] = []
    seen: set[int] = set()
    for x in list(fn.assigns) + list(fn.calls) + list(fn.loops):
        for g in x.guards:
            g = g.args[0] if g.kind == "unary" and g.op == "not" and g.args else g
            if id(g) not in seen:
                seen.add(id(g))
                out.append(g)
    return out


def _compaction_stores(fl: Flow, fn: Function) -> list[tuple[Call, set[str]]]:
    """Masked stores at compacted slots: the address takes a prefix sum of a mask (``base + tl.cumsum(sel) - 1``) or
    a slot claimed with an atomic counter."""
    out = []
    for kind, c, b in fl.memory_ops(fn):
        if kind != "store" or c.name != "tl.store" or c.expr.kw("mask", 2) is None:
            continue
        addr = _address(c)
        if addr is None:
            continue
        if _reaches(fl, addr, fn, lambda n, f: n.kind == "call" and (n.op in SCANS or n.op in ATOMICS), 4):
            out.append((c, b))
    return out


def _shared_names(facts: Facts, fn: Function) -> set[str]:
    base = fn.key.split("@")[0]
    return {s.name for s in facts.shared if s.func in (fn.key, base)}


def _cuda_compaction(facts: Facts, fl: Flow, fn: Function) -> Span | None:
    """CUDA: an on-chip buffer written at a slot returned by an atomic counter (``words[atomicAdd(&n, 1)] = w``)."""
    shared = _shared_names(facts, fn)
    for a in fn.assigns:
        v = a.value
        if not (v.kind == "other" and v.op == "item-write" and v.args and set(a.targets) & shared):
            continue
        target = v.args[0]
        idx = target.args[1:] if target.kind == "sub" else ()
        for i in idx:
            if _reaches(fl, i, fn, lambda n, f: n.kind == "call" and n.op in ATOMICS, 3):
                return Span(a.line, a.end_line, "slot from an atomic counter")
    return None


def _dot_operand_loads(fl: Flow, fn: Function, dot: Expr) -> list[Expr]:
    return _loads_in(fl, dot.args[0], fn, 4) if dot.args else []


def _lead_row_sizes(fl: Flow, ptr: Expr, fn: Function) -> list[Expr]:
    """Sizes of the aranges that index the leading (row) axis of a 2-D address (``rows[:, None]``)."""
    out = []
    for n, f, _ in fl.walk(ptr, fn, depth=4):
        if f is not fn or n.kind != "sub" or len(n.args) != 3:
            continue
        lead, rest = n.args[1], n.args[2]
        if lead.kind == "other" and lead.op == "slice" and rest.kind == "const" and rest.value is None:
            for x, xf, _ in fl.walk(n.args[0], fn, depth=3):
                if x.kind == "call" and x.op == "tl.arange" and len(x.args) == 2:
                    out.append(x.args[1])
    return out


# ---------------------------------------------------------------------------------------------------- decode


@check("split_online_loop")
def split_online_loop(facts: Facts, lang: str, *, min_step: int = 32) -> CheckResult:
    """A loop over one program's slice of the sequence (its bounds come from the program id; not a persistent
    loop) carries an online softmax (a running max and a sum rescaled by exp(m_old - m_new)) and advances at least
    ``min_step`` positions per iteration (a tile). A loop that moves a known smaller number of positions per
    iteration (one per warp) is not a tile loop; a step known only at run time counts as a tile."""
    fl = flow(facts)
    best = "no loop with program-id bounds carries an online softmax"
    for fn in code(facts, lang):
        for lp in fn.loops:
            if is_persistent(fl, fn, lp):
                continue
            if not any(e is not None and fl.pid_derived(e, fn) for e in (lp.start, lp.stop)):
                continue
            pair = _online(fl, fn, lp)
            if pair is None:
                continue
            amount = _step_amount(lp)
            if amount is not None:
                vals = [v for v in _param_values(fl, fn, amount) if v is not None]
                if vals and min(vals) < min_step:
                    best = (f"the split loop at line {lp.line} of {fn.name} advances {min(vals)} positions per "
                            f"iteration (< {min_step})")
                    continue
            return found(f"{fn.name}: the loop at line {lp.line} covers the program's slice with an online softmax "
                         f"({pair[0]}, {pair[1]})", span(lp, "split loop"), 0.85)
    return missing(best, confidence=0.8)


@check("split_count_from_sms")
def split_count_from_sms(facts: Facts, lang: str) -> CheckResult:
    """The number of splits is a launch-grid extent computed on the host from the SM count, and the one-split case
    skips the merge: a launch sits under a host condition on that count (the merge only when S > 1, a direct
    launch when S == 1), or a kernel parameter computed from it is tested by a branch of the kernel (a
    direct-write specialisation)."""
    fl = flow(facts)
    best = "no launch grid extent is computed from the SM count"
    for la in facts.launches:
        k = facts.functions.get(la.kernel)
        caller = facts.functions.get(la.caller)
        if k is None or caller is None:
            continue
        if lang == "triton" and k.lang != "py" or lang == "cuda" and k.lang != "cuda":
            continue
        src = None
        for ax in _grid_axes(la.grid):
            src = _sm_source(fl, ax, caller)
            if src is not None:
                break
        if src is None:
            continue
        # the host variables of the grid that carry the SM count (the split count S)
        counts = {n.op for ax in _grid_axes(la.grid) for n in _value_nodes(ax, caller, 3) if n.kind == "name"
                  and _sm_source(fl, n, caller) is not None}
        best = f"the grid of {k.name} follows the SM count, but nothing skips the merge for one split"
        for h in facts.hosts():
            for c in h.calls:
                if c.name != "launch" or h is not caller:
                    continue
                for g in c.guards:
                    if {n.op for n in _value_nodes(g, h, 2) if n.kind == "name"} & counts:
                        return found(f"split count from the SM count ({src.op}); a launch depends on it",
                                     [span(la, "split grid"), Span(c.line, c.end_line, "conditional launch")], 0.8)
        for la2 in facts.launches:
            k2 = facts.functions.get(la2.kernel)
            c2 = facts.functions.get(la2.caller)
            if k2 is None or c2 is None:
                continue
            for g in _guards(k2):
                names = {n.op for n in g.walk() if n.kind == "name"}
                if not names or not names <= set(k2.params) | set(facts.consts):
                    continue  # a condition on run-time data (an atomic's result...), not on the split count alone
                for p in sorted(names & set(k2.params)):
                    arg = fl.launch_arg(la2, k2, p)
                    if arg is not None and _sm_source(fl, arg, c2) is not None:
                        return found(f"split count from the SM count ({src.op}); {k2.name} branches on {p}, set "
                                     f"from it", [span(la, "split grid"), span(la2, f"{p} from the split count"),
                                                  Span(g.line, g.end_line, "branch")], 0.8)
    return missing(best, confidence=0.75)


@check("prescaled_lowp_dot_operand")
def prescaled_lowp_dot_operand(facts: Facts, lang: str) -> CheckResult:
    """An operand of ``tl.dot`` is loaded data multiplied by a scale and then rounded to 16 bits (``(q *
    qk_scale).to(tl.bfloat16)``): the scale is applied before the MMA in low precision. Usually negated."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        for c in fn.calls:
            if c.name != "tl.dot":
                continue
            for arg in c.expr.args[:2]:
                for n, f, _ in fl.walk(arg, fn, depth=3):
                    if n.kind != "cast" or n.op not in LOW_PRECISION or not n.args:
                        continue
                    inner = fl.root(n.args[0], f)
                    if inner.kind == "name":
                        defs = fl.defs(inner.op, f)
                        inner = defs[0].value if len(defs) == 1 else inner
                    if inner.kind != "bin" or inner.op != "*" or len(inner.args) != 2:
                        continue
                    sides = [bool(_loads_in(fl, x, f, 4)) for x in inner.args]
                    if sides[0] != sides[1]:
                        return found(f"{fn.name}: a scaled operand is rounded to {n.op} before tl.dot",
                                     [Span(n.line, n.end_line, "scaled, then rounded"), span(c, "tl.dot")], 0.8)
    return missing("no tl.dot operand is scaled and then rounded to 16 bits", confidence=0.75)


@check("small_m_dot_paths")
def small_m_dot_paths(facts: Facts, lang: str, *, max_rows: int = 32) -> CheckResult:
    """Two score paths in one kernel: a ``tl.dot`` whose first operand is a loaded block of at most ``max_rows``
    rows (a constant, or a size computed on the host such as ``max(16, next_power_of_2(G))``), and FMA dot products
    (a reduction of the product of a block loaded before a loop with a tile loaded in it) for a single row."""
    fl = flow(facts)
    best = "no tl.dot in reachable kernels"
    for fn in code(facts, "triton"):
        dots = [c for c in fn.calls if c.name == "tl.dot"]
        if not dots:
            continue
        small = None
        for d in dots:
            for ld in _dot_operand_loads(fl, fn, d.expr):
                ptr = ld.kw("pointer", 0)
                sizes = _lead_row_sizes(fl, ptr, fn) if ptr is not None else []
                if not sizes:
                    continue
                vals = [v for s in sizes for v in _param_values(fl, fn, s)]
                known = [v for v in vals if v is not None]
                if known and max(known) > max_rows:
                    best = f"the tl.dot at line {d.line} of {fn.name} takes {max(known)} rows"
                    continue
                small = d
                break
            if small is not None:
                break
        if small is None:
            continue
        fma = _fma_scores(fl, fn)
        if fma is None:
            best = f"{fn.name} pads its rows for tl.dot but has no FMA dot-product path"
            continue
        return found(f"{fn.name}: small-M tl.dot and FMA dot products", [span(small, "small-M tl.dot"),
                                                                       span(fma, "FMA dot products")], 0.8)
    return missing(best, confidence=0.75)


def _fma_scores(fl: Flow, fn: Function) -> Call | None:
    """A reduction inside a loop of the product of a value loaded before that loop with a tile loaded in it."""
    for c in fn.calls:
        if c.name not in ("tl.sum",) or not c.loops or not c.expr.args:
            continue
        arg = c.expr.args[0]
        while arg.kind in ("cast",) and arg.args:
            arg = arg.args[0]
        if arg.kind != "bin" or arg.op != "*" or len(arg.args) != 2:
            continue
        inner_loop = c.loops[-1]
        where = []
        for side in arg.args:
            lds = _loads_in(fl, side, fn, 3)
            where.append({inner_loop in (_call_of(fn, ld).loops if _call_of(fn, ld) else ()) for ld in lds})
        if (True in where[0] and False in where[1]) or (False in where[0] and True in where[1]):
            return c
    return None


def _call_of(fn: Function, e: Expr) -> Call | None:
    for c in fn.calls:
        if c.expr is e:
            return c
    return None


# ---------------------------------------------------------------------------------------------------- paged


@check("work_list_mapping")
def work_list_mapping(facts: Facts, lang: str) -> CheckResult:
    """Programs are mapped to work items through data: a scalar read from a work list at an address given by the
    program id (or a persistent loop's item index) addresses another scalar read (item -> sequence -> its
    length), or the item's sequence is counted from a prefix sum (``tl.cumsum``) of loaded lengths compared with
    the item index."""
    fl = flow(facts)
    for fn in code(facts, lang):
        item_vars = {lp.var for lp in fn.loops if lp.var and is_persistent(fl, fn, lp)}
        other_vars = {lp.var for lp in fn.loops if lp.var and lp.var not in item_vars}
        loads = _loads(fl, fn)

        def scalar_item_load(c: Call) -> bool:
            addr = _address(c)
            if addr is None or _has_arange(fl, addr, fn, 4):
                return False
            nodes = _value_nodes(addr, fn, 4)
            names = {n.op for n in nodes if n.kind == "name"}
            if names & other_vars:
                return False
            if any(_is_load(n, fn) and n is not c.expr for n in nodes):
                return False
            return fl.pid_derived(addr, fn) or bool(names & item_vars)

        firsts = [c for c, _ in loads if scalar_item_load(c)]
        for c1 in firsts:
            for c2, _ in loads:
                if c2 is c1:
                    continue
                addr = _address(c2)
                if addr is None or _has_arange(fl, addr, fn, 4):
                    continue
                if any(n is c1.expr for n in _value_nodes(addr, fn, 4)):
                    return found(f"{fn.name}: a work list read at the program's item ({c1.line}) selects what "
                                 f"line {c2.line} reads", [span(c1, "work list"), span(c2, "item's sequence")], 0.8)
        for c in fn.calls:
            if c.name != "tl.sum" or not c.expr.args:
                continue
            cmp = _reaches(fl, c.expr.args[0], fn, lambda n, f: n.kind == "cmp" and n.op in ("<=", "<", ">", ">="), 2)
            if cmp is None or len(cmp.args) != 2:
                continue
            sides = [(_reaches(fl, x, fn, lambda n, f: n.kind == "call" and n.op in SCANS, 4) is not None,
                      fl.pid_derived(x, fn) or bool({n.op for n, _, _ in fl.walk(x, fn, depth=4)
                                                     if n.kind == "name"} & item_vars)) for x in cmp.args]
            if (sides[0][0] and sides[1][1]) or (sides[1][0] and sides[0][1]):
                return found(f"{fn.name}: the item's sequence is counted from a prefix sum of loaded lengths",
                             Span(c.line, c.end_line, "item -> sequence"), 0.8)
    return missing("programs index sequences directly (no work list, no prefix-sum plan)", confidence=0.75)


@check("partials_merged")
def partials_merged(facts: Facts, lang: str) -> CheckResult:
    """Partial results are merged on the device: a later kernel reads the buffer an earlier one wrote, or the last
    program to arrive (an atomic ticket) does the merge."""
    from d2kgrade.static.checks.memory import producer_consumer_kernels
    from d2kgrade.static.checks.values import atomic_ticket

    a = producer_consumer_kernels(facts, lang)
    if a.passed:
        return a
    b = atomic_ticket(facts, lang)
    if b.passed:
        return b
    return missing("no kernel reads another kernel's partials and no atomic ticket merges them", confidence=0.8)


@check("vector_index_gather")
def vector_index_gather(facts: Facts, lang: str) -> CheckResult:
    """Indices are read as a vector and gather the data that the kernel computes with: a load whose address depends
    on values read by a vector load (``pages = tl.load(bt + offs // P)``; ``k = tl.load(k + pages[:, None] *
    stride + ...)``) feeds a ``tl.dot`` or a reduction; in CUDA, indices staged in a ``__shared__`` array address
    the loads. A gather whose result is only stored (a copy kernel), or indices read one scalar at a time, do not
    count."""
    fl = flow(facts)
    for fn in code(facts, lang):
        if fn.lang == "cuda":
            shared = _shared_names(facts, fn)
            staged = {t for a in fn.assigns if a.value.kind == "other" and a.value.op == "item-write"
                      for t in a.targets if t in shared and any(_is_load(n, fn) for n in a.value.walk())}
            for c, _ in _loads(fl, fn):
                addr = _address(c)
                if addr is None:
                    continue
                hit = _reaches(fl, addr, fn, lambda n, f: n.kind == "sub" and n.args and n.args[0].kind == "name"
                               and n.args[0].op in staged, 4)
                if hit is not None:
                    return found(f"{fn.name}: indices staged in shared memory address the load at line {c.line}",
                                 [span(c, "gathered load")], 0.8)
            continue
        loads = _loads(fl, fn)
        vec = [c for c, _ in loads if (a := _address(c)) is not None and _has_arange(fl, a, fn, 4)]
        vec_ids = {id(c.expr) for c in vec}
        gathered = []
        for c, _ in loads:
            addr = _address(c)
            if addr is None:
                continue
            if any(id(n) in vec_ids and n is not c.expr for n in _value_nodes(addr, fn, 4)):
                gathered.append(c)
        if not gathered:
            continue
        g_ids = {id(c.expr) for c in gathered}
        for c in fn.calls:
            if c.name != "tl.dot" and not fl.is_reduction(c.expr, fn):
                continue
            for arg in c.expr.args:
                if any(id(n) in g_ids for n, _, _ in fl.walk(arg, fn, depth=5)):
                    g = next(x for x in gathered if any(n is x.expr for n, _, _ in fl.walk(arg, fn, depth=5)))
                    return found(f"{fn.name}: a vector of indices gathers the tile that {c.name} consumes",
                                 [span(g, "gathered load"), span(c, c.name)], 0.8)
    return missing("no load gathered through a vector of loaded indices feeds the computation", confidence=0.75)


@check("direct_or_partial_store")
def direct_or_partial_store(facts: Facts, lang: str) -> CheckResult:
    """Under exclusive branches of a run-time condition on loaded data (a sequence's chunk count), one branch stores
    the result and the other stores partials that are merged (read by a later kernel, or by the same kernel after
    an atomic ticket): unsplit work skips the merge."""
    fl = flow(facts)
    launches = [la for la in facts.launches if la.kernel in facts.functions]
    for fn in code(facts, lang):
        stores = [(c, b) for kind, c, b in fl.memory_ops(fn) if kind == "store" and b]
        read_here = {x for c, b in _loads(fl, fn) for x in b}
        for c1, b1 in stores:
            for c2, b2 in stores:
                if b1 & b2:
                    continue
                cond = deciding_condition(c1.guards, c2.guards)
                if cond is None or not _loads_in(fl, cond, fn, 5):
                    continue
                merged = b2 & read_here or _read_later(fl, facts, launches, fn, b2)
                if merged:
                    return found(f"{fn.name}: a branch on loaded data stores either the result or partials "
                                 f"({', '.join(sorted(b2))}) that are merged",
                                 [span(c1, "direct store"), span(c2, "partial store")], 0.8)
    return missing("no kernel chooses between a direct store and merged partials on run-time data", confidence=0.75)


def _read_later(fl: Flow, facts: Facts, launches: list, fn: Function, params: set[str]) -> bool:  # noqa: ANN001
    for i, la in enumerate(launches):
        if la.kernel != fn.key:
            continue
        host: set[str] = set()
        for p in params:
            arg = fl.launch_arg(la, fn, p)
            if arg is not None:
                host |= {n.op for n in arg.walk() if n.kind == "name"}
        for la2 in launches[i + 1:]:
            k2 = facts.functions[la2.kernel]
            if k2 is fn:
                continue
            for _, _, b in [x for x in fl.memory_ops(k2) if x[0] == "load"]:
                for p in b:
                    e = fl.launch_arg(la2, k2, p)
                    if e is not None and {n.op for n in e.walk() if n.kind == "name"} & host:
                        return True
    return False


@check("bound_test_in_loop")
def bound_test_in_loop(facts: Facts, lang: str) -> CheckResult:
    """Inside the loop that carries an online softmax, a branch or select compares the loop position with a
    bound: a mask evaluated on every iteration. Usually negated (the mask belongs to the last tile only, or the
    loop bound itself stops at the length)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for lp in fn.loops:
            if lp.var is None or _online(fl, fn, lp) is None:
                continue
            inside = [x for x in list(fn.assigns) + list(fn.calls) if lp.id in x.loops]
            for x in inside:
                conds = [g for g in x.guards if g not in lp.guards]
                val = x.value if hasattr(x, "value") else x.expr
                conds += [n.args[0] for n in val.walk() if n.kind == "ternary" and n.args]
                conds += [n.args[0] for n in val.walk() if n.kind == "call" and n.op == "tl.where" and n.args]
                for g in conds:
                    if any(n.kind == "cmp" for n in g.walk()) and fl.refs(g, fn, lp.var, within=lp):
                        return found(f"{fn.name}: a bound test on the position inside the loop at line {lp.line}",
                                     Span(g.line, g.end_line, "per-iteration mask"), 0.75)
    return missing("no per-iteration bound test inside the online-softmax loop", confidence=0.7)


@check("widened_index_product")
def widened_index_product(facts: Facts, lang: str) -> CheckResult:
    """Every product of an index read from memory (a page id, a sequence id; in CUDA also one staged in shared
    memory) with a run-time stride, in the address of a load, is formed in 64 bits: the index is converted to
    int64 before the multiply (``pages.to(tl.int64) * stride``, ``(int64_t)page * page_stride``). A
    cast after an int32 product, or none, fails; so does a kernel with no such product."""
    fl = flow(facts)
    widened: list[Expr] = []
    for fn in code(facts, lang):
        shared = _shared_names(facts, fn) if fn.lang == "cuda" else set()

        def index(e: Expr, depth: int = 0, wide: bool = False) -> tuple[bool, bool]:
            """(is a value read from memory as such, converted to int64 on the way)."""
            if depth > 4:
                return False, False
            if _is_load(e, fn) or (e.kind == "sub" and e.args and e.args[0].kind == "name" and e.args[0].op in shared):
                return True, wide
            if e.kind == "cast" and e.args:
                return index(e.args[0], depth + 1, wide or e.op == "int64")
            if e.kind == "name":
                hits = [index(a.value, depth + 1, wide) for a in fn.defs().get(e.op, [])
                        if not (a.value.kind == "other" and a.value.op == "loop-var")]
                hits = [h for h in hits if h[0]]
                if hits:
                    return True, all(w for _, w in hits)
            return False, False

        for c, _ in _loads(fl, fn):
            addr = _address(c)
            if addr is None:
                continue
            for n in _value_nodes(addr, fn, 4, opaque_loads=True):
                if n.kind != "bin" or n.op != "*" or len(n.args) != 2:
                    continue
                for x, other in (n.args, n.args[::-1]):
                    is_index, wide = index(x)
                    if not is_index or fl.is_constexpr(other, fn) or fl.fold(other, fn) is not None:
                        continue  # a compile-time multiplier (a chunk size) is not a memory stride
                    if not wide:
                        return missing(f"{fn.name}: a loaded index multiplies a stride in 32 bits (line {n.line})",
                                       [Span(n.line, n.end_line, "int32 index * stride")], 0.8)
                    widened.append(n)
    if widened:
        return found("loaded indices are widened to 64 bits before they multiply a stride",
                     [Span(n.line, n.end_line, "int64 index * stride") for n in widened[:3]], 0.8)
    return missing("no load address multiplies a loaded index by a stride", confidence=0.7)


def _static_truth(g: Expr, fn: Function, depth: int = 0) -> bool | None:
    """Truth of a condition fixed at compile time: a flag bound to a constant (an inlined ``MASKED=False``)."""
    if depth > 6:
        return None
    if g.kind == "const":
        return bool(g.value) if g.value is not None or g.op == "None" else None
    if g.kind == "unary" and g.op == "not" and g.args:
        t = _static_truth(g.args[0], fn, depth + 1)
        return None if t is None else not t
    if g.kind == "name":
        defs = fn.defs().get(g.op, [])
        if len(defs) == 1:
            return _static_truth(defs[0].value, fn, depth + 1)
    return None


def _live(x: Call, fn: Function) -> bool:
    return not any(_static_truth(g, fn) is False for g in x.guards)


@check("tail_only_mask")
def tail_only_mask(facts: Facts, lang: str) -> CheckResult:
    """The loop that carries an online softmax loads its tiles without masks, and the bound is enforced only on a
    peeled tail: a masked load of the same data outside that loop. Branches on compile-time flags bound to
    constants (an inlined ``MASKED=False``) are resolved, so a flag that is always true masks every tile."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        loads = [(c, b) for c, b in _loads(fl, fn) if c.name == "tl.load" and b and _live(c, fn)]
        for lp in fn.loops:
            if _online(fl, fn, lp) is None:
                continue
            inside = [(c, b) for c, b in loads if lp.id in c.loops]
            if not inside or any(_masked_load(c) for c, _ in inside):
                continue
            bases = {x for _, b in inside for x in b}
            tails = [c for c, b in loads if lp.id not in c.loops and _masked_load(c) and b & bases]
            if tails:
                return found(f"{fn.name}: unmasked tiles in the loop at line {lp.line}, masked tail at line "
                             f"{tails[0].line}", [span(lp, "unmasked loop"), span(tails[0], "masked tail")], 0.8)
    return missing("no online-softmax loop with unmasked tiles and a masked tail", confidence=0.75)


def _masked_load(c: Call) -> bool:
    return c.expr.kw("mask", 1) is not None or c.expr.kw("boundary_check") is not None


@check("pipelined_gather_loop")
def pipelined_gather_loop(facts: Facts, lang: str, *, min_stages: int = 2) -> CheckResult:
    """A loop that is explicitly software-pipelined (``num_stages >= min_stages`` on ``tl.range``, or on the
    launch or autotune configs of its kernel) loads indices and gathers through them in the same iteration, so
    the pipeliner prefetches the page ids with the tiles."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        kernel_stages = []
        for la in fl.launches_of(fn):
            ns = la.kwargs.get("num_stages")
            caller = facts.functions.get(la.caller)
            if ns is not None and caller is not None:
                kernel_stages.append(fl.fold(ns, caller))
        if fn.autotune:
            kernel_stages += [c.num_stages for c in fn.autotune.configs if isinstance(c.num_stages, int)]
        for lp in fn.loops:
            ns = lp.options.get("num_stages")
            vals = [v for v in _param_values(fl, fn, ns) if v is not None] if ns is not None else []
            vals += [v for v in kernel_stages if isinstance(v, int)]
            if not vals or max(vals) < min_stages:
                continue
            inner = [c for c, _ in _loads(fl, fn) if lp.id in c.loops]
            ids = {id(c.expr) for c in inner}
            for c in inner:
                addr = _address(c)
                if addr is not None and any(id(n) in ids and n is not c.expr
                                            for n in _value_nodes(addr, fn, 4, within=lp)):
                    return found(f"{fn.name}: the {max(vals)}-stage loop at line {lp.line} loads indices and gathers "
                                 f"through them", [span(lp, "pipelined loop"), span(c, "gather")], 0.8)
    return missing(f"no loop with num_stages >= {min_stages} gathers through indices it loads", confidence=0.75)


# ---------------------------------------------------------------------------------------------------- top-k


@check("radix_digit_select")
def radix_digit_select(facts: Facts, lang: str, *, max_bins: int | None = None) -> CheckResult:
    """A digit histogram drives the selection: the result of ``tl.histogram`` (of at most ``max_bins`` bins) reaches
    a comparison with loaded keys (``digit(key) > t``, ``key >> s == prefix``), which narrows the keys to a bucket."""
    fl = flow(facts)
    best = "no tl.histogram in reachable kernels"
    for fn in code(facts, "triton"):
        hists = [c for c in fn.calls if c.name == "tl.histogram"]
        if max_bins is not None:
            ok = []
            for c in hists:
                nb = c.expr.kw("num_bins", 1)
                v = fl.fold(nb, fn) if nb is not None else None
                if v is None or v <= max_bins:
                    ok.append(c)
                else:
                    best = f"tl.histogram of {v} bins in {fn.name} (> {max_bins})"
            hists = ok
        if not hists:
            continue
        hist_ids = {id(c.expr) for c in hists}
        best = f"the histogram of {fn.name} does not narrow the keys"
        for e in [a.value for a in fn.assigns] + [c.expr for c in fn.calls]:
            for n in e.walk():
                if n.kind != "cmp" or len(n.args) != 2:
                    continue
                vals = [_value_nodes(s, fn, 10, opaque_loads=True) for s in n.args]
                h_side = [any(id(x) in hist_ids for x in v) for v in vals]
                k_side = [any(_is_load(x, fn) for x in v) for v in vals]
                if (h_side[0] and k_side[1] and not h_side[1]) or (h_side[1] and k_side[0] and not h_side[0]):
                    return found(f"{fn.name}: a digit histogram picks the bucket the keys are compared with",
                                 [span(hists[0], "histogram"), Span(n.line, n.end_line, "narrowing")], 0.8)
    return missing(best, confidence=0.75)


@check("cuda_smem_digit_histogram")
def cuda_smem_digit_histogram(facts: Facts, lang: str) -> CheckResult:
    """CUDA: a ``__shared__`` histogram is incremented with ``atomicAdd`` at a digit of a loaded key (``atomicAdd(&hist[
    (key >> s) & mask], 1)``)."""
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        shared = _shared_names(facts, fn)
        for c in fn.calls:
            if not matches(c.name, ("atomicAdd", "atomicAdd_block")) or not c.expr.args:
                continue
            tgt = c.expr.args[0]
            sub = next((n for n in tgt.walk() if n.kind == "sub" and n.args and n.args[0].kind == "name"
                        and n.args[0].op in shared), None)
            if sub is None:
                continue
            idx = sub.args[1:]  # hist[(key >> s) & mask], or hist[digit] with digit = (key >> s) & mask
            if any(any(n.kind == "bin" and n.op in (">>", "&") for n, _, _ in fl.walk(i, fn, depth=3)) for i in idx):
                return found(f"{fn.name}: shared-memory digit histogram", span(c, "atomicAdd on a shared bin"), 0.8)
    return missing("no shared-memory digit histogram", confidence=0.75)


@check("compact_then_sort")
def compact_then_sort(facts: Facts, lang: str) -> CheckResult:
    """Survivors are compacted into a buffer and only that buffer is sorted: a ``tl.sort``/``tl.topk`` reads a buffer
    that this kernel (or an earlier one) wrote at compacted slots (a prefix sum of the selection mask, or slots
    claimed with an atomic counter). CUDA: an on-chip buffer written at atomically claimed slots."""
    fl = flow(facts)
    for fn in code(facts, lang):
        if fn.lang == "cuda":
            sp = _cuda_compaction(facts, fl, fn)
            if sp is not None:
                return found(f"{fn.name}: survivors compacted into an on-chip buffer", sp, 0.7)
            continue
        comp = {x for _, b in _compaction_stores(fl, fn) for x in b}
        for c in fn.calls:
            if c.name not in SORTS or not c.expr.args:
                continue
            for ld in _loads_in(fl, c.expr.args[0], fn, 4):
                call = _call_of(fn, ld)
                bases = fl.bases(_address(ld), fn) if _address(ld) is not None else set()
                producers = [p for b in bases for p in fl.producers(fn, b)
                             if any(p[1] is s for s, _ in _compaction_stores(fl, p[0]))]
                if bases & comp or producers:
                    return found(f"{fn.name}: {c.name} sorts a compacted buffer", [span(c, c.name)] +
                                 ([span(call, "compacted buffer")] if call else []), 0.8)
    return missing("no sort of a compacted survivor buffer", confidence=0.75)


@check("candidate_buffer_passes")
def candidate_buffer_passes(facts: Facts, lang: str) -> CheckResult:
    """A pass compacts keys into a candidate buffer (stores at prefix-sum or atomic slots) and a later digit
    histogram reads that buffer (in the same kernel, or in a kernel launched after), so the later passes scan the
    candidates, not the row."""
    fl = flow(facts)
    for fn in code(facts, "cuda" if lang == "cuda" else lang):
        if fn.lang == "cuda":
            sp = _cuda_candidate_histogram(facts, fl, fn)
            if sp is not None:
                return found(f"{fn.name}: a digit histogram reads the compacted candidates", sp, 0.75)
            continue
        comp = {x for _, b in _compaction_stores(fl, fn) for x in b}
        for c in fn.calls:
            if c.name != "tl.histogram" or not c.expr.args:
                continue
            for ld in _loads_in(fl, c.expr.args[0], fn, 6):
                addr = _address(ld)
                if addr is None:
                    continue
                bases = fl.bases(addr, fn)
                producers = [p for b in bases for p in fl.producers(fn, b)
                             if any(p[1] is s for s, _ in _compaction_stores(fl, p[0]))]
                if bases & comp or producers:
                    return found(f"{fn.name}: a digit histogram reads the compacted candidates",
                                 [span(c, "histogram of candidates")], 0.8)
    return missing("no digit histogram over a compacted candidate buffer", confidence=0.75)


def _cuda_candidate_histogram(facts: Facts, fl: Flow, fn: Function) -> Span | None:
    """CUDA: keys appended at atomically claimed slots to a buffer (shared array or global pointer) that a later
    shared-memory histogram reads."""
    shared = _shared_names(facts, fn)
    comp: set[str] = set()
    for a in fn.assigns:
        v = a.value
        if v.kind == "other" and v.op == "item-write" and v.args and v.args[0].kind == "sub":
            if any(_reaches(fl, i, fn, lambda n, f: n.kind == "call" and n.op in ATOMICS, 3) is not None
                   for i in v.args[0].args[1:]):
                comp.update(a.targets)
    for kind, c, b in fl.memory_ops(fn):
        addr = _address(c)
        if kind == "store" and addr is not None and _reaches(fl, addr, fn, lambda n, f: n.kind == "call"
                                                               and n.op in ATOMICS, 3) is not None:
            comp |= b
    if not comp:
        return None
    for c in fn.calls:
        if not matches(c.name, ("atomicAdd", "atomicAdd_block")) or not c.expr.args:
            continue
        sub = next((n for n in c.expr.args[0].walk() if n.kind == "sub" and n.args and n.args[0].kind == "name"
                    and n.args[0].op in shared), None)
        if sub is None:
            continue
        for n in [x for i in sub.args[1:] for x in _value_nodes(i, fn, 4)]:
            if (n.kind == "sub" and n.args and n.args[0].kind == "name" and n.args[0].op in comp) or (
                    _is_load(n, fn) and fl.bases(_address(n), fn) & comp if _address(n) is not None else False):
                return span(c, "histogram of candidates")
    return None


_SIGN_CASTS = ("int32", "uint32", "int16", "uint16", "int64")


@check("order_preserving_key")
def order_preserving_key(facts: Facts, lang: str) -> CheckResult:
    """Float bits become integer keys in float order: the bits (an integer cast or ``__float_as_uint``) are flipped
    depending on the sign (``tl.where(b < 0, b ^ 0x7FFFFFFF, b)``, ``(b >> 31) ? ~b : b | 0x80000000``, ``b ^ ((b >>
    31) | INT_MIN)``)."""
    fl = flow(facts)

    def bits_vars(fn: Function) -> set[str]:
        out = set()
        for a in fn.assigns:
            v = a.value
            if (v.kind == "cast" and v.op in _SIGN_CASTS) or (v.kind == "call" and matches(
                    v.op, ("__float_as_uint", "__float_as_int", "__half_as_ushort", "__bfloat16_as_ushort"))):
                out.update(a.targets)
        return out

    for fn in code(facts, lang):
        bits = bits_vars(fn)
        if not bits:
            continue
        for e in [a.value for a in fn.assigns] + [c.expr for c in fn.calls]:
            for n in e.walk():
                if n.kind == "ternary" or (n.kind == "call" and n.op == "tl.where"):
                    if len(n.args) < 3:
                        continue
                    cond, a, b = n.args[:3]
                    names = cond.names() & bits
                    if not names:
                        continue
                    flips = [x for x in (a, b) if any((y.kind == "bin" and y.op == "^") or (y.kind == "unary"
                                                                                             and y.op == "~")
                                                      for y in x.walk()) and x.names() & names]
                    if flips:
                        return found(f"{fn.name}: sign-dependent bit flip of the float bits",
                                     Span(n.line, n.end_line, "order-preserving key"), 0.85)
                if n.kind == "bin" and n.op == "^" and len(n.args) == 2:
                    for x, y in (n.args, reversed(n.args)):
                        if x.kind == "name" and x.op in bits and any(
                                s.kind == "bin" and s.op == ">>" and s.args[0].kind == "name" and s.args[0].op == x.op
                                and fl.fold(s.args[1], fn) == 31 for s in y.walk()):
                            return found(f"{fn.name}: bits xor-ed with a sign mask",
                                         Span(n.line, n.end_line, "order-preserving key"), 0.85)
    return missing("no sign-dependent flip of float bits into integer keys", confidence=0.75)


@check("atomic_at_loaded_address")
def atomic_at_loaded_address(facts: Facts, lang: str) -> CheckResult:
    """An atomic add into global memory at an address that depends on loaded data (``tl.atomic_add(hist + digit(x),
    1)``): one global atomic per element. Usually negated."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for c in fn.calls:
            if c.name not in ATOMICS or not c.expr.args:
                continue
            ptr = c.expr.kw("pointer", 0)
            if ptr is None or not fl.bases(ptr, fn):
                continue
            if _loads_in(fl, ptr, fn, 4):
                return found(f"{fn.name}: atomic at an address computed from loaded data", span(c, "per-element "
                                                                                                    "atomic"), 0.8)
    return missing("no global atomic at a data-dependent address", confidence=0.75)


def _mask_cmps(fl: Flow, e: Expr, fn: Function, site, depth: int = 0) -> set[str]:  # noqa: ANN001
    """Comparison operators a boolean mask read at ``site`` is made of (through casts, names whose definitions
    reach the site, ``&``/``|``), not looking into the values compared."""
    if depth > 6:
        return set()
    if e.kind == "cmp":
        return {e.op}
    if e.kind == "cast" and e.args:
        return _mask_cmps(fl, e.args[0], fn, site, depth + 1)
    if e.kind == "bin" and e.op in ("&", "|"):
        return set().union(*(_mask_cmps(fl, a, fn, site, depth + 1) for a in e.args))
    if e.kind == "name":
        defs = fn.defs().get(e.op, [])
        live = [d for d in defs if site is None or fl.reaches(d, site, defs)]
        return set().union(set(), *(_mask_cmps(fl, d.value, fn, site_of(d), depth + 1) for d in live))
    return set()


def _scan_of(fl: Flow, e: Expr, fn: Function, site, depth: int = 0):  # noqa: ANN001, ANN202
    """The prefix-sum call a value read at ``site`` comes from (through ``+``/``-`` and names), with the site
    where that call's argument is read."""
    if depth > 4:
        return None, None
    if e.kind == "call" and e.op in SCANS:
        return e, site
    if e.kind == "bin" and e.op in ("+", "-"):
        for a in e.args:
            hit = _scan_of(fl, a, fn, site, depth + 1)
            if hit[0] is not None:
                return hit
    if e.kind == "name":
        defs = fn.defs().get(e.op, [])
        for d in defs:
            if site is None or fl.reaches(d, site, defs):
                hit = _scan_of(fl, d.value, fn, site_of(d), depth + 1)
                if hit[0] is not None:
                    return hit
    return None, None


@check("tie_rank_or_packed")
def tie_rank_or_packed(facts: Facts, lang: str) -> CheckResult:
    """Ties at the threshold are taken exactly: a prefix sum over an equality mask gives each tied key its rank, which
    is compared with the number still needed, a count computed from the data (``rank = tl.cumsum(eq); take = eq &
    (rank <= need)`` with ``need = k - count_above``); or the
    selection sorts packed (key << 32 | index) words built from the input itself, a total order."""
    fl = flow(facts)
    stored = {x for f in facts.kernels() for kind, _, b in fl.memory_ops(f) if kind == "store" for x in b}
    for fn in code(facts, "triton"):
        for e, at in [(a.value, site_of(a)) for a in fn.assigns] + [(c.expr, site_of(c)) for c in fn.calls]:
            for n in e.walk():
                if n.kind != "cmp" or n.op not in ("<=", "<") or len(n.args) != 2:
                    continue
                scan, scan_site = _scan_of(fl, n.args[0], fn, at)
                if scan is None or not scan.args:
                    continue
                counted = any(x.kind == "call" and (x.op == "tl.histogram" or fl.is_reduction(x, fn))
                              for x in _value_nodes(n.args[1], fn, 8, opaque_loads=True))
                if counted and "==" in _mask_cmps(fl, scan.args[0], fn, scan_site):
                    return found(f"{fn.name}: tie rank from a prefix sum of the equality mask",
                                 Span(n.line, n.end_line, "rank <= need"), 0.8)
        for site in sort_sites(fl, fn):  # tl.sort / tl.topk, or a hand-written compare-exchange network
            shifted = _reaches(fl, site.operand, fn, lambda x, f: x.kind == "bin" and x.op == "<<"
                               and len(x.args) == 2 and fl.fold(x.args[1], f) == 32, 8 if site.network else 4)
            if shifted is None:
                continue
            srcs = _loads_in(fl, site.operand, fn, 8 if site.network else 5)
            if srcs and all(not (fl.bases(_address(ld), fn) & stored) for ld in srcs if _address(ld) is not None):
                what = "a compare-exchange network" if site.network else site.node.op
                return found(f"{fn.name}: {what} orders packed (key, index) words of the input",
                             span(site.node, "total-order selection"), 0.8)
    return missing("no tie rank over an equality mask and no selection on packed words", confidence=0.75)


_ALLOCS = ("torch.empty", "torch.zeros", "torch.full", "torch.ones", "torch.empty_strided")


@check("partials_merge_kernel")
def partials_merge_kernel(facts: Facts, lang: str, *, coalesced: bool = True, fp32: bool = True) -> CheckResult:
    """A later kernel merges what an earlier kernel stored, cheaply: with ``fp32``, every handed-over buffer whose
    host allocation is visible is allocated as float32 (``torch.empty(..., dtype=torch.float32)``, or the default
    dtype); with ``coalesced``, every read of it in a Triton merge kernel has a unit-stride innermost ``tl.arange``
    (a program reads whole partial rows, not one strided element per program)."""
    from d2kgrade.static.checks.memory import _unit_arange
    from d2kgrade.static.lower import dtype_of

    fl = flow(facts)
    launches = [la for la in facts.launches if la.kernel in facts.functions]
    if lang != "any":
        want = "py" if lang == "triton" else "cuda"
        launches = [la for la in launches if facts.functions[la.kernel].lang == want]

    def host_names(la, k: Function, params: set[str]) -> dict[str, str]:  # noqa: ANN001
        return launch_tensors(fl, la, params)

    best = "no kernel reads a buffer that an earlier kernel stored"
    for i, la1 in enumerate(launches):
        k1 = facts.functions[la1.kernel]
        out1 = host_names(la1, k1, {b for kind, _, bs in fl.memory_ops(k1) if kind == "store" for b in bs})
        caller = facts.functions.get(la1.caller)
        for la2 in launches[i + 1:]:
            k2 = facts.functions[la2.kernel]
            if k2 is k1:
                continue
            in2 = host_names(la2, k2, {b for kind, _, bs in fl.memory_ops(k2) if kind == "load" for b in bs})
            shared = set(out1.values()) & set(in2.values())
            if not shared:
                continue
            bad = ""
            if fp32 and caller is not None and caller.lang == "py":
                for var in sorted(shared):
                    for d in fl.defs(var, caller):
                        v = d.value
                        if v.kind == "call" and v.op in _ALLOCS:
                            dt = dtype_of(v.kw("dtype"))
                            if dt is not None and dt != "fp32":
                                bad = f"{var} is allocated as {dt}"
            if not bad and coalesced and k2.lang == "py":
                params = {p for p, v in in2.items() if v in shared}
                for kind, c, bs in fl.memory_ops(k2):
                    if kind != "load" or not bs & params:
                        continue
                    ptr = _address(c)
                    scalar = ptr is not None and not any(
                        n.kind == "call" and n.op == "tl.arange" for n, _, _ in fl.walk(ptr, k2, depth=6))
                    if ptr is None or (not scalar and _unit_arange(fl, ptr, k2) is None):
                        # a tile read with lanes across rows scatters; one scalar per split (its lse) does not
                        bad = (f"{k2.name} reads {', '.join(sorted(bs & params))} without a unit-stride tile "
                               f"(line {c.line})")
                        break
            if bad:
                best = bad
                continue
            return found(f"{k1.name} writes {', '.join(sorted(shared))}; {k2.name} merges it",
                         [span(la1, f"launch of {k1.name}"), span(la2, f"launch of {k2.name}")], 0.8)
    return missing(best, confidence=0.75)


@check("kv_load_shared_by_heads")
def kv_load_shared_by_heads(facts: Facts, lang: str) -> CheckResult:
    """CUDA: one load of the KV cache serves every query head of the group: the group's query rows packed into a
    tensor-core MMA (mma/wmma/wgmma issued), or, without tensor cores, a global load whose value is read inside a
    loop over the group's heads (``for (g = 0; g < G; ++g)``, G computed on the host as a ratio of head counts,
    ``Hq / Hkv``), with no reload inside that loop."""
    from d2kgrade.static.checks.tensorcore import cuda_tensor_core

    mma = cuda_tensor_core(facts, lang)
    if mma.passed:
        return mma
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        ratio_params = {p for p in fn.params if p not in fn.pointer_params and any(
            n.kind == "bin" and n.op in ("/", "//") for src, caller in fl.param_sources(fn, p)
            for n, _, _ in fl.walk(src, caller, depth=4))}
        if not ratio_params:
            continue
        head_loops = [lp for lp in fn.loops if lp.stop is not None and fl.refs(lp.stop, fn, next(iter(ratio_params)))
                      or any(lp.stop is not None and fl.refs(lp.stop, fn, p) for p in ratio_params)]
        loads = [c for kind, c, _ in fl.memory_ops(fn) if kind == "load"]
        for lp in head_loops:
            inside = [a for a in fn.assigns if lp.id in a.loops]
            for c in loads:  # a load of the position loop around the head loop, read inside the head loop
                if lp.id in c.loops or lp.parent is None or lp.parent not in c.loops:
                    continue
                reads = [a for a in inside if any(n is c.expr for n, _, _ in fl.walk(a.value, fn, depth=4))]
                if reads:
                    return found(f"{fn.name} loads the cache once per position and uses it for each head of the group "
                                 f"(loop at line {lp.line})", [span(c, "one load"), span(lp, "loop over heads")], 0.75)
    return missing("no cache load reused across a loop over the query heads of a group", confidence=0.7)


@check("running_topk")
def running_topk(facts: Facts, lang: str) -> CheckResult:
    """A single pass with a running selection: a loop over the row's tiles carries a top-k buffer whose new value
    is ordered (a sort, or a hand-written compare-exchange network) from the old buffer and the tile just loaded,
    so the row is read once and only the k best survive each step."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        carried = fl.carried(fn)
        sites = sort_sites(fl, fn)
        if not sites:
            continue
        site_ids = {id(s.node): s for s in sites}
        for lp in fn.loops:
            loads = [c for kind, c, _ in fl.memory_ops(fn) if kind == "load" and lp.id in c.loops]
            for var, updates in carried.get(lp.id, {}).items():
                for a in updates:
                    hit = next((site_ids[id(n)] for n, _, _ in fl.walk(a.value, fn, depth=8, within=lp)
                                if id(n) in site_ids), None)
                    if hit is None:
                        continue
                    nodes = [n for n, _, _ in fl.walk(hit.operand, fn, depth=10, within=lp)]
                    reads_old = any(n.kind == "name" and n.op == var for n in nodes)
                    reads_tile = any(n is c.expr for n in nodes for c in loads)
                    if reads_old and reads_tile:
                        return found(f"{fn.name}: {var} keeps a running selection, re-ordered with each tile "
                                     f"(loop at line {lp.line})", [span(lp, "one pass"), span(hit.node, "merge")], 0.75)
    return missing("no loop carries a selection re-ordered with each loaded tile", confidence=0.7)
