"""Static checks of task ``paged_attention_decode``: the ones only its rubric (``rubrics/paged_attention_decode.yaml``)
uses.

- ``bound_test_in_loop``
- ``direct_or_partial_store``
- ``kv_shared_by_query_heads``
- ``partials_merged``
- ``pipelined_gather_loop``
- ``tail_only_mask``
- ``vector_index_gather``
- ``widened_index_product``
- ``work_list_mapping``
"""

from __future__ import annotations

from d2kgrade.static.checks.sweeps import producer_consumer_kernels
from d2kgrade.static.checks.values import atomic_ticket
from d2kgrade.static.checkutil import code, deciding_condition, is_persistent, span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function
from d2kgrade.static.patterns.access import (
    access_base,
    is_global_load,
    loads_feeding,
    reaches,
    shared_names,
    value_nodes,
)
from d2kgrade.static.patterns.config import param_values
from d2kgrade.static.patterns.names import SCANS
from d2kgrade.static.patterns.reductions import online
from d2kgrade.static.patterns.roles import entry_params, input_params_with_methods
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


def _loads(fl: Flow, fn: Function) -> list[tuple[Call, set[str]]]:
    return [(c, b) for kind, c, b in fl.memory_ops(fn) if kind == "load"]


def _has_arange(fl: Flow, e: Expr, fn: Function, depth: int = 4) -> bool:
    return reaches(fl, e, fn, lambda n, f: n.kind == "call" and n.op == "tl.arange", depth) is not None


@check("work_list_mapping")
def work_list_mapping(facts: Facts, lang: str) -> CheckResult:
    """Programs are mapped to work items through data: a scalar read from a work list at an address given by the
    program id (or a persistent loop's item index) addresses another scalar read (item -> sequence -> its
    length), or the item's sequence is counted from a prefix sum (``tl.cumsum``) of loaded lengths compared with
    the item index, or a grid axis picks a fixed-size token chunk (``start = blockIdx.z * PARTITION``) of a loop
    bounded by the loaded length (vLLM's partitions; programs past the length exit)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        item_vars = {lp.var for lp in fn.loops if lp.var and is_persistent(fl, fn, lp)}
        other_vars = {lp.var for lp in fn.loops if lp.var and lp.var not in item_vars}
        loads = _loads(fl, fn)

        def scalar_item_load(c: Call) -> bool:
            addr = access_base(c)
            if addr is None or _has_arange(fl, addr, fn, 4):
                return False
            nodes = value_nodes(addr, fn, 4)
            names = {n.op for n in nodes if n.kind == "name"}
            if names & other_vars:
                return False
            if any(is_global_load(n, fn) and n is not c.expr for n in nodes):
                return False
            return fl.pid_derived(addr, fn) or bool(names & item_vars)

        firsts = [c for c, _ in loads if scalar_item_load(c)]
        for c1 in firsts:
            for c2, _ in loads:
                if c2 is c1:
                    continue
                addr = access_base(c2)
                if addr is None or _has_arange(fl, addr, fn, 4):
                    continue
                if any(n is c1.expr for n in value_nodes(addr, fn, 4)):
                    return found(f"{fn.name}: a work list read at the program's item ({c1.line}) selects what "
                                 f"line {c2.line} reads", [span(c1, "work list"), span(c2, "item's sequence")], 0.8)
        for c in fn.calls:
            if c.name != "tl.sum" or not c.expr.args:
                continue
            cmp = reaches(fl, c.expr.args[0], fn, lambda n, f: n.kind == "cmp" and n.op in ("<=", "<", ">", ">="), 2)
            if cmp is None or len(cmp.args) != 2:
                continue
            sides = [(reaches(fl, x, fn, lambda n, f: n.kind == "call" and n.op in SCANS, 4) is not None,
                      fl.pid_derived(x, fn) or bool({n.op for n, _, _ in fl.walk(x, fn, depth=4)
                                                     if n.kind == "name"} & item_vars)) for x in cmp.args]
            if (sides[0][0] and sides[1][1]) or (sides[1][0] and sides[0][1]):
                return found(f"{fn.name}: the item's sequence is counted from a prefix sum of loaded lengths",
                             Span(c.line, c.end_line, "item -> sequence"), 0.8)
        lp = _token_chunk_loop(fl, fn)
        if lp is not None:
            return found(f"{fn.name}: a grid axis picks a fixed-size token chunk of the sequence (loop at line "
                         f"{lp.line} bounded by the loaded length)", span(lp, "chunk loop"), 0.7)
    return missing("programs index sequences directly (no work list, no prefix-sum plan)", confidence=0.75)


def _token_chunk_loop(fl: Flow, fn: Function):
    """A loop over a program's chunk of tokens whose start is a program-id index times a compile-time chunk size
    (``start = blockIdx.z * PARTITION``) and whose stop reads a loaded length (``min(ctx, start + PARTITION)``):
    fixed-size chunks, so a long sequence gets proportionally more programs (a fixed split count, ``split *
    cdiv(ctx, S)``, has a run-time chunk and does not count)."""

    def chunk_start(e: Expr, depth: int = 0) -> bool:
        if depth > 4:
            return False
        if e.kind == "cast" and e.args:  # const int start = ...: a declaration's conversion
            return chunk_start(e.args[0], depth + 1)
        if e.kind == "bin" and e.op == "*" and len(e.args) == 2:
            for a, b in (e.args, e.args[::-1]):
                if fl.pid_derived(a, fn) and (fl.fold(b, fn) is not None or fl.is_constexpr(b, fn)):
                    return True
        if e.kind == "bin" and e.op == "+":
            return any(chunk_start(x, depth + 1) for x in e.args)
        if e.kind == "name":
            defs = fn.defs().get(e.op, [])
            return bool(defs) and all(chunk_start(d.value, depth + 1) for d in defs)
        return False

    for lp in fn.loops:
        if lp.start is None or lp.stop is None or not chunk_start(lp.start):
            continue
        if any(is_global_load(n, fn) for n in value_nodes(lp.stop, fn, 5)):
            return lp
    return None


@check("partials_merged")
def partials_merged(facts: Facts, lang: str) -> CheckResult:
    """Partial results are merged on the device: a later kernel reads the buffer an earlier one wrote, or the last
    program to arrive (an atomic ticket) does the merge."""

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
            shared = shared_names(facts, fn)
            staged = {t for a in fn.assigns if a.value.kind == "other" and a.value.op == "item-write"
                      for t in a.targets if t in shared and any(is_global_load(n, fn) for n in a.value.walk())}
            for c, _ in _loads(fl, fn):
                addr = access_base(c)
                if addr is None:
                    continue
                hit = reaches(fl, addr, fn, lambda n, f: n.kind == "sub" and n.args and n.args[0].kind == "name"
                               and n.args[0].op in staged, 4)
                if hit is not None:
                    return found(f"{fn.name}: indices staged in shared memory address the load at line {c.line}",
                                 [span(c, "gathered load")], 0.8)
            continue
        loads = _loads(fl, fn)
        vec = [c for c, _ in loads if (a := access_base(c)) is not None and _has_arange(fl, a, fn, 4)]
        vec_ids = {id(c.expr) for c in vec}
        gathered = []
        for c, _ in loads:
            addr = access_base(c)
            if addr is None:
                continue
            if any(id(n) in vec_ids and n is not c.expr for n in value_nodes(addr, fn, 4)):
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
                if cond is None or not loads_feeding(fl, cond, fn, 5):
                    continue
                merged = b2 & read_here or _read_later(fl, facts, launches, fn, b2)
                if merged:
                    return found(f"{fn.name}: a branch on loaded data stores either the result or partials "
                                 f"({', '.join(sorted(b2))}) that are merged",
                                 [span(c1, "direct store"), span(c2, "partial store")], 0.8)
    return missing("no kernel chooses between a direct store and merged partials on run-time data", confidence=0.75)


def _read_later(fl: Flow, facts: Facts, launches: list, fn: Function, params: set[str]) -> bool:
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
            if lp.var is None or online(fl, fn, lp) is None:
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
def widened_index_product(facts: Facts, lang: str, *, inputs: list[int] | None = None) -> CheckResult:
    """Every product of an index read from memory (a page id, a sequence id; in CUDA also one staged in shared
    memory) with a run-time stride, in the address of a load, is formed in 64 bits: the index is converted to
    int64 before the multiply (``pages.to(tl.int64) * stride``, ``(int64_t)page * page_stride``). A
    cast after an int32 product, or none, fails; so does a kernel with no such product. ``inputs``: only loads of
    those inputs of ``kernel(...)`` (the K/V cache) are judged, not a block-table row ``seq * max_pages``."""
    fl = flow(facts)
    widened: list[Expr] = []
    for fn in code(facts, lang):
        shared = shared_names(facts, fn) if fn.lang == "cuda" else set()
        judged = set().union(*(_input_params(fl, facts, fn, i) for i in inputs)) if inputs else None

        def index(e: Expr, depth: int = 0, wide: bool = False) -> tuple[bool, bool]:
            """(is a value read from memory as such, converted to int64 on the way)."""
            if depth > 4:
                return False, False
            if is_global_load(e, fn) or (e.kind == "sub" and e.args and e.args[0].kind == "name"
                                         and e.args[0].op in shared):
                return True, wide
            if e.kind == "cast" and e.args:
                return index(e.args[0], depth + 1, wide or e.op == "int64")
            if e.kind == "sub" and len(e.args) >= 2 and all(i.kind == "const" and i.value is None or i.kind == "other"
                                                            for i in e.args[1:]):
                return index(e.args[0], depth + 1, wide)  # pages.to(tl.int64)[:, None]: a broadcast view
            if e.kind == "name":
                hits = [index(a.value, depth + 1, wide) for a in fn.defs().get(e.op, [])
                        if not (a.value.kind == "other" and a.value.op == "loop-var")]
                hits = [h for h in hits if h[0]]
                if hits:
                    return True, all(w for _, w in hits)
            return False, False

        for c, bases in _loads(fl, fn):
            addr = access_base(c)
            if addr is None or (judged is not None and not (bases & judged)):
                continue
            for n in value_nodes(addr, fn, 4, opaque_loads=True):
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
    peeled tail: a masked load of the same data outside that loop, or, inside it, under a uniform branch on the
    loop position (``if n0 + BLOCK_N <= hi:`` unmasked loads, ``else:`` masked ones). Branches on compile-time flags bound to
    constants (an inlined ``MASKED=False``) are resolved, so a flag that is always true masks every tile."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        loads = [(c, b) for c, b in _loads(fl, fn) if c.name == "tl.load" and b and _live(c, fn)]
        for lp in fn.loops:
            if online(fl, fn, lp) is None:
                continue
            inside = [(c, b) for c, b in loads if lp.id in c.loops]
            masked = [c for c, _ in inside if _masked_load(c)]
            if inside and masked and all(_tile_branch(fn, c, lp) for c in masked):
                plain = {x for c, b in inside if not _masked_load(c) for x in b}
                if plain & {x for c, b in inside if c in masked for x in b}:
                    return found(f"{fn.name}: the loop at line {lp.line} masks only the tile that reaches the bound "
                                 f"(a branch on the loop position at line {masked[0].line})",
                                 [span(lp, "loop"), span(masked[0], "masked last tile")], 0.75)
            if not inside or masked:
                continue
            bases = {x for _, b in inside for x in b}
            tails = [c for c, b in loads if lp.id not in c.loops and _masked_load(c) and b & bases]
            if tails:
                return found(f"{fn.name}: unmasked tiles in the loop at line {lp.line}, masked tail at line "
                             f"{tails[0].line}", [span(lp, "unmasked loop"), span(tails[0], "masked tail")], 0.8)
    return missing("no online-softmax loop with unmasked tiles and a masked tail", confidence=0.75)


def _tile_branch(fn: Function, c: Call, lp) -> bool:
    """Is call ``c`` under a branch, inside ``lp``, that reads the loop position (``if n0 + BLOCK_N > hi:``): a
    uniform per-tile condition, not a per-element mask?"""
    own = [g for g in c.guards if lp.var is not None and (lp.var in g.names() or any(
        lp.id in a.loops for n in g.names() for a in fn.defs().get(n, [])))]
    return bool(own)


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
            vals = [v for v in param_values(fl, fn, ns) if v is not None] if ns is not None else []
            vals += [v for v in kernel_stages if isinstance(v, int)]
            if not vals or max(vals) < min_stages:
                continue
            inner = [c for c, _ in _loads(fl, fn) if lp.id in c.loops]
            ids = {id(c.expr) for c in inner}
            for c in inner:
                addr = access_base(c)
                if addr is not None and any(id(n) in ids and n is not c.expr
                                            for n in value_nodes(addr, fn, 4, within=lp)):
                    return found(f"{fn.name}: the {max(vals)}-stage loop at line {lp.line} loads indices and gathers "
                                 f"through them", [span(lp, "pipelined loop"), span(c, "gather")], 0.8)
    return missing(f"no loop with num_stages >= {min_stages} gathers through indices it loads", confidence=0.75)


def _input_params(fl: Flow, facts: Facts, fn: Function, index: int) -> set[str]:
    return entry_params(fl, facts, fn, index) | set(input_params_with_methods(fl, facts, fn, index))


def _head_rows(fl: Flow, addr: Expr, fn: Function) -> Expr | None:
    """A broadcast row index of ``addr`` built from an ``arange`` and scaled by a non-zero stride (``(b * HQ +
    kvh * G + tl.arange(0, G_PAD))[:, None] * D``): several query rows per program. ``rows[:, None] * 0`` (one
    real row, the rest padding) does not count."""
    for n, f, _ in fl.walk(addr, fn, depth=6):
        if f is not fn or n.kind != "bin" or n.op != "*" or len(n.args) != 2:
            continue
        for x, k in (n.args, n.args[::-1]):
            if x.kind == "sub" and len(x.args) >= 3 and any(i.kind == "const" and i.value is None for i in x.args[1:]) \
                    and _has_arange(fl, x.args[0], fn) and fl.fold(k, fn) != 0:
                return n
    return None


@check("kv_shared_by_query_heads")
def kv_shared_by_query_heads(facts: Facts, lang: str) -> CheckResult:
    """One program serves the query heads of a KV head, so each gathered K/V row is read once for all of them.
    Triton: the queries (input 0) are loaded as a tile whose broadcast row index is an ``arange`` over heads
    scaled by the head stride (``(kvh * G + tl.arange(0, G_PAD))[:, None] * D``), in a kernel that streams K
    tiles in a loop (the cache, input 1, or a gathered copy of it), whatever computes the scores (``tl.dot`` or a broadcast multiply and ``tl.sum``). A padded
    tile with one real row (``rows[:, None] * 0``) does not count. CUDA: a K-cache load whose value is read inside a
    loop nested in the load's loop, over the heads of the group (it indexes the on-chip queries, ``qs[g][...]``,
    by its variable), with no K-cache load inside that head loop."""
    fl = flow(facts)
    for fn in code(facts, lang):
        qp, kp = _input_params(fl, facts, fn, 0), _input_params(fl, facts, fn, 1)
        loads = [(c, b) for c, b in _loads(fl, fn)]
        k_loads = [c for c, b in loads if b & kp]
        if fn.lang == "py":
            # the K tiles: the cache itself, or a gathered copy of it, streamed in a loop
            k_loads = k_loads or [c for c, b in loads if c.loops and b and not (b & qp)]
            if not k_loads:
                continue
            for c, b in loads:
                addr = access_base(c)
                if b & qp and addr is not None and (rows := _head_rows(fl, addr, fn)) is not None:
                    return found(f"{fn.name} loads the group's query heads as one tile", [span(c, "query heads"),
                                                                                         span(k_loads[0], "K tile")],
                                 0.8)
            continue
        q_loads = [c for c, b in loads if b & qp]
        def reads(a, cs):
            return any(any(n is c.expr for n, _, _ in fl.walk(a.value, fn, depth=4)) for c in cs)

        q_arrays = {t for a in fn.assigns for t in a.targets if reads(a, q_loads) and not reads(a, k_loads)}
        for lp in fn.loops:
            inside = [a for a in fn.assigns if lp.id in a.loops]
            per_head = lp.var is not None and any(  # qs[g][...]: the queries held on chip, indexed by the head
                n.kind == "sub" and n.args and n.args[0].kind == "name" and n.args[0].op in q_arrays
                and any(lp.var in i.names() for i in n.args[1:]) for a in inside for n in a.value.walk())
            if not per_head:
                continue
            if any(lp.id in c.loops for c in k_loads):
                continue
            for c in k_loads:
                if lp.parent is None or lp.parent not in c.loops:
                    continue
                if any(any(n is c.expr for n, _, _ in fl.walk(a.value, fn, depth=5)) for a in inside):
                    return found(f"{fn.name} reads each K row once for every query head of the group (loop at line "
                                 f"{lp.line})", [span(c, "one load"), span(lp, "loop over heads")], 0.75)
    return missing("no program serves several query heads from one K/V load", confidence=0.7)
