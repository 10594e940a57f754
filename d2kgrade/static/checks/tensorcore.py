"""Tensor-core and asynchronous-copy checks: ``tl.dot`` accumulating in a K loop, CUDA mma/wgmma/wmma/CUTLASS
paths, ``cp.async`` and TMA."""

from __future__ import annotations

from d2kgrade.static.checkutil import as_list, code, matches, span
from d2kgrade.static.dataflow import flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.lower import dtype_of
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

DOTS = {"tl.dot", "tl.dot_scaled"}
CUDA_MMA_CALLS = ["wmma::mma_sync", "nvcuda::wmma::mma_sync", "cute::gemm", "mma_sync", "__hmma*",
                  "cutlass::gemm::*", "cute::SM80_*", "cute::SM90_*", "warpgroup_arrive", "cute::warpgroup_*"]
CUDA_MMA_ASM = ["mma.sync", "wgmma.mma_async", "wmma.mma", "mma.sp"]
CP_ASYNC = {"cp.async": (["__pipeline_memcpy_async", "cuda::memcpy_async", "memcpy_async", "cp_async*",
                          "cute::SM80_CP_ASYNC*", "cuda::pipeline*"], ["cp.async.ca", "cp.async.cg", "cp.async.commit"]),
            "tma": (["cuTensorMapEncodeTiled", "cuTensorMapEncodeIm2col", "cute::SM90_TMA_*", "cute::make_tma_copy",
                     "cp_async_bulk_tensor*", "cuda::device::experimental::cp_async_bulk_tensor*"],
                    ["cp.async.bulk.tensor", "cp.async.bulk"])}


@check("tl_dot_in_k_loop")
def tl_dot_in_k_loop(facts: Facts, lang: str, *, acc_dtype: str | None = "fp32") -> CheckResult:
    """``tl.dot`` inside a loop accumulating into a loop-carried tile (``acc = tl.dot(a, b, acc)`` or
    ``acc += tl.dot(a, b)``), with the accumulator created as ``acc_dtype`` before the loop
    (``tl.zeros([BM, BN], dtype=tl.float32)``; ``null`` skips the dtype test)."""
    fl = flow(facts)
    best = "no tl.dot in reachable kernels"
    for fn in code(facts, "triton"):
        dots = [c for c in fn.calls if c.name in DOTS]
        if not dots:
            continue
        carried = fl.carried(fn)
        for d in dots:
            if not d.loops:
                best = f"tl.dot at line {d.line} is not inside a loop"
                continue
            for lid in reversed(d.loops):
                for var, ups in carried.get(lid, {}).items():
                    if not any(any(n is d.expr for n in a.value.walk()) for a in ups):
                        continue
                    inits = [a for a in fn.defs().get(var, []) if lid not in a.loops]
                    dt = None
                    values = [a.value for a in inits]
                    for _ in range(3):  # acc@helper = acc: follow plain copies to the tl.zeros
                        copies = [v for v in values if v.kind == "name"]
                        if not copies:
                            break
                        values = [v for v in values if v.kind != "name"] + [
                            a.value for v in copies for a in fn.defs().get(v.op, []) if lid not in a.loops]
                    for v in values:
                        if v.kind == "call" and v.op in ("tl.zeros", "tl.full", "tl.zeros_like"):
                            dt = dtype_of(v.kw("dtype", 1 if v.op == "tl.zeros" else 2))
                        elif v.kind == "cast":
                            dt = v.op
                        if dt is not None:
                            break
                    if acc_dtype is not None and dt != acc_dtype:
                        best = f"tl.dot accumulates into {var}, created as {dt or 'an unknown dtype'}, not {acc_dtype}"
                        continue
                    loop = fn.loop(lid)
                    return found(f"tl.dot accumulates into loop-carried {var} ({dt or 'any dtype'}) in {fn.name}",
                                 [span(d, "tl.dot"), Span(inits[0].line, inits[0].end_line, "accumulator")
                                  if inits else span(d), span(loop, "K loop")], 0.9)  # type: ignore[arg-type]
            if "created as" not in best:
                best = f"tl.dot at line {d.line} does not accumulate into a loop-carried value"
    return missing(best, confidence=0.85)


@check("cuda_tensor_core")
def cuda_tensor_core(facts: Facts, lang: str) -> CheckResult:
    """Reachable CUDA code issues tensor-core instructions: ``wmma::mma_sync``, inline ``mma.sync``/``wgmma``
    PTX, or CuTe/CUTLASS GEMM calls."""
    hits = [span(c, c.name) for f in code(facts, "cuda") for c in f.calls if matches(c.name, CUDA_MMA_CALLS)]
    hits += [span(t, "asm") for t in facts.reachable_tokens("asm")  # type: ignore[arg-type]
             if any(p in t.text for p in CUDA_MMA_ASM)]
    if hits:
        return found("tensor-core instructions in CUDA code", hits[:4], 0.9)
    return missing("no wmma/mma.sync/wgmma/CUTLASS tensor-core path in reachable CUDA code", confidence=0.85)


@check("async_copy")
def async_copy(facts: Facts, lang: str, *, kind: str = "cp.async") -> CheckResult:
    """Reachable CUDA code copies global to shared memory asynchronously: ``kind: cp.async`` (Ampere
    ``cp.async``/``__pipeline_memcpy_async``/``cuda::memcpy_async``) or ``tma`` (``cuTensorMapEncodeTiled``,
    ``cp.async.bulk.tensor``, CuTe TMA atoms)."""
    calls, asm = CP_ASYNC[kind]
    if kind == "cp.async":
        calls = calls + CP_ASYNC["tma"][0]
        asm = asm + CP_ASYNC["tma"][1]
    hits = [span(c, c.name) for f in facts.kernels("cuda") + facts.hosts("cuda") for c in f.calls
            if matches(c.name, calls)]
    hits += [span(t, "asm") for t in facts.reachable_tokens("asm")  # type: ignore[arg-type]
             if any(p in t.text for p in as_list(asm))]
    if hits:
        return found(f"asynchronous copies ({kind})", hits[:4], 0.9)
    return missing(f"no {kind} asynchronous copy in reachable CUDA code", confidence=0.85)


@check("dot_low_precision_operand")
def dot_low_precision_operand(facts: Facts, lang: str, *, dtypes: list[str] | None = None) -> CheckResult:
    """A ``tl.dot`` takes as its first operand a value converted in registers to a 16-bit type (``p.to(tl.bfloat16)``
    or ``p.to(v.dtype)``) while accumulating into a passed-in accumulator: P feeds the tensor cores straight from
    registers."""
    want = set(dtypes or ["bf16", "fp16", "fp8"])
    fl = flow(facts)
    for fn in code(facts, "triton"):
        for c in fn.calls:
            if c.name != "tl.dot" or not c.expr.args:
                continue
            for n, _, _ in fl.walk(c.expr.args[0], fn, depth=2):
                if (n.kind == "cast" and n.op in want) or (n.kind == "call" and n.op == ".to"):
                    return found(f"tl.dot on a register-converted operand in {fn.name}", span(c, "tl.dot"), 0.85)
    return missing("no tl.dot whose first operand is converted to 16 bits in registers", confidence=0.8)


@check("fused_epilogue")
def fused_epilogue(facts: Facts, lang: str, *, calls: list[str] | None = None) -> CheckResult:
    """After a ``tl.dot`` loop, the kernel stores a value computed from the loop's accumulator and a load made
    after the loop (a bias, loaded once per tile) and, when ``calls`` is given, passed through one of those calls
    (an activation: ``tl.exp2``, ``tl.sigmoid``, ``libdevice.tanh``...): the epilogue is fused into the GEMM."""
    fl = flow(facts)
    want = as_list(calls)
    for fn in code(facts, "triton"):
        carried = fl.carried(fn)
        accs: dict[str, int] = {}
        for c in fn.calls:
            if c.name in DOTS and c.loops:
                for lid in c.loops:
                    for var, ups in carried.get(lid, {}).items():
                        if any(any(n is c.expr for n in a.value.walk()) for a in ups):
                            accs[var] = lid
        if not accs:
            continue
        for kind, st, _ in fl.memory_ops(fn):
            if kind != "store":
                continue
            v = fl.stored_value(st)
            if v is None:
                continue
            acc = [a for a, lid in accs.items() if lid not in st.loops and fl.refs(v, fn, a)]
            if not acc:
                continue
            lid = accs[acc[0]]
            late = [n for n, f, _ in fl.walk(v, fn, depth=6) if f is fn and n.kind == "call" and n.op == "tl.load"]
            late = [n for n in late if not any(c.expr is n and lid in c.loops for c in fn.calls)]
            act = not want or any(n.kind == "call" and matches(n.op, want) for n, _, _ in fl.walk(v, fn, depth=6))
            if late and act:
                return found(f"epilogue fused after the K loop in {fn.name}",
                             [span(late[0], "per-tile load"), span(st, "one store")], 0.8)
    return missing("no store after the K loop combining the accumulator with a per-tile load"
                   + (f" and {'/'.join(want)}" if want else ""), confidence=0.75)


@check("dot_first_operand_from")
def dot_first_operand_from(facts: Facts, lang: str, *, input_index: int = 1) -> CheckResult:
    """The first operand of a ``tl.dot`` is loaded from the submission's input number ``input_index`` (0-based in
    ``kernel(...)``), e.g. the weight tile first for a swap-AB small-M GEMM (``tl.dot(b_tile, tl.trans(a_tile))``)."""
    fl = flow(facts)
    entry = facts.functions.get("kernel")
    if entry is None or input_index >= len(entry.params):
        return CheckResult(None, "no kernel(...) signature to map inputs", confidence=0.0)
    target = entry.params[input_index]
    for fn in code(facts, "triton"):
        for c in fn.calls:
            if c.name not in DOTS or not c.expr.args:
                continue
            for n, f, _ in fl.walk(c.expr.args[0], fn, depth=4):
                if n.kind == "call" and n.op in ("tl.load", ".load") and f is fn:
                    ptr = n.kw("pointer", 0) if n.op == "tl.load" else n.recv
                    for b in (fl.bases(ptr, fn) if ptr is not None else set()):
                        for src, caller in fl.param_sources(fn, b):
                            if any(x.kind == "name" and x.op == target for x, _, _ in fl.walk(src, caller, depth=6)):
                                return found(f"tl.dot in {fn.name} takes {target} as its first operand",
                                             span(c, "swapped operands"), 0.75)
    return missing(f"no tl.dot whose first operand comes from {target}", confidence=0.7)


@check("cuda_unmasked_mainloop")
def cuda_unmasked_mainloop(facts: Facts, lang: str) -> CheckResult:
    """The CUDA loop that feeds the tensor cores (a loop issuing MMAs or asynchronous copies) loads whole tiles:
    no global load or copy inside it sits under a per-thread bounds test (a condition or ``?:`` that reads
    ``threadIdx``), so edge tiles are handled by a predicated tail outside the loop, TMA zero fill, or padding.
    Tile-level conditions (``if (next < k_tiles)`` around a prefetch) are not masks."""
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        mma_loops = {lid for c in fn.calls if matches(c.name, CUDA_MMA_CALLS) or matches(c.name, CP_ASYNC["cp.async"][0])
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


def _predicated_tail(fl, fn, loops: set[int]):  # noqa: ANN001, ANN202
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


def _per_thread(fl, cond, fn) -> bool:  # noqa: ANN001
    """Does a condition depend on the thread index (a per-element bound, not a tile-level one)?"""
    return any(n.kind == "name" and n.op.startswith("threadIdx") for n, _, _ in fl.walk(cond, fn, depth=5))
