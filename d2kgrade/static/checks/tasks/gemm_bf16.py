"""Static checks of task ``gemm_bf16``: the ones only its rubric (``rubrics/gemm_bf16.yaml``) uses.

- ``cuda_unmasked_mainloop``
- ``unmasked_load``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code, matches, span
from d2kgrade.static.dataflow import flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call
from d2kgrade.static.patterns.names import CP_ASYNC, CUDA_MMA_ASM, CUDA_MMA_CALLS
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


def _masked(c: Call) -> bool:
    e = c.expr
    if c.name == "tl.load":
        return e.kw("mask", 1) is not None or e.kw("boundary_check") is not None
    return False


@check("unmasked_load")
def unmasked_load(facts: Facts, lang: str, *, guarded: bool = False, in_loop: bool = False) -> CheckResult:
    """A reachable ``tl.load`` without ``mask=``. ``guarded``: the unmasked load sits under a branch on a
    constexpr/heuristic flag (``if EVEN_K:``), or in a main loop whose tail is handled by a masked load of the same
    pointer outside it. ``in_loop``: the load is inside a loop."""
    fl = flow(facts)
    for fn in code(facts, "triton" if lang == "any" else lang):
        mem = [(c, b) for kind, c, b in fl.memory_ops(fn) if kind == "load" and c.name == "tl.load"]
        for c, b in mem:
            if _masked(c) or (in_loop and not c.loops):
                continue
            if not guarded:
                return found(f"unmasked tl.load in {fn.name}", span(c, "no mask"), 0.8)
            flags = set(fn.constexprs) | set(fn.heuristics)
            if any({fl.root(n, fn).op for n in g.walk() if n.kind == "name"} & flags for g in c.guards):
                return found(f"unmasked tl.load under a compile-time branch in {fn.name}",
                             [span(c, "no mask")] + [span(g, "constexpr branch") for g in c.guards[:1]], 0.85)
            tails = [t for t, tb in mem if t is not c and _masked(t) and tb & b and set(t.loops) != set(c.loops)]
            if c.loops and tails:
                return found(f"unmasked main-loop load with a masked tail in {fn.name}",
                             [span(c, "main loop, no mask"), span(tails[0], "masked tail")], 0.8)
    return missing("every reachable load is masked" + (" (or the unmasked ones are not behind a compile-time "
                                                       "branch)" if guarded else ""), confidence=0.8)


@check("cuda_unmasked_mainloop")
def cuda_unmasked_mainloop(facts: Facts, lang: str) -> CheckResult:
    """The CUDA loop that feeds the tensor cores (a loop issuing MMAs or asynchronous copies) loads whole tiles:
    no global load or copy inside it sits under a per-thread bounds test (a condition or ``?:`` that reads
    ``threadIdx``), so edge tiles are handled by a predicated tail outside the loop, TMA zero fill, or padding.
    Tile-level conditions (``if (next < k_tiles)`` around a prefetch) are not masks."""
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        mma_loops = {lid for c in fn.calls if matches(c.name, CUDA_MMA_CALLS)
                     or matches(c.name, CP_ASYNC["cp.async"][0])
                     or (c.name == "asm" and any(p in str(c.expr.value) for p in CUDA_MMA_ASM + ["cp.async"]))
                     for lid in c.loops[:1]}
        if not mma_loops:
            continue
        masked = None
        for c in fn.calls:
            if not (set(c.loops) & mma_loops) or not (c.name in ("load", "asm") or c.name.startswith("__ld")):
                continue
            if any(_per_thread(fl, g, fn) for g in c.guards):
                masked = c
                break
        for a in fn.assigns:
            if masked is None and set(a.loops) & mma_loops:
                for n in a.value.walk():
                    if n.kind == "ternary" and n.args and _per_thread(fl, n.args[0], fn) and any(
                            x.kind == "call" and x.op == "load" for b in n.args[1:] for x in b.walk()):
                        masked = a
                        break
        if masked is None:
            tail = _predicated_tail(fl, fn, mma_loops)
            if tail is None:
                return missing(f"the main loop of {fn.name} is unpredicated, but no predicated tail handles a K that "
                               "is not a multiple of the tile", confidence=0.7)
            loop = fn.loop(sorted(mma_loops)[0])
            return found(f"the tensor-core main loop of {fn.name} loads whole tiles; a predicated tail after it",
                         ([span(loop, "main loop")] if loop is not None else []) + [
                             Span(tail.line, tail.end_line, "predicated tail")], 0.75)
        return missing(f"{fn.name} predicates its main-loop loads per thread (line {masked.line})",
                       [Span(masked.line, masked.end_line, "masked load")], 0.75)
    return missing("no CUDA loop issues tensor-core instructions or asynchronous copies", confidence=0.7)


def _predicated_tail(fl, fn, loops: set[int]):
    """A global load outside the main loop under a per-thread bounds test (``k0 + c < K ? A[...] : 0``)."""
    for a in fn.assigns:
        if set(a.loops) & loops:
            continue
        for n in a.value.walk():
            if n.kind == "ternary" and n.args and _per_thread(fl, n.args[0], fn) and any(
                    x.kind == "call" and x.op == "load" for b in n.args[1:] for x in b.walk()):
                return a
    for c in fn.calls:
        if not set(c.loops) & loops and c.name == "load" and any(_per_thread(fl, g, fn) for g in c.guards):
            return c
    return None


def _per_thread(fl, cond, fn) -> bool:
    """Does a condition depend on the thread index (a per-element bound, not a tile-level one)?"""
    return any(n.kind == "name" and n.op.startswith("threadIdx") for n, _, _ in fl.walk(cond, fn, depth=5))
