"""Static checks of task ``embedding_bag``: the ones only its rubric (``rubrics/embedding_bag.yaml``) uses.

- ``cache_policy_choice``
- ``gather_accumulate``
- ``gather_offset_width``
- ``pragma_unroll``
- ``reshaped_segment_sum``
- ``split_partials_combined``
- ``upconvert_fp32``
"""

from __future__ import annotations

from collections.abc import Iterator

from d2kgrade.static.checkutil import code, exclusive, span
from d2kgrade.static.dataflow import LOADS, Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function, end_pos, pos
from d2kgrade.static.patterns.atomics import carry_published_after, published_value, publishes
from d2kgrade.static.patterns.liveness import dead, elementwise, is_used, live_calls
from d2kgrade.static.patterns.names import ATOMIC_ADDS
from d2kgrade.static.registry import CheckResult, check, found, missing


@check("pragma_unroll")
def pragma_unroll(facts: Facts, lang: str) -> CheckResult:
    """A loop of reachable CUDA code is unrolled with ``#pragma unroll`` (or a Triton ``tl.static_range``)."""
    for fn in code(facts, lang):
        for lp in fn.loops:
            if lp.unroll:
                return found(f"unrolled loop in {fn.name}", span(lp, "#pragma unroll / static_range"), 0.9)
    return missing("no #pragma unroll / tl.static_range loop", confidence=0.85)


_NARROW_INTS = {"int32", "int16", "int8", "uint32", "uint16", "uint8", "signed char", "short", "int32_t",
                "unsigned short", "unsigned char", "char"}


HOST_SYNCS = [".item", ".tolist", ".cpu", ".numpy", "torch.unique", ".unique", "torch.nonzero", ".nonzero",
              "torch.masked_select", ".masked_select", "torch.repeat_interleave", ".repeat_interleave"]


_HOST_LOADS = {"__ldg": "ldg", "__ldcs": "ldcs", "__ldlu": "ldlu", "__ldcg": "ldcg", "__ldca": "ldca",
               "__ldcv": "ldcv"}


_BROADCASTS = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync"}


def _loaded_index_paths(fl: Flow, e: Expr, fn: Function, cast: str | None = None, mult: bool = False,
                        depth: int = 0, seen: set[int] | None = None) -> Iterator[tuple[Call | Expr, str | None, bool]]:
    """Loads whose value an address expression uses, with the outermost integer cast between the load and the
    address and whether the value is multiplied on the way (``idx * stride``). Loop variables are not followed
    (a range bounded by loaded offsets is not a gather)."""
    seen = seen if seen is not None else set()
    if depth > 10 or id(e) in seen:
        return
    seen.add(id(e))
    if e.kind == "call" and (e.op in LOADS or e.op == ".load") and e.op != "tl.atomic_add":
        yield e, cast, mult
        return
    if e.kind == "cast" and e.args:
        yield from _loaded_index_paths(fl, e.args[0], fn, cast or e.op, mult, depth + 1, seen)
        return
    if e.kind == "call" and e.op == ".to" and e.recv is not None:
        yield from _loaded_index_paths(fl, e.recv, fn, cast, mult, depth + 1, seen)
        return
    if e.kind == "name":
        for a in fl.defs(e.op, fn):
            if a.value.kind == "other" and a.value.op in ("loop-var", "item-write"):
                continue
            yield from _loaded_index_paths(fl, a.value, fn, cast, mult, depth + 1, seen)
        return
    if e.kind == "call" and e.op in ("tl.multiple_of", "tl.max_contiguous", "reinterpret_cast"):
        if e.args:
            yield from _loaded_index_paths(fl, e.args[0], fn, cast, mult, depth + 1, seen)
        return
    if e.kind == "call" and e.op in _BROADCASTS and len(e.args) >= 2:
        # __shfl_sync(mask, idx, j): lane j's loaded index handed to every lane (a prefetched index chunk)
        yield from _loaded_index_paths(fl, e.args[1], fn, cast, mult, depth + 1, seen)
        return
    if e.kind == "call":
        return  # values computed by other calls (tl.where, tl.minimum of offsets...) are not followed
    m = mult or (e.kind == "bin" and e.op == "*")
    for k in e.args:
        yield from _loaded_index_paths(fl, k, fn, cast, m, depth + 1, seen)


def _gathers(fl: Flow, fn: Function, rows: bool = False) -> list[tuple[Call, list[tuple[Expr, str | None, bool]]]]:
    """Live loads whose address uses a loaded value (a data-dependent gather), with the index paths; ``rows``:
    only gathers of rows (the loaded index multiplied by a stride)."""
    out = []
    for kind, c, _ in fl.memory_ops(fn):
        if kind != "load" or dead(fl, fn, c.guards):
            continue
        addr = c.expr.kw("pointer", 0) if not c.name.startswith(".") else (c.expr.args[0] if c.expr.args else None)
        if addr is None:
            continue
        paths = [p for p in _loaded_index_paths(fl, addr, fn) if p[0] is not c.expr and (p[2] or not rows)]
        if paths:
            out.append((c, paths))
    return out


@check("gather_accumulate")
def gather_accumulate(facts: Facts, lang: str) -> CheckResult:
    """In one kernel, rows gathered through loaded indices feed a loop-carried accumulator (``acc += w *
    tl.load(table + idx * stride + d)``) that is written once after the loop (a store or an atomic add): gather
    and reduction fused, with no gathered matrix in memory."""
    fl = flow(facts)
    for fn in code(facts, lang):
        gathers = _gathers(fl, fn, rows=True)
        if not gathers:
            continue
        seeds = {id(c.expr) for c, _ in gathers}
        hit = carry_published_after(fl, fn, lambda u: any(id(n) in seeds for n, _, _ in fl.walk(u.value, fn, depth=6)))
        if hit:
            lp, var, c = hit
            return found(f"{fn.name} accumulates gathered rows in {var} over the loop at line {lp.line} "
                         "and writes it once after the loop",
                         [span(gathers[0][0], "gather"), span(c, "one write")], 0.85)
    return missing("no kernel accumulates gathered rows in a loop carry written once after the loop",
                   confidence=0.8)


@check("split_partials_combined")
def split_partials_combined(facts: Facts, lang: str) -> CheckResult:
    """Partial sums of bounded slices are combined across programs: an atomic add (its result unused) of a reduced
    or loop-carried partial (``tl.atomic_add(out + bag * D + d, acc)``), or partials reduced and stored by one
    kernel that a later kernel sums in a loop and writes out (a second pass)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for c in live_calls(fl, fn):
            if c.name not in ATOMIC_ADDS or is_used(fn, c):  # a used result is a counter claim, not a partial sum
                continue
            v = published_value(c)
            if v is not None and fl.reduction_derived(v, fn) is not None:
                return found(f"atomic add of a partial sum in {fn.name}", span(c, "atomic of a partial"), 0.85)
    for fn in code(facts, lang):
        carried = fl.carried(fn)
        for kind, c, bases in fl.memory_ops(fn):
            if kind != "load" or not c.loops or dead(fl, fn, c.guards):
                continue
            partial = None
            for base in bases:
                for k, st in fl.producers(fn, base):
                    sv = fl.stored_value(st)
                    if sv is not None and fl.reduction_derived(sv, k) is not None:
                        partial = (k, st)
            if partial is None:
                continue
            # the later kernel sums several of those partials: a loop carry accumulates the load, written after it
            for lid in c.loops:
                lp = fn.loop(lid)
                for var, ups in carried.get(lid, {}).items():
                    if lp is None or not any(n is c.expr for u in ups for n, _, _ in fl.walk(u.value, fn, depth=4)):
                        continue
                    for st2 in live_calls(fl, fn):
                        v2 = published_value(st2) if publishes(fn, st2) else None
                        if v2 is not None and lid not in st2.loops and pos(st2) > end_pos(lp) and fl.refs(v2, fn, var):
                            k, st = partial
                            return found(f"{fn.name} sums partials that {k.name} reduced and stored",
                                         [span(st, "partial stored"), span(c, "partials summed"),
                                          span(st2, "combined")], 0.8)
    return missing("no partial sums combined by atomics or by a second kernel", confidence=0.8)


@check("reshaped_segment_sum")
def reshaped_segment_sum(facts: Facts, lang: str) -> CheckResult:
    """A flat tile of loaded data is reshaped to rank 3 and reduced over an inner axis (``tl.sum(tl.reshape(blk,
    [BAGS, UNROLL, D]), axis=1)``): a segmented sum that packs several segments (bags, groups) per load."""
    fl = flow(facts)
    for fn in code(facts, "triton" if lang == "any" else lang):
        for c in live_calls(fl, fn):
            if c.name not in ("tl.sum", "tl.max", "tl.reduce") or not c.expr.args:
                continue
            axis = c.expr.kw("axis", 1)
            ax = fl.fold(axis, fn) if axis is not None else None
            if ax not in (1, -2):
                continue
            for n, f, _ in fl.walk(c.expr.args[0], fn, depth=3):
                if n.kind == "call" and n.op in ("tl.reshape", "tl.view", ".reshape") and f is fn:
                    shape = n.args[1] if len(n.args) > 1 else n.kw("shape")
                    src = n.args[0] if n.args else None
                    if (shape is not None and shape.kind == "tuple" and len(shape.args) == 3 and src is not None
                            and elementwise(fl, fn, src)):
                        return found(f"rank-3 reshape reduced over axis {ax} in {fn.name}", span(c, "segmented sum"),
                                     0.8)
    return missing("no rank-3 reshape of loaded data reduced over an inner axis", confidence=0.8)


def _narrowed_on_host(fl: Flow, fn: Function, load: Expr) -> bool:
    ptr = load.kw("pointer", 0) if load.op != ".load" else load.recv
    if ptr is None:
        return False
    for base in fl.bases(ptr, fn):
        for src, caller in fl.param_sources(fn, base):
            for n, _, _ in fl.walk(src, caller, depth=3):
                if n.kind == "call" and n.op in (".int", ".short"):
                    return True
                if n.kind == "call" and n.op in (".to", ".type") and any(
                        a.kind == "name" and a.op.rsplit(".", 1)[-1] in ("int32", "int", "int16") for a in n.args):
                    return True
                if n.kind == "cast" and n.op in _NARROW_INTS:
                    return True
    return False


@check("gather_offset_width")
def gather_offset_width(facts: Facts, lang: str) -> CheckResult:
    """Row offsets of gathers (a loaded index multiplied by a row stride) are formed in 64 bits: the index is
    used as loaded from an int64 tensor, or cast to int64, and never narrowed to 32 bits (``.to(tl.int32)``,
    ``int r = idx[i]``, ``indices.int()`` on the host) before the multiply."""
    fl = flow(facts)
    ok: list[Call] = []
    for fn in code(facts, lang):
        for c, paths in _gathers(fl, fn):
            for load, cast, mult in paths:
                if not mult:
                    continue
                if cast is not None and cast in _NARROW_INTS:
                    return missing(f"the gather at line {c.line} in {fn.name} narrows its index to {cast} before the "
                                   "row multiply", [span(c, "32-bit row offset")], 0.85)
                if cast is None and isinstance(load, Expr) and _narrowed_on_host(fl, fn, load):
                    return missing(f"the index of the gather at line {c.line} is narrowed on the host",
                                   [span(c, "32-bit row offset")], 0.8)
                ok.append(c)
    if ok:
        return found(f"{len(ok)} gather(s) with 64-bit row offsets", [span(c, "64-bit row offset") for c in ok[:4]],
                     0.8)
    return missing("no gather of rows through a loaded index", confidence=0.75)


def _policy_values(fl: Flow, fn: Function, c: Call) -> list[str | None] | None:
    """The eviction policies a load can take: one literal (or module constant), None for none, or the values a
    policy parameter receives at the launches (None when not constant)."""
    e = c.expr.kw("eviction_policy")
    if e is None:
        return [None]
    if e.kind == "const":
        return [e.value if isinstance(e.value, str) else None]
    if e.kind == "name" and isinstance(fl.facts.consts.get(e.op), str):
        return [fl.facts.consts[e.op]]
    r = fl.root(e, fn)
    if r.kind == "name" and r.op in fn.params:
        vals: list[str | None] = []
        for src, caller in fl.param_sources(fn, r.op):
            for n, _, _ in fl.walk(src, caller, depth=3):
                if n.kind == "const" and isinstance(n.value, str) and n.value.startswith("evict"):
                    vals.append(n.value)
        return vals or None
    return None


def _host_synced(fl: Flow, fn: Function, e: Expr) -> Expr | None:
    """A host call that reads device data (``.item()``, ``torch.unique``...) which ``e`` (device code) depends on
    through the launch arguments of its parameters."""
    for n, f, _ in fl.walk(e, fn, depth=6, params=True):
        if f.is_device:
            continue
        if n.kind == "call" and n.op in HOST_SYNCS:
            return n
    return None


_ASM_HINTS = ("L1::no_allocate", "L2::evict_first", "L2::evict_last", ".nc", ".cs", ".lu", ".cg")


def _asm_loads(facts: Facts, fn: Function) -> list[tuple[Call, str]]:
    """Inline-PTX global loads of ``fn`` with a cache qualifier (``ld.global.nc.L1::no_allocate.v4.f32``), as
    (the asm call, ``asm:<qualifier>``); the call's first operand is the address."""
    texts = [t for t in facts.reachable_tokens("asm") if "ld.global" in t.text]
    out = []
    for c in fn.calls:
        if c.name != "asm" or not c.expr.args:
            continue
        for t in texts:
            if t.line <= c.line <= t.end_line:
                q = next((h for h in _ASM_HINTS if h in t.text), None)
                if q is not None:
                    out.append((c, "asm:" + q))
    return out


@check("cache_policy_choice")
def cache_policy_choice(facts: Facts, lang: str) -> CheckResult:
    """The cache policy of one buffer's loads is chosen per workload: Triton loads of the same pointer with
    different ``eviction_policy`` values (at least one of ``evict_first``/``evict_last``) on exclusive branches or
    through a policy parameter, decided by a device value or a launch parameter that is not computed from a host
    read of device data (``.item()``, ``torch.unique``...); CUDA loads of one pointer through two different
    cache-hinted forms (``__ldg`` and ``__ldcs``...)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        mem = [(c, b) for kind, c, b in fl.memory_ops(fn) if kind == "load" and not dead(fl, fn, c.guards)]
        if fn.lang == "py":
            for i, (c1, b1) in enumerate(mem):
                p1 = _policy_values(fl, fn, c1)
                if p1 is None:
                    continue
                if len(set(p1)) >= 2 and set(p1) & {"evict_first", "evict_last"}:
                    e = c1.expr.kw("eviction_policy")
                    sync = _host_synced(fl, fn, e) if e is not None else None
                    if sync is None:
                        return found(f"eviction policy of the load at line {c1.line} chosen per launch in {fn.name}",
                                     span(c1, "chosen policy"), 0.8)
                for c2, b2 in mem[i + 1:]:
                    if not (b1 & b2) or not exclusive(c1.guards, c2.guards):
                        continue
                    p2 = _policy_values(fl, fn, c2)
                    if p2 is None or set(p1) == set(p2) or not (set(p1) | set(p2)) & {"evict_first", "evict_last"}:
                        continue
                    conds = [g for g in c1.guards if any(g is h or (h.kind == "unary" and h.args and h.args[0] is g)
                                                         or (g.kind == "unary" and g.args and g.args[0] is h)
                                                         for h in c2.guards)]
                    syncs = [s for g in conds if (s := _host_synced(fl, fn, g)) is not None]
                    if syncs:
                        return missing(f"the cache policy in {fn.name} is chosen from a host read of device data "
                                       f"(line {syncs[0].line})", [span(syncs[0], "host sync")], 0.8)
                    return found(f"{fn.name} loads {', '.join(sorted(b1 & b2))} with {p1[0] or 'no hint'} or "
                                 f"{p2[0] or 'no hint'} depending on a run-time condition",
                                 [span(c1, str(p1[0])), span(c2, str(p2[0]))], 0.85)
        else:
            forms: dict[str, dict[str, Call]] = {}
            for c, b in mem:
                hint = _HOST_LOADS.get(c.name, "plain")
                for base in b:
                    forms.setdefault(base, {}).setdefault(hint, c)
            for c, hint in _asm_loads(facts, fn):  # ld.global.nc.L1::no_allocate in inline PTX: a hinted form too
                for base in fl.bases(c.expr.args[0], fn):
                    forms.setdefault(base, {}).setdefault(hint, c)
            for base, by in forms.items():
                hinted = [h for h in by if h != "plain"]
                if len(hinted) >= 2:
                    cs = list(by.values())
                    return found(f"{fn.name} reads {base} through {', '.join(sorted(hinted))}",
                                 [span(x) for x in cs[:3]], 0.75)
    return missing("no load whose cache policy is chosen per workload", confidence=0.8)


@check("upconvert_fp32")
def upconvert_fp32(facts: Facts, lang: str) -> CheckResult:
    """Gathered rows are converted to fp32 in registers: Triton ``.to(tl.float32)`` of a value loaded through a
    gather; CUDA bf16/fp16 conversion intrinsics (``__bfloat1622float2``, ``__bfloat162float``...) in reachable
    code, an overload of a called helper included (the static front end cannot tell which overload a template
    instantiates)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        if fn.lang == "py":
            gathers = _gathers(fl, fn, rows=True)
            if not gathers:
                continue
            seeds = {id(c.expr) for c, _ in gathers}
            for c in live_calls(fl, fn):
                if c.expr.kind == "cast" and c.expr.op == "fp32" and c.expr.args and any(
                        id(n) in seeds for n, _, _ in fl.walk(c.expr.args[0], fn, depth=4)):
                    return found(f"gathered rows converted to fp32 in {fn.name}", span(c, "up-conversion"), 0.85)
    if lang in ("cuda", "any") and "cuda" in facts.languages:
        convs = ("__bfloat162float", "__bfloat1622float2", "__half2float", "__half22float2")
        names = {facts.functions[k].name for k in facts.reachable if facts.functions[k].lang == "cuda"}
        funcs = [f for k, f in facts.functions.items() if f.lang == "cuda" and f.is_device
                 and (k in facts.reachable or ("@" in k and f.name in names))]
        for f in funcs:
            for c in f.calls:
                if c.name in convs:
                    return found(f"16-bit values converted to fp32 in {f.name}", span(c, c.name), 0.75)
    return missing("no fp32 up-conversion of gathered rows in device code", confidence=0.8)
