"""Tensor-core and asynchronous-copy checks: ``tl.dot`` accumulating in a K loop, CUDA mma/wgmma/wmma/CUTLASS
paths, ``cp.async`` and TMA, low-precision dot operands."""

from __future__ import annotations

from d2kgrade.static.checkutil import as_list, code, matches, span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Expr, Function
from d2kgrade.static.lower import dtype_of
from d2kgrade.static.patterns.mma import cta_tile, mma_calls, mma_values
from d2kgrade.static.patterns.names import CP_ASYNC, CUDA_MMA_ASM, CUDA_MMA_CALLS, DOTS
from d2kgrade.static.patterns.roles import input_params_with_methods
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


@check("tl_dot_in_k_loop")
def tl_dot_in_k_loop(facts: Facts, lang: str, *, acc_dtype: str | None = "fp32",
                     min_tile: int | None = None) -> CheckResult:
    """``tl.dot`` inside a loop accumulating into a loop-carried tile (``acc = tl.dot(a, b, acc)`` or
    ``acc += tl.dot(a, b)``), with the accumulator created as ``acc_dtype`` before the loop
    (``tl.zeros([BM, BN], dtype=tl.float32)``; ``null`` skips the dtype test). With ``min_tile``, both
    dimensions of the accumulator reach it in some launch or autotune config (128: a 64x64 tile loads twice the
    bytes per FLOP of a 128x128 one); sizes the analysis cannot resolve are not held against the kernel."""
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
                    small = _small_tile(fl, facts, fn, values, min_tile) if min_tile else None
                    if small is not None:
                        best = f"tl.dot accumulates into {var}, whose tile is at most {small}, below {min_tile}"
                        continue
                    loop = fn.loop(lid)
                    return found(f"tl.dot accumulates into loop-carried {var} ({dt or 'any dtype'}) in {fn.name}",
                                 [span(d, "tl.dot"), Span(inits[0].line, inits[0].end_line, "accumulator")
                                  if inits else span(d), span(loop, "K loop")], 0.9)  # type: ignore[arg-type]
            if "created as" not in best and "below" not in best:
                best = f"tl.dot at line {d.line} does not accumulate into a loop-carried value"
    return missing(best, confidence=0.85)


def _small_tile(fl: Flow, facts: Facts, fn: Function, inits: list[Expr], min_tile: int) -> str | None:
    """``"BMxBN"`` (the largest known sizes) when the accumulator's ``tl.zeros`` shape has a dimension whose known
    values all stay below ``min_tile``; None when it reaches it or a size is unknown."""
    for v in inits:
        shape = v.kw("shape", 0) if v.kind == "call" and v.op in ("tl.zeros", "tl.full") else None
        if shape is None or shape.kind != "tuple" or len(shape.args) != 2:
            continue
        dims = [mma_values(fl, facts, fn, d) for d in shape.args]
        if any(not vals or None in vals for vals in dims):
            return None
        top = [max(v for v in vals if v is not None) for vals in dims]
        return f"{top[0]}x{top[1]}" if min(top) < min_tile else None
    return None


@check("cuda_tensor_core")
def cuda_tensor_core(facts: Facts, lang: str, *, min_tile: int | None = None) -> CheckResult:
    """Reachable CUDA code issues tensor-core instructions: ``wmma::mma_sync``, inline ``mma.sync``/``wgmma``
    PTX, or CuTe/CUTLASS GEMM calls. With ``min_tile``, a kernel issuing them has a CTA tile whose M and N sides
    (``BM``/``BN``, ``BLOCK_M``, ``kTileN``...: template arguments at the launches, ``constexpr``, ``#define``)
    reach it in some instantiation, as ``tl_dot_in_k_loop``'s ``min_tile`` asks of Triton; sides the analysis
    cannot resolve are not held against the kernel."""
    hits = [span(c, c.name) for f in code(facts, "cuda") for c in f.calls if matches(c.name, CUDA_MMA_CALLS)]
    hits += [span(t, "asm") for t in facts.reachable_tokens("asm")  # type: ignore[arg-type]
             if any(p in t.text for p in CUDA_MMA_ASM)]
    if not hits:
        return missing("no wmma/mma.sync/wgmma/CUTLASS tensor-core path in reachable CUDA code", confidence=0.85)
    if min_tile:
        small = _small_cta_tiles(facts, min_tile)
        if small:
            return missing(f"tensor-core CTA tile at most {small}, below {min_tile}x{min_tile}", confidence=0.8)
    return found("tensor-core instructions in CUDA code", hits[:4], 0.9)


def _small_cta_tiles(facts: Facts, min_tile: int) -> str | None:
    """``"BMxBN"`` when every CUDA kernel issuing MMAs has a known CTA tile with a side below ``min_tile`` in all
    its instantiations; None when one reaches it (or cannot be resolved)."""
    fl = flow(facts)
    small = []
    for fn in code(facts, "cuda"):
        if not mma_calls(facts, fn):
            continue
        tile = cta_tile(fl, facts, fn)
        dims = [tile.get("m"), tile.get("n")]
        if any(not vals or None in vals for vals in dims):
            return None
        top = [max(v for v in vals if v is not None) for vals in dims]  # type: ignore[union-attr]
        if min(top) >= min_tile:
            return None
        small.append(f"{top[0]}x{top[1]}")
    return small[0] if small else None


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
def dot_low_precision_operand(facts: Facts, lang: str, *, dtypes: list[str] | None = None,
                              accumulating: bool = True) -> CheckResult:
    """A ``tl.dot`` takes as its first operand a value converted in registers to a 16-bit type (``p.to(tl.bfloat16)``
    or ``p.to(v.dtype)``) while accumulating into a passed-in accumulator (its third argument or ``acc=``; ``acc +
    tl.dot(p, v)`` does not count; ``accumulating: false`` drops this): P feeds the tensor cores straight from
    registers."""
    want = set(dtypes or ["bf16", "fp16", "fp8"])
    fl = flow(facts)
    for fn in code(facts, "triton"):
        for c in fn.calls:
            if c.name != "tl.dot" or not c.expr.args:
                continue
            if accumulating and c.expr.kw("acc", 2) is None:  # acc + tl.dot(p, v): a fresh product tile first
                continue
            for n, _, _ in fl.walk(c.expr.args[0], fn, depth=2):
                if (n.kind == "cast" and n.op in want) or (n.kind == "call" and n.op == ".to"):
                    return found(f"tl.dot on a register-converted operand in {fn.name}", span(c, "tl.dot"), 0.85)
    return missing("no tl.dot whose first operand is converted to 16 bits in registers", confidence=0.8)


@check("dot_first_operand_from")
def dot_first_operand_from(facts: Facts, lang: str, *, input_index: int = 1) -> CheckResult:
    """The first operand of a ``tl.dot`` is loaded from the submission's input number ``input_index`` (0-based in
    ``kernel(...)``; pointer or tensor-descriptor loads), e.g. the weight tile first for a swap-AB small-M GEMM
    (``tl.dot(b_tile, tl.trans(a_tile))``)."""
    fl = flow(facts)
    entry = facts.functions.get("kernel")
    if entry is None or input_index >= len(entry.params):
        return CheckResult(None, "no kernel(...) signature to map inputs", confidence=0.0)
    target = entry.params[input_index]
    for fn in code(facts, "triton"):
        for c in fn.calls:
            if c.name not in DOTS or not c.expr.args:
                continue
            wanted = set(input_params_with_methods(fl, facts, fn, input_index))
            for n, f, _ in fl.walk(c.expr.args[0], fn, depth=4):
                if n.kind == "call" and n.op in ("tl.load", ".load") and f is fn:
                    ptr = n.kw("pointer", 0) if n.op == "tl.load" else n.recv
                    if ptr is not None and fl.bases(ptr, fn) & wanted:
                        return found(f"tl.dot in {fn.name} takes {target} as its first operand",
                                     span(c, "swapped operands"), 0.75)
    return missing(f"no tl.dot whose first operand comes from {target}", confidence=0.7)
