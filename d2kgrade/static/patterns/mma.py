"""Tensor-core main loops: MMA calls, accumulators, inline-asm text."""

from __future__ import annotations

import re

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


_TILE_AXES = {axis: {f.format(axis) for f in ("b{}", "block{}", "blocksize{}", "tile{}", "tilesize{}", "cta{}",
                                                 "ctatile{}", "blk{}", "tb{}", "threadblock{}", "{}tile", "{}block")}
              for axis in ("m", "n")}


def tile_axis(name: str) -> str | None:
    """``"m"``/``"n"`` when a CUDA identifier names the CTA tile's M or N side (``BM``, ``BLOCK_N``, ``kTileM``,
    ``CTA_N``...), else None. Warp tiles (``WM``) and the K tile are not CTA output tiles."""
    n = name.split("::")[-1]
    if re.match(r"k[A-Z]", n):
        n = n[1:]
    n = n.lower().replace("_", "")
    return next((axis for axis, names in _TILE_AXES.items() if n in names), None)


def template_order(facts: Facts, fn: Function) -> list[str]:
    """CUDA: the template parameters of ``fn`` in declaration order (read from the ``template <...>`` line(s)
    just above the function, since :attr:`Function.constexprs` is a set)."""
    if not fn.constexprs:
        return []
    head = " ".join(facts.lines[max(fn.line - 4, 0):fn.line])
    m = None
    for m in re.finditer(r"template\s*<([^<>]*)>", head):
        pass
    if m is None:
        return []
    out = [re.findall(r"\w+", p)[-1] for p in m.group(1).split(",") if re.findall(r"\w+", p)]
    return out if set(out) <= fn.constexprs else []


def template_arg_values(facts: Facts, fn: Function, p: str, depth: int = 0) -> list[int | None]:
    """CUDA: values the template parameter ``p`` of ``fn`` takes at its launches (``k<128, 256><<<...>>>``) and
    calls (``launch<128, 128, 64>(a, b)``), followed through a host template whose own parameter is forwarded
    (``auto k = gemm<BM, BN>;`` inside ``template <int BM, int BN> void launch(...)``)."""
    order = template_order(facts, fn)
    if p not in order or depth > 2:
        return [None]
    i = order.index(p)
    written = [la.template for la in facts.launches if la.kernel == fn.key and la.template]
    written += [c.expr.value for g in facts.functions.values() for c in g.calls
                if c.name.split("::")[-1] == fn.key[3:] and isinstance(c.expr.value, str)]
    callers = {la.caller for la in facts.launches if la.kernel == fn.key}
    out: list[int | None] = []
    for t in written:
        args = [a.strip() for a in t.split(",")]
        if i >= len(args):
            out.append(None)
            continue
        a = args[i]
        if re.fullmatch(r"\d+", a):
            out.append(int(a))
        elif isinstance(facts.consts.get(a), int):
            out.append(facts.consts[a])
        else:
            fwd = [facts.functions[k] for k in callers if k in facts.functions and a in facts.functions[k].constexprs]
            out += [v for g in fwd for v in template_arg_values(facts, g, a, depth + 1)] or [None]
    return out or [None]


def cta_tile(fl: Flow, facts: Facts, fn: Function) -> dict[str, list[int | None]]:
    """CUDA: values of the CTA tile's M and N sides (``"m"``/``"n"`` -> values) read from the identifiers the
    kernel uses that name them (``BM``, ``BLOCK_N``...): template arguments at the launches, a ``constexpr`` or
    ``#define``, a local ``constexpr int BM = 128``. A side the kernel never names as a compile-time constant is
    left out (``tile_m = blockIdx.y`` is an index); a template argument that cannot be resolved is None."""
    names: set[str] = set()
    exprs = [a.value for a in fn.assigns] + [c.expr for c in fn.calls]
    exprs += [e for lp in fn.loops for e in (lp.start, lp.stop, lp.step) if e is not None]
    for e in exprs:
        names |= {n.op for n in e.walk() if n.kind == "name"}
    names |= {t for a in fn.assigns for t in a.targets}
    out: dict[str, list[int | None]] = {}
    for n in sorted(names):
        axis = tile_axis(n)
        if axis is None:
            continue
        if n in fn.constexprs:
            vals = template_arg_values(facts, fn, n)
        else:
            local = [fl.fold(a.value, fn) for a in fn.defs().get(n, [])]
            if local:
                if not all(isinstance(v, int) for v in local):
                    continue  # a run-time local (tile_m = blockIdx.y): a tile index, not its size
                vals = list(local)
            elif isinstance(facts.consts.get(n), int) and not isinstance(facts.consts.get(n), bool):
                vals = [facts.consts[n]]
            else:
                continue
        out.setdefault(axis, []).extend(vals)
    return out
