"""Static checks of task ``histogram``: the ones only its rubric (``rubrics/histogram.yaml``) uses.

- ``per_warp_shared``
- ``private_histogram_merge``
- ``relaxed_unused_atomics``
- ``sparse_rotated_merge``
- ``tile_histogram``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import LOADS, Flow, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function
from d2kgrade.static.patterns.atomics import carry_published_after, published_value, publishes
from d2kgrade.static.patterns.liveness import elementwise, is_used, live_calls
from d2kgrade.static.patterns.names import ATOMIC_ADDS
from d2kgrade.static.registry import CheckResult, check, found, missing


def _warp_index(fl: Flow, e: Expr, fn: Function) -> bool:
    """Does ``e`` read a warp index (``threadIdx.x >> 5``, ``threadIdx.x / 32``, ``/ warpSize``)?"""
    for n, f, _ in fl.walk(e, fn, depth=5):
        if n.kind == "bin" and len(n.args) == 2 and n.op in (">>", "/"):
            rhs = n.args[1]
            v = fl.fold(rhs, f)
            warp_size = v == 32 or (rhs.kind == "name" and rhs.op == "warpSize")
            if (n.op == ">>" and v == 5) or (n.op == "/" and warp_size):
                if any(x.kind == "name" and x.op.startswith("threadIdx") for x, _, _ in fl.walk(n.args[0], f,
                                                                                                 depth=3)):
                    return True
    return False


def _pid_no_loads(fl: Flow, e: Expr, fn: Function, depth: int = 0, seen: set[int] | None = None) -> bool:
    """Does ``e`` derive from the program id without going through a load (the rotation of a merge, not a
    loaded key's address)?"""
    seen = seen if seen is not None else set()
    if depth > 8 or id(e) in seen:
        return False
    seen.add(id(e))
    if e.kind == "call" and (e.op in LOADS or e.op in (".load",)):
        return False
    if (e.kind == "call" and e.op == "tl.program_id") or (e.kind == "name" and e.op.startswith("blockIdx")):
        return True
    if e.kind == "name":
        for a in fl.defs(e.op, fn):
            if a.value.kind == "other" and a.value.op in ("loop-var", "item-write"):
                continue
            if _pid_no_loads(fl, a.value, fn, depth + 1, seen):
                return True
        return False
    kids = list(e.args) + list((e.kwargs or {}).values()) + ([e.recv] if e.recv is not None else [])
    return any(_pid_no_loads(fl, k, fn, depth + 1, seen) for k in kids)


def _histogram_calls(fl: Flow, fn: Function) -> list[Call]:
    return [c for c in live_calls(fl, fn) if c.name == "tl.histogram" and c.expr.args
            and elementwise(fl, fn, c.expr.args[0], site_of(c))]


@check("tile_histogram")
def tile_histogram(facts: Facts, lang: str) -> CheckResult:
    """Loaded keys are counted with ``tl.histogram`` on code that can run (duplicates within a tile are combined
    before any atomic), and the counts reach a store or an atomic add."""
    fl = flow(facts)
    for fn in code(facts, "triton" if lang == "any" else lang):
        hs = _histogram_calls(fl, fn)
        if not hs:
            continue
        t = fl.taint(fn, None, {id(h.expr) for h in hs})
        for c in live_calls(fl, fn):
            if publishes(fn, c):
                v = published_value(c)
                if v is not None and fl.reads_through(v, fn, t, {id(h.expr) for h in hs}, site_of(c)):
                    return found(f"tl.histogram of loaded keys in {fn.name}, counts published at line {c.line}",
                                 [span(hs[0], "tile histogram"), span(c, "publish")], 0.85)
    return missing("no tl.histogram of loaded keys on code that runs", confidence=0.8)


@check("private_histogram_merge")
def private_histogram_merge(facts: Facts, lang: str) -> CheckResult:
    """A program keeps a private histogram across the iterations of a loop over its tiles (a loop-carried
    ``acc += tl.histogram(keys, NB)``) and publishes it once after the loop (an atomic add or a store)."""
    fl = flow(facts)
    for fn in code(facts, "triton" if lang == "any" else lang):
        hs = {id(h.expr): h for h in _histogram_calls(fl, fn)}
        if not hs:
            continue
        t = fl.taint(fn, None, set(hs))
        hit = carry_published_after(fl, fn, lambda u: id(u) in t.defs
                                     or fl.reads_through(u.value, fn, t, set(hs), site_of(u)))
        if hit:
            lp, var, c = hit
            return found(f"{fn.name} accumulates tl.histogram counts in {var} over the loop at line "
                         f"{lp.line} and publishes them once after it",
                         [span(lp, "loop over tiles"), span(c, "one merge")], 0.85)
    return missing("no histogram accumulated across a loop and published once after it", confidence=0.8)


@check("per_warp_shared")
def per_warp_shared(facts: Facts, lang: str) -> CheckResult:
    """CUDA counters in shared memory are privatised per warp: an atomic add targets a ``__shared__`` buffer at
    an index that includes the warp id (``s_hist[threadIdx.x >> 5][bin]``, ``s[warp * NB + bin]``)."""
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        shared = {s.name for s in facts.shared if s.func in (fn.key, "") or s.func in facts.reachable}
        if not shared:
            continue
        for c in live_calls(fl, fn):
            if c.name not in ATOMIC_ADDS or not c.expr.args:
                continue
            target = c.expr.args[0]
            names = {n.op for n, _, _ in fl.walk(target, fn, depth=4) if n.kind == "name"}
            if names & shared and _warp_index(fl, target, fn):
                return found(f"per-warp shared counters in {fn.name}", span(c, "atomic into the warp's copy"), 0.85)
    return missing("no shared-memory atomic indexed by the warp id", confidence=0.8)


@check("relaxed_unused_atomics")
def relaxed_unused_atomics(facts: Facts, lang: str) -> CheckResult:
    """Every atomic add of reachable code discards its result (so it compiles to a RED) and, in Triton, passes
    ``sem='relaxed'`` (the default is acq_rel); at least one exists."""
    fl = flow(facts)
    seen: list[Call] = []
    for fn in code(facts, lang):
        for c in live_calls(fl, fn):
            if c.name not in ATOMIC_ADDS:
                continue
            if is_used(fn, c):
                return missing(f"the result of the atomic at line {c.line} in {fn.name} is used (ATOM, not RED)",
                               [span(c, "atomic with return")], 0.85)
            if c.name == "tl.atomic_add":
                sem = c.expr.kw("sem")
                val = sem.value if sem is not None and sem.kind == "const" else (
                    facts.consts.get(sem.op) if sem is not None and sem.kind == "name" else None)
                if val != "relaxed":
                    return missing(f"the atomic at line {c.line} in {fn.name} uses the default acq_rel semantics",
                                   [span(c, "not relaxed")], 0.85)
            seen.append(c)
    if seen:
        return found(f"{len(seen)} atomic add(s), relaxed with the result unused", [span(c) for c in seen[:4]], 0.85)
    return missing("no atomic add in reachable code", confidence=0.85)


@check("sparse_rotated_merge")
def sparse_rotated_merge(facts: Facts, lang: str) -> CheckResult:
    """A private histogram is merged with atomics that skip zero counts (``mask=acc > 0``, ``if (c) atomicAdd``)
    at bins rotated by a program-dependent offset (``(slot + pid * K) % NB``, ``(j + blockIdx.x * 37) % NB``),
    so the programs do not all start at bin 0."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for c in live_calls(fl, fn):
            if c.name not in ATOMIC_ADDS or not c.expr.args:
                continue
            val = published_value(c)
            if val is None:
                continue
            vnames = {n.op for n, _, _ in fl.walk(val, fn, depth=2) if n.kind == "name"}
            conds = [c.expr.kw("mask")] if c.name == "tl.atomic_add" else []
            conds += list(c.guards)
            sparse = False
            for cond in conds:
                if cond is None:
                    continue
                for n, f, _ in fl.walk(cond, fn, depth=3):
                    if n.kind == "cmp" and n.op in (">", "!=", ">=") and len(n.args) == 2:
                        zero = [a for a in n.args if fl.fold(a, f) == 0]
                        other = [a for a in n.args if fl.fold(a, f) != 0]
                        if zero and other and any(fl.refs(o, fn, v) for o in other for v in vnames):
                            sparse = True
                if cond.kind == "name" and cond.op in vnames:
                    sparse = True  # if (c) atomicAdd(&g[b], c)
                if cond.kind == "call" and cond.op == "load" and any(
                        fl.refs(cond, fn, v) for v in vnames):  # if (s_hist[b]) atomicAdd(&g[b], s_hist[b])
                    sparse = True
                if sparse:
                    break
            if not sparse:
                continue
            ptr = c.expr.args[0]
            rotated = False
            for n, f, _ in fl.walk(ptr, fn, depth=5):
                if f is fn and n.kind == "bin" and n.op in ("%", "&") and len(n.args) == 2:
                    if _pid_no_loads(fl, n.args[0], fn):
                        rotated = True
                        break
            if rotated:
                return found(f"sparse merge at program-rotated bins in {fn.name}", span(c, "merge"), 0.85)
    return missing("no merge that skips zero bins at a program-dependent bin rotation", confidence=0.8)
