"""Tensor-core main loops: MMA calls, accumulators, inline-asm text."""

from __future__ import annotations

from d2kgrade.static.checkutil import is_persistent, matches
from d2kgrade.static.dataflow import Flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function, Loop
from d2kgrade.static.patterns.config import tile_param_values
from d2kgrade.static.patterns.names import CUDA_MMA, DOTS, MMA_ASM


def mma_calls(facts: Facts, fn: Function) -> list[Call]:
    """Tensor-core calls of a kernel: ``tl.dot``, wmma/CuTe calls, inline ``mma``/``wgmma`` asm."""
    out = [c for c in fn.calls if c.name in DOTS or matches(c.name, CUDA_MMA)]
    if fn.lang == "cuda":
        asm_lines = {(t.line, t.end_line) for t in facts.tokens
                     if t.kind == "asm" and any(p in t.text for p in MMA_ASM)}
        out += [c for c in fn.calls if c.name == "asm" and any(a <= c.line <= b for a, b in asm_lines)]
    return out


def asm_text(facts: Facts, c: Call) -> str:
    if isinstance(c.expr.value, str):
        return c.expr.value
    return " ".join(t.text for t in facts.tokens if t.kind == "asm" and t.line <= c.line <= t.end_line)


def dot_accumulators(fl: Flow, fn: Function) -> dict[str, int]:
    """Loop-carried accumulators that a ``tl.dot`` (or an MMA) feeds -> the loop that carries them (the K loop)."""
    out: dict[str, int] = {}
    carried = fl.carried(fn)
    dots = [c for c in fn.calls if c.name in DOTS and c.loops]
    for c in dots:
        for lid in reversed(c.loops):
            loop = fn.loop(lid)
            for var, ups in carried.get(lid, {}).items():
                if var in out:
                    continue
                if any(any(n is c.expr for n, _, _ in fl.walk(a.value, fn, within=loop, depth=4)) for a in ups):
                    out[var] = lid
    return out


def main_loop(fl: Flow, facts: Facts, fn: Function) -> Loop | None:
    """The K loop: the loop of a dot accumulator (Triton), or the outermost non-persistent loop around the MMA
    calls (CUDA)."""
    accs = dot_accumulators(fl, fn)
    if accs:
        return fn.loop(next(iter(accs.values())))
    for c in mma_calls(facts, fn):
        for lid in c.loops:
            lp = fn.loop(lid)
            if lp is not None and not is_persistent(fl, fn, lp):
                return lp
    return None


def mma_values(fl: Flow, facts: Facts, fn: Function, e: Expr) -> list[int | None]:
    r = fl.root(e, fn)
    v = fl.fold(r, fn)
    if isinstance(v, int):
        return [v]
    if r.kind == "bin" and r.op == "//" and len(r.args) == 2:  # BN // 2
        d = fl.fold(r.args[1], fn)
        return [x // d if isinstance(x, int) and isinstance(d, int) and d else None
                for x in mma_values(fl, facts, fn, r.args[0])]
    if r.kind == "name" and r.op in fn.params:
        vals, _ = tile_param_values(fl, facts, fn, r.op)
        return vals or [None]
    return [None]
