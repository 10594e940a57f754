"""Memory-access checks: what one load feeds (read once, reused on chip), cache hints, divisibility and 64-bit
offsets, tensor descriptors, 128-bit vector access, unit-stride tiles of the inputs."""

from __future__ import annotations

from collections.abc import Iterator

from d2kgrade.static.checkutil import as_list, code, exclusive, matches, span
from d2kgrade.static.dataflow import Flow, Taint, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function
from d2kgrade.static.patterns.access import VECTOR_DEFAULT, access_base, arange_size, aranges, unit_arange
from d2kgrade.static.patterns.config import launch_values
from d2kgrade.static.patterns.roles import input_loads
from d2kgrade.static.registry import CheckResult, check, found, missing


def _reduction_ok(fl: Flow, fn: Function, c: Call, names: list[str]) -> bool:
    if "any" in names:
        return fl.is_reduction(c.expr, fn)
    return matches(c.name, names)


def _fed(fl: Flow, fn: Function, tainted: Taint, seeds: set[int], reductions: list[str],
         depth: int = 0) -> tuple[dict[str, Call], list[Call]]:
    """Reductions (by requested name) and stores in ``fn`` (and helpers it calls) fed element-wise by the taint."""
    red: dict[str, Call] = {}
    stores: list[Call] = []
    for kind, c, _ in fl.memory_ops(fn):
        if kind == "store":
            v = fl.stored_value(c)
            if v is not None and fl.reads_through(v, fn, tainted, seeds, site_of(c)):
                stores.append(c)
    for c in fn.calls:
        if c.name in ("tl.store", "store", "launch"):
            continue
        args = list(c.expr.args) + list((c.expr.kwargs or {}).values())
        hit = [a for a in args if fl.reads_through(a, fn, tainted, seeds, site_of(c))]
        if not hit:
            continue
        for r in reductions:
            if r not in red and _reduction_ok(fl, fn, c, [r]):
                red[r] = c
        callee = fl.callee(c.name, fn) if c.expr.recv is None else None
        if callee is not None and callee.is_device and depth < 2 and callee is not fn:
            bound = {p for i, p in enumerate(callee.params)
                     if (a := c.expr.kw(p, i)) is not None and fl.reads_through(a, fn, tainted, seeds, site_of(c))}
            sub_t = fl.taint(callee, Taint(set(), bound), set())
            r2, s2 = _fed(fl, callee, sub_t, set(), reductions, depth + 1)
            for k, v in r2.items():
                red.setdefault(k, v)
            stores.extend(s2)
    return red, stores


def _load_seeds(fl: Flow, fn: Function, loads: list[tuple[Call, set[str]]], min_sources: int, min_loads: int,
                failed_cover: set[int], same_base: bool = False
                ) -> Iterator[tuple[Taint, set[int], set[str], list[Call]]]:
    """Values that load_feeds tries, in order: each load, or (``min_sources``/``min_loads`` >= 2) each
    assignment combining enough loads, with the definitions that depend on it element-wise.

    Generated lazily, and an assignment inside the taint of an assignment that already failed (listed in
    ``failed_cover`` by the caller) is skipped: its taint is a subset of that one (the taint is a closure, so
    monotone), so it feeds no more reductions or stores, fails too and scores no higher. This changes no
    verdict or reason and saves most of the check's time on kernels with long chains of combined values
    (5.5 ms of 7 on the causal_conv1d reference)."""
    if min_sources <= 1 and min_loads <= 1:
        for c, b in loads:
            yield fl.taint(fn, None, {id(c.expr)}), {id(c.expr)}, b, [c]
        return
    per_load = [(c, b, fl.taint(fn, None, {id(c.expr)})) for c, b in loads]

    def enough(srcs: list[tuple[Call, set[str]]]) -> bool:
        distinct = {frozenset(b) for _, b in srcs}
        if same_base:
            per_base: dict[str, int] = {}
            for _, b in srcs:
                for x in b:
                    per_base[x] = per_base.get(x, 0) + 1
            return len(distinct) >= min_sources and max(per_base.values(), default=0) >= min_loads
        return len(distinct) >= min_sources and len(srcs) >= min_loads

    for a in fn.assigns:
        srcs = [(c, b) for c, b, t in per_load if id(a) in t.defs and b]
        distinct = {frozenset(b) for _, b in srcs}
        if enough(srcs) and id(a) not in failed_cover:
            yield fl.taint(fn, Taint({id(a)}, set()), set()), set(), set().union(*distinct), [c for c, _ in srcs]
    if same_base:  # the loads of one pointer together (x1 and x2 of a row, each output reading both)
        by_base: dict[str, list[tuple[Call, Taint]]] = {}
        for c, b, t in per_load:
            for x in b:
                by_base.setdefault(x, []).append((c, t))
        for base, group in by_base.items():
            if len(group) < min_loads:
                continue
            combined = False
            for kind, st, _ in fl.memory_ops(fn):
                v = fl.stored_value(st) if kind == "store" else None
                if v is not None and sum(fl.reads_through(v, fn, t, {id(c.expr)}, site_of(st))
                                         for c, t in group) >= min_loads:
                    combined = True
                    break
            if combined:
                seeds = {id(c.expr) for c, _ in group}
                yield fl.taint(fn, None, seeds), seeds, {base}, [c for c, _ in group]
    # values combined inside a store's argument, never assigned: tl.store(h + i, (g * tl.sigmoid(g) * u).to(..))
    for kind, st, _ in fl.memory_ops(fn):
        v = fl.stored_value(st) if kind == "store" else None
        if v is None:
            continue
        srcs = [(c, b) for c, b, t in per_load if b and fl.reads_through(v, fn, t, {id(c.expr)}, site_of(st))]
        distinct = {frozenset(b) for _, b in srcs}
        if enough(srcs):
            yield fl.taint(fn, None, {id(v)}), {id(v)}, set().union(*distinct), [c for c, _ in srcs]


@check("load_feeds")
def load_feeds(facts: Facts, lang: str, *, reductions: str | list[str] = "tl.sum", stores: int = 1,
               min_sources: int = 1, min_loads: int = 1, single_load: bool = False,
               same_base: bool = False) -> CheckResult:
    """One loaded value (or, with ``min_sources`` >= 2, one value combined from that many different input
    pointers; with ``min_loads`` >= 2, from that many load sites, possibly of one pointer) feeds, element-wise,
    every reduction in ``reductions`` (call names; ``any`` = any reduction, including warp shuffles and reducing
    helpers; ``[]`` = none needed) and at least ``stores`` stores, in one kernel. With ``single_load`` no other
    load of the same pointer may happen in that kernel (outside exclusive branches): the data stays on chip
    between the reductions and the store. ``same_base``: the ``min_loads`` load sites read one pointer (the two
    halves of one row, ``x + c`` and ``x + I + c``), not several inputs."""
    fl = flow(facts)
    reds = as_list(reductions)
    best: tuple[int, str] = (0, "no load in reachable kernels")
    for fn in code(facts, lang):
        mem = fl.memory_ops(fn)
        loads = [(c, b) for kind, c, b in mem if kind == "load"]
        if not loads:
            continue
        failed_cover: set[int] = set()
        for tainted, seeds, bases, seed_calls in _load_seeds(fl, fn, loads, min_sources, min_loads, failed_cover, same_base):
            red, fed_stores = _fed(fl, fn, tainted, seeds, reds)
            score = len(red) + min(len(fed_stores), stores)
            if len(red) < len(reds) or len(fed_stores) < stores:
                if not seeds:
                    failed_cover |= tainted.defs
                if score > best[0]:
                    got = ", ".join(red) or "no reduction"
                    best = (score, f"in {fn.name}, the loaded value feeds {got} and {len(fed_stores)} store(s); "
                                   f"needs {', '.join(reds)} and {stores} store(s)")
                continue
            if single_load and bases:
                again = [c for c, b in loads if c not in seed_calls and b & bases
                         and not any(exclusive(c.guards, s.guards) for s in seed_calls)]
                if again:
                    if best[0] < 100:
                        best = (100, f"in {fn.name}, {', '.join(sorted(bases))} is loaded again at line "
                                     f"{again[0].line}")
                    continue
            spans = [span(c, "load") for c in seed_calls[:2]] + [span(c, f"{k} of the loaded value")
                                                                 for k, c in red.items()]
            spans += [span(c, "store of a value computed from it") for c in fed_stores[:2]]
            what = "one load of " + ", ".join(sorted(bases)) if bases else "a loaded value"
            return found(f"in {fn.name}, {what} feeds {', '.join(red)} and {len(fed_stores)} store(s)"
                         + (" with no second load of it" if single_load else ""), spans, 0.85)
    return missing(best[1], confidence=0.8)


@check("eviction_policy")
def eviction_policy(facts: Facts, lang: str, *, value: str, op: str = "load", in_loop: bool | None = None) -> CheckResult:
    """A reachable ``tl.load`` (``op: load``), ``tl.store`` (``store``) or either (``any``) passes
    ``eviction_policy=value`` (``evict_last``, ``evict_first``)."""
    names = {"load": ["tl.load", ".load"], "store": ["tl.store", ".store"],
             "any": ["tl.load", "tl.store", ".load", ".store"]}[op]
    fl = flow(facts)
    hits = []
    for fn in code(facts, lang):
        for c in fn.calls:
            if c.name in names and (in_loop is None or bool(c.loops) == in_loop):
                e = c.expr.kw("eviction_policy")
                if e is not None and (e.value == value or fl.fold(e, fn) == value or
                                      (e.kind == "name" and facts.consts.get(e.op) == value)):
                    hits.append(c)
    if hits:
        return found(f"{hits[0].name} with eviction_policy='{value}'", [span(c, value) for c in hits[:4]], 0.95)
    return missing(f"no {op} with eviction_policy='{value}'", confidence=0.9)


@check("cache_modifier")
def cache_modifier(facts: Facts, lang: str, *, value: str | list[str], op: str = "any") -> CheckResult:
    """A reachable ``tl.load``/``tl.store`` passes ``cache_modifier`` in ``value`` (``.cg``, ``.cs``, ``.ca``...)."""
    vals = as_list(value)
    names = {"load": ["tl.load"], "store": ["tl.store"], "any": ["tl.load", "tl.store"]}[op]
    def given(c: Call) -> object:  # a literal, or a module constant holding one (STREAM = ".cs")
        e = c.expr.kw("cache_modifier")
        if e is None:
            return None
        return facts.consts.get(e.op) if e.kind == "name" else e.value

    hits = [c for fn in code(facts, lang) for c in fn.calls if c.name in names and given(c) in vals]
    if hits:
        return found(f"{hits[0].name} with cache_modifier={given(hits[0])!r}", [span(c) for c in hits[:4]], 0.95)
    return missing(f"no {op} with cache_modifier in {vals}", confidence=0.9)


@check("divisibility_hints")
def divisibility_hints(facts: Facts, lang: str) -> CheckResult:
    """Reachable Triton code gives the compiler alignment/contiguity hints (``tl.multiple_of``,
    ``tl.max_contiguous``, ``tl.assume``), which let loads vectorise to 128-bit accesses."""
    names = ["tl.multiple_of", "tl.max_contiguous", "tl.assume"]
    hits = [c for fn in code(facts, lang) for c in fn.calls if c.name in names]
    if hits:
        return found(f"{hits[0].name} hint", [span(c, c.name) for c in hits[:4]], 0.85)
    return missing("no tl.multiple_of / tl.max_contiguous / tl.assume hint", confidence=0.7)


@check("descriptor_access")
def descriptor_access(facts: Facts, lang: str, *, op: str = "load", in_loop: bool | None = None) -> CheckResult:
    """A reachable jit function loads (``op: load``) or stores (``store``) through a tensor descriptor
    (``desc.load([m, k])`` on ``tl.make_tensor_descriptor`` or a host ``TensorDescriptor``): TMA on Hopper."""
    fl = flow(facts)
    hits = []
    for fn in code(facts, "triton"):
        for kind, c, _ in fl.memory_ops(fn):
            if kind == op and c.name.startswith(".") and (in_loop is None or bool(c.loops) == in_loop):
                hits.append(c)
    if hits:
        return found(f"tensor-descriptor {op} {hits[0].name}(...)", [span(c, f"descriptor {op}") for c in hits[:4]],
                     0.9)
    return missing(f"no tensor-descriptor {op}" + (" inside a loop" if in_loop else ""), confidence=0.9)


@check("vector_access")
def vector_access(facts: Facts, lang: str, *, types: list[str] | None = None) -> CheckResult:
    """Reachable CUDA code moves data as vector types (``reinterpret_cast<const float4*>``, ``uint4`` loads,
    ``__nv_bfloat162``/``half2`` pairs): 64/128-bit accesses instead of scalar ones."""
    want = set(types or VECTOR_DEFAULT)
    fl = flow(facts)
    casts = [t for t in facts.reachable_tokens("reinterpret") if t.text in want]
    vec_loads = []
    for fn in code(facts, "cuda"):
        for kind, c, _ in fl.memory_ops(fn):
            for n in c.expr.walk():
                if n.kind == "call" and n.op == "reinterpret_cast" and n.value in want:
                    vec_loads.append(c)
                    break
    hits = vec_loads or casts
    if hits:
        return found(f"vector accesses ({', '.join(sorted({t.text for t in casts} or want & {'float4'}))})",
                     [span(h, "vector access") for h in hits[:4]], 0.9)  # type: ignore[arg-type]
    return missing(f"no {'/'.join(sorted(want)[:4])}... vector accesses in reachable CUDA code", confidence=0.85)


@check("int64_offsets")
def int64_offsets(facts: Facts, lang: str) -> CheckResult:
    """Offsets are computed in 64-bit (``pid.to(tl.int64)``, ``tl.cast(x, tl.int64)``, ``(int64_t)`` in CUDA, or a
    C declaration ``const int64_t row = blockIdx.x`` / ``size_t i = ...``), so products such as ``row * stride``
    past 2^31 elements do not overflow."""
    hits: list[Call | Expr] = []
    for fn in code(facts, lang):
        hits += [c for c in fn.calls if c.expr.kind == "cast" and c.expr.op == "int64"]
        # a declaration that widens an index (not one that holds a value read from an int64 tensor)
        hits += [a.value for a in fn.assigns if a.value.kind == "cast" and a.value.op == "int64"
                 and not (a.value.args and a.value.args[0].kind in ("sub", "load"))]
    if hits:
        return found("64-bit offset arithmetic", [span(c, "int64 cast") for c in hits[:4]], 0.85)
    return missing("no 64-bit cast in offset arithmetic", confidence=0.7)


def _size_at(fl: Flow, fn: Function, e: Expr, la: object, caller: Function) -> int | None:
    """An arange size of ``fn`` at launch ``la``: a constant, or the launch's value for a parameter."""
    r = fl.root(e, fn)
    v = fl.fold(r, fn)
    if isinstance(v, int):
        return v
    if r.kind == "name" and r.op in fn.params:
        b = fl.launch_arg(la, fn, r.op)  # type: ignore[arg-type]
        v = fl.fold(b, caller) if b is not None else None
        return v if isinstance(v, int) else None
    return None


@check("contiguous_tile_access")
def contiguous_tile_access(facts: Facts, lang: str, *, min_per_thread: int = 4, op: str = "load") -> CheckResult:
    """Loads that Triton can issue as 128-bit vectors: a tile whose innermost index is ``tl.arange`` with unit
    stride, from a kernel that leaves its integer arguments specialisable (no ``do_not_specialize``), so row
    strides divisible by 16 are known to the compiler; block-pointer and descriptor loads count too. When the
    block size and ``num_warps`` of a launch are both constants, each thread must get at least
    ``min_per_thread`` contiguous elements (``BLOCK >= min_per_thread * 32 * num_warps``). ``op``: ``load``,
    ``store``, or ``both`` (one kernel whose loads and stores are both contiguous, as a transpose needs)."""
    if op == "both":
        fl = flow(facts)
        for fn in code(facts, "triton"):
            sub = Facts(facts.path, facts.text, facts.suffix, functions=facts.functions, reachable={fn.key},
                        launches=facts.launches, consts=facts.consts)
            sub._cache["flow"] = fl
            a = contiguous_tile_access(sub, lang, min_per_thread=min_per_thread, op="load")
            b = contiguous_tile_access(sub, lang, min_per_thread=min_per_thread, op="store")
            if a.passed and b.passed:
                return found(f"contiguous loads and stores in {fn.name}", a.evidence[:1] + b.evidence[:1], 0.75)
        return missing("no kernel whose loads and stores are both unit-stride along their innermost index",
                       confidence=0.7)
    fl = flow(facts)
    reason = f"no {op} with a unit-stride tl.arange innermost index"
    for fn in code(facts, "triton"):
        if fn.do_not_specialize:
            reason = f"{fn.name} disables specialisation of {fn.do_not_specialize}"
            continue
        for kind, c, _ in fl.memory_ops(fn):
            if kind != op:
                continue
            if c.name.startswith("."):
                return found(f"descriptor {op} in {fn.name}", span(c, f"TMA {op}"), 0.8)
            ptr = c.expr.kw("pointer", 0)
            if ptr is None:
                continue
            if any(n.kind == "call" and n.op == "tl.make_block_ptr" for n, _, _ in fl.walk(ptr, fn, depth=3)):
                return found(f"block-pointer {op} in {fn.name}", span(c, f"block-pointer {op}"), 0.75)
            ar = unit_arange(fl, ptr, fn)
            if ar is None or len(ar.args) != 2:
                continue
            size = fl.root(ar.args[1], fn)
            narrow = False
            # the other axes of a 2-D/3-D tile ([ROWS, W]): their threads share the tile, so a thread holds
            # min(W, ROWS*W / threads) contiguous elements, not W / threads
            others = {id(n): n.args[1] for n, f, _ in fl.walk(ptr, fn, depth=6)
                      if f is fn and n.kind == "call" and n.op == "tl.arange" and n is not ar and len(n.args) == 2}
            if size.kind == "name" and size.op in fn.params:
                for la in fl.launches_of(fn):
                    caller = facts.functions.get(la.caller)
                    b = fl.launch_arg(la, fn, size.op)
                    w = la.kwargs.get("num_warps")
                    if caller is None or b is None:
                        continue
                    bv, wv = fl.fold(b, caller), fl.fold(w, caller) if w is not None else 4
                    if not (isinstance(bv, int) and isinstance(wv, int)):
                        continue
                    rest = 1
                    for e in others.values():
                        ov = _size_at(fl, fn, e, la, caller)
                        rest = rest * ov if isinstance(ov, int) and isinstance(rest, int) else None
                    if rest is not None and min(bv, bv * rest / (32 * wv)) < min_per_thread:
                        narrow = True
                        reason = (f"{fn.name} is launched with {size.op}={bv} and num_warps={wv}: fewer than "
                                  f"{min_per_thread} contiguous elements per thread")
            if not narrow:
                return found(f"unit-stride tile {op}s in {fn.name}", [span(c, f"contiguous {op}"),
                                                                      span(ar, "innermost index")], 0.75)
    return missing(reason, confidence=0.7)


def _per_thread_inputs(fl: Flow, fn: Function, ptr: Expr, inner: Expr) -> tuple[list[int], list[int]]:
    """(inner sizes, contiguous elements per thread) of an address's unit-stride arange, per known launch."""
    inners, per = [], []
    others = [a for a in aranges(fl, ptr, fn) if a is not inner]
    for b in launch_values(fl, fn) or [{}]:
        iv = arange_size(fl, fn, inner.args[1], b)
        if iv is None:
            continue
        inners.append(iv)
        rest = 1
        for o in others:
            ov = arange_size(fl, fn, o.args[1], b)
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

    fl = flow(facts)
    ok: list[Call] = []
    for fn in code(facts, "triton"):
        calls = input_loads(fl, fn, inputs)
        if not calls:
            continue
        if stores:
            calls += [c for kind, c, _ in fl.memory_ops(fn) if kind == "store"]
        for c in calls:
            ptr = access_base(c)
            if c.name.startswith("."):
                ok.append(c)
                continue
            ar = unit_arange(fl, ptr, fn) if ptr is not None else None
            if ar is None or len(ar.args) != 2:
                return missing(f"the access at line {c.line} of {fn.name} has no unit-stride tl.arange innermost "
                               "index", [span(c, "strided or scalar access")], 0.8)
            inners, per = _per_thread_inputs(fl, fn, ptr, ar)
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
