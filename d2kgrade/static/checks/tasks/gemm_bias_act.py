"""Static checks of task ``gemm_bias_act``: the ones only its rubric (``rubrics/gemm_bias_act.yaml``) uses.

- ``bias_vector_epilogue``
- ``epilogue_activation``
- ``epilogue_fp32_activation``
- ``epilogue_subtiles``
- ``fast_sigmoid_division``
- ``gelu_sigmoid_form``
- ``m_tile_options``
- ``persistent_overlap``
"""

from __future__ import annotations

import math

from d2kgrade.static.checkutil import code, is_persistent, span
from d2kgrade.static.dataflow import EXPS, Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function, Loop, end_pos, pos
from d2kgrade.static.patterns.access import computed_from
from d2kgrade.static.patterns.config import arange_dims, tile_param_values
from d2kgrade.static.patterns.mma import asm_text, dot_accumulators, main_loop
from d2kgrade.static.patterns.names import expr_key, low_precision_cast
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

EXP_CALLS = EXPS | {"libdevice.exp", "libdevice.exp2", "libdevice.fast_expf", "__expf", "expf", "exp2f"}


EXP2_CALLS = {"tl.exp2", "libdevice.exp2", "exp2f", "exp2", "__exp2f", "h2exp2", "hexp2", "fast_exp2"}


SIGMOIDS = {"tl.sigmoid"}


ERF_TANH = ["libdevice.tanh", "libdevice.erf", "libdevice.tanhf", "libdevice.erff", "tl.erf", "tanhf", "erff",
            "tanh", "erf", "__tanhf", "htanh", "h2tanh"]


ACTIVATIONS = EXP_CALLS | SIGMOIDS | set(ERF_TANH) | {"tl.inline_asm_elementwise", "asm"}


FAST_DIVS = {"tl.fdiv": 1, "__fdividef": 1, "fdividef": 1, "libdevice.fast_dividef": 1, "__frcp_rn": 0,
             "__frcp_rz": 0, "__frcp_rd": 0, "__frcp_ru": 0, "libdevice.fast_rcpf": 0}


DIVISIONS = {"/": 1, **FAST_DIVS, "tl.div_rn": 1, "libdevice.div_rn": 1, "__fdiv_rn": 1, "__fdiv_rz": 1,
             "libdevice.rcp_rn": 0}


FAST_ASM = ("tanh.approx", "rcp.approx", "ex2.approx")


SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


LOG2E = 1.0 / math.log(2.0)


def _after(x: Call, loop: Loop) -> bool:
    return loop.id not in x.loops and pos(x) > end_pos(loop) - 1e-9 and x.line > 0


def _stores(fl: Flow, fn: Function) -> list[Call]:
    return [c for kind, c, _ in fl.memory_ops(fn) if kind == "store"]


def _is_activation(facts: Facts, n: Expr) -> bool:
    if n.kind != "call":
        return False
    if n.op == "tl.inline_asm_elementwise":
        a = n.kw("asm", 0)
        return a is not None and isinstance(a.value, str) and any(p in a.value for p in ("tanh", "ex2", "rcp"))
    if n.op == "asm":
        return any(p in str(n.value) for p in ("tanh", "ex2"))
    return n.op in ACTIVATIONS


Poly = tuple[str | None, dict[int, float]]


def _pmul(a: Poly, b: Poly) -> Poly | None:
    var = a[0] if a[0] is not None else b[0]
    if a[0] is not None and b[0] is not None and a[0] != b[0]:
        return None
    out: dict[int, float] = {}
    for pa, ca in a[1].items():
        for pb, cb in b[1].items():
            if pa + pb > 6:
                return None
            out[pa + pb] = out.get(pa + pb, 0.0) + ca * cb
    return var, out


def _padd(a: Poly, b: Poly, sign: float = 1.0) -> Poly | None:
    if a[0] is not None and b[0] is not None and a[0] != b[0]:
        return None
    out = dict(a[1])
    for p, c in b[1].items():
        out[p] = out.get(p, 0.0) + sign * c
    return (a[0] if a[0] is not None else b[0]), out


def _poly(fl: Flow, e: Expr, fn: Function, env=None, depth: int = 0) -> Poly | None:
    """``e`` as a polynomial in one variable (a name, or an opaque sub-expression), constants folded; None when
    it is not one."""
    if depth > 24:
        return None
    k = e.kind
    v = fl.fold(e, fn, env)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return None, {0: float(v)}
    if k == "name":
        if env and e.op in env:
            ex, ef, eenv = env[e.op]
            return _poly(fl, ex, ef, eenv, depth + 1)
        defs = fl.defs(e.op, fn)
        if len(defs) == 1 and defs[0].index is None:
            p = _poly(fl, defs[0].value, fn, env, depth + 1)
            if p is not None:
                return p
        return e.op, {1: 1.0}
    if k == "cast" and e.args:
        return _poly(fl, e.args[0], fn, env, depth + 1)
    if k == "call" and e.op == ".to" and e.recv is not None:
        return _poly(fl, e.recv, fn, env, depth + 1)
    if k == "unary" and e.args and e.op in ("-", "+"):
        p = _poly(fl, e.args[0], fn, env, depth + 1)
        if p is None or e.op == "+":
            return p
        return p[0], {q: -c for q, c in p[1].items()}
    if k == "bin" and len(e.args) == 2 and e.op in ("+", "-", "*", "/"):
        a = _poly(fl, e.args[0], fn, env, depth + 1)
        b = _poly(fl, e.args[1], fn, env, depth + 1)
        if a is None or b is None:
            return None
        if e.op == "+":
            return _padd(a, b)
        if e.op == "-":
            return _padd(a, b, -1.0)
        if e.op == "*":
            return _pmul(a, b)
        if b[0] is None and b[1].get(0):
            return a[0], {q: c / b[1][0] for q, c in a[1].items()}
        return None
    if k == "call" and e.op in ("tl.fma", "fmaf", "__fmaf_rn", "fma") and len(e.args) == 3:
        ab = None
        a = _poly(fl, e.args[0], fn, env, depth + 1)
        b = _poly(fl, e.args[1], fn, env, depth + 1)
        c = _poly(fl, e.args[2], fn, env, depth + 1)
        if a is not None and b is not None and c is not None:
            ab = _pmul(a, b)
        return _padd(ab, c) if ab is not None and c is not None else None
    if k in ("sub", "call", "attr", "ternary"):
        return expr_key(e), {1: 1.0}
    return None


def _gelu_scale(fl: Flow, e: Expr, fn: Function, env=None) -> float | None:
    """``c`` when ``e`` is c * (x + 0.044715 x^3) in one variable x, else None."""
    p = _poly(fl, e, fn, env)
    if p is None or p[0] is None:
        return None
    c1, c3 = p[1].get(1, 0.0), p[1].get(3, 0.0)
    if not c1 or abs(c3 / c1 - 0.044715) > 1e-3 * 0.044715 * 10:
        return None
    if any(abs(c) > 1e-6 * abs(c1) for q, c in p[1].items() if q not in (1, 3)):
        return None
    return c1


def _close(a: float, b: float, rel: float = 2e-3) -> bool:
    return abs(a - b) <= rel * abs(b)


def _denominators(fl: Flow, fn: Function) -> list[tuple[Expr, Expr | None, Expr, bool]]:
    """Divisions and reciprocals of a kernel: (node, numerator or None, denominator, fast); an inline-asm
    ``rcp.approx`` is a fast reciprocal."""
    out = []
    exprs = [a.value for a in fn.assigns] + [c.expr for c in fn.calls] + list(fn.returns)
    seen: set[int] = set()
    for root in exprs:
        for n in root.nodes():
            if id(n) in seen:
                continue
            seen.add(id(n))
            if n.kind == "bin" and n.op == "/" and len(n.args) == 2:
                out.append((n, n.args[0], n.args[1], False))
            elif n.kind == "call" and n.op in DIVISIONS:
                i = DIVISIONS[n.op]
                if i >= len(n.args):
                    continue
                fast = n.op in FAST_DIVS
                if n.op == "tl.fdiv":  # ieee_rounding defaults to False: div.full.f32
                    ieee = n.kw("ieee_rounding", 2)
                    fast = ieee is None or ieee.value is False or fl.fold(ieee, fn) == 0
                out.append((n, n.args[0] if i == 1 else None, n.args[i], fast))
            elif n.kind == "call" and n.op == "tl.inline_asm_elementwise":  # rcp.approx.ftz.f32 $0, $1
                a, args = n.kw("asm", 0), n.kw("args", 2)
                if a is not None and isinstance(a.value, str) and "rcp.approx" in a.value and args is not None:
                    ops = args.args if args.kind in ("tuple", "list") else (args,)
                    if ops:
                        out.append((n, None, ops[0], True))
    return out


def _reaches(fl: Flow, e: Expr, fn: Function, target: Expr, depth: int = 4) -> bool:
    return any(n is target for n, _, _ in fl.walk(e, fn, depth=depth))


def _sigmoid_gelus(fl: Flow, facts: Facts, fn: Function) -> list[tuple[Expr, str, Expr | None]]:
    """GELU evaluations of the sigmoid (or hardware-tanh) form in ``fn``: (call, kind, division or None)."""
    out = []
    divs = None
    for c in fn.calls:
        n = c.expr
        if n.op in EXP_CALLS and n.args:
            s = _gelu_scale(fl, n.args[0], fn)
            want = -2.0 * SQRT_2_OVER_PI * (LOG2E if n.op in EXP2_CALLS else 1.0)
            if s is None or not _close(s, want):
                continue
            divs = divs if divs is not None else _denominators(fl, fn)
            for d, num, den, fast in divs:
                if _reaches(fl, den, fn, n) and (num is None or not _reaches(fl, num, fn, n)):
                    out.append((n, "exp", d))
                    break
        elif n.op in SIGMOIDS and n.args:
            s = _gelu_scale(fl, n.args[0], fn)
            if s is not None and _close(s, 2.0 * SQRT_2_OVER_PI):
                out.append((n, "sigmoid", None))
        elif n.op == "tl.inline_asm_elementwise":
            a = n.kw("asm", 0)
            args = n.kw("args", 2)
            if a is None or not isinstance(a.value, str) or "tanh.approx" not in a.value or args is None:
                continue
            ops = args.args if args.kind == "tuple" else (args,)
            if any((s := _gelu_scale(fl, x, fn)) is not None and _close(s, SQRT_2_OVER_PI) for x in ops):
                out.append((n, "tanh.approx", None))
        elif n.op == "asm" and "tanh.approx" in asm_text(facts, c):
            if any((s := _gelu_scale(fl, x, fn)) is not None and _close(s, SQRT_2_OVER_PI) for x in n.args):
                out.append((n, "tanh.approx", None))
    return out


@check("gelu_sigmoid_form")
def gelu_sigmoid_form(facts: Facts, lang: str) -> CheckResult:
    """tanh-GELU is evaluated as x * sigmoid(2z), z = sqrt(2/pi) * (x + 0.044715 x^3): an exponential whose
    argument is -2z (``tl.exp``, ``__expf``) or -2z*log2(e) (``tl.exp2``, ``exp2f``; the constants may be folded
    in any arrangement, the polynomial is evaluated) sits in the denominator of a division or reciprocal
    (``x / (1 + e)``, ``tl.fdiv``, ``__frcp_rn``, inline-asm ``rcp.approx``) whose numerator does not hold it (a tanh built as
    (e - 1) / (e + 1) does not count); or ``tl.sigmoid(2z)``; or a hardware ``tanh.approx`` of z through inline asm."""
    fl = flow(facts)
    for fn in code(facts, lang):
        hits = _sigmoid_gelus(fl, facts, fn)
        if hits:
            n, kind, d = hits[0]
            spans = [span(n, kind)] + ([span(d, "division")] if d is not None else [])
            return found(f"GELU as x * sigmoid(2z) ({kind}) in {fn.name}", spans, 0.85)
    return missing("no exponential of -2z in a sigmoid denominator, tl.sigmoid(2z) or tanh.approx(z) with the "
                   "GELU polynomial z = sqrt(2/pi) (x + 0.044715 x^3)", confidence=0.8)


@check("fast_sigmoid_division")
def fast_sigmoid_division(facts: Facts, lang: str) -> CheckResult:
    """The activation's sigmoid uses a fast division or reciprocal: ``tl.fdiv(..., ieee_rounding=False)``,
    ``__fdividef``, ``__frcp_rn`` (or ``libdevice.fast_dividef``) whose denominator holds an exponential, or a
    hardware ``tanh.approx``/``ex2.approx``+``rcp.approx`` through inline asm. A plain ``/`` or ``tl.sigmoid`` is
    an IEEE division."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for d, num, den, fast in _denominators(fl, fn):
            if not fast:
                continue
            if any(n.kind == "call" and n.op in EXP_CALLS for n, _, _ in fl.walk(den, fn, depth=4)):
                return found(f"fast division of a sigmoid in {fn.name}", span(d, d.op), 0.85)
        for c in fn.calls:
            if c.name == "tl.inline_asm_elementwise":
                a = c.expr.kw("asm", 0)
                if a is not None and isinstance(a.value, str) and any(p in a.value for p in FAST_ASM):
                    return found(f"hardware approximation through inline asm in {fn.name}", span(c, "asm"), 0.85)
    if lang in ("cuda", "any"):
        hits = [t for t in facts.reachable_tokens("asm") if any(p in t.text for p in ("tanh.approx", "rcp.approx"))]
        if hits:
            return found("tanh.approx / rcp.approx inline asm",
                         [span(t, "asm") for t in hits[:2]], 0.85)  # type: ignore[arg-type]
    return missing("no fast division (tl.fdiv ieee_rounding=False, __fdividef, __frcp_rn) of an exponential "
                   "sum, nor tanh.approx inline asm", confidence=0.8)


def _epilogue_activations(fl: Flow, facts: Facts, fn: Function) -> list[tuple[Call, Expr, Loop]]:
    """(store, activation call, K loop): stores after the K loop whose value passes through an activation."""
    loop = main_loop(fl, facts, fn)
    if loop is None:
        return []
    out = []
    for st in _stores(fl, fn):
        if not _after(st, loop):
            continue
        v = fl.stored_value(st)
        if v is None:
            continue
        for n in computed_from(fl, v, fn, set()):
            if _is_activation(facts, n):
                out.append((st, n, loop))
                break
    return out


LOADS = ("tl.load", "load", ".load")  # pointer loads, CUDA reads, tensor-descriptor loads (b_desc.load([n0]))


def _late_loads(fl: Flow, fn: Function, nodes: list[Expr], loop: Loop, *, inside: bool = False) -> list[Call]:
    """Loads among ``nodes`` made after the K loop, outside it (``inside``: or in it, a value that joins the
    accumulator only after the loop)."""
    out = []
    for n in nodes:
        if n.kind == "call" and n.op in LOADS:
            c = next((x for x in fn.calls if x.expr is n), None)
            if c is not None and (inside or (loop.id not in c.loops and pos(c) >= end_pos(loop))):
                out.append(c)
    return out


@check("epilogue_activation")
def epilogue_activation(facts: Facts, lang: str, *, late_load: bool = True) -> CheckResult:
    """The kernel that runs the GEMM's K loop (``tl.dot`` accumulating, or CUDA MMAs in a loop) stores, after the
    loop, values computed from its accumulator (Triton: the carried ``tl.dot`` accumulator is read) and passed
    through an activation (an exponential, ``tl.sigmoid``, tanh/erf, inline-asm ``tanh.approx``) and, with
    ``late_load``, combined after the loop with a loaded value that does not come through the accumulator (the
    bias, by pointer or descriptor, loaded after the loop or, wastefully, in it): bias and activation fused into
    the GEMM."""
    fl = flow(facts)
    reason = "no store after a K loop of values passed through an activation"
    for fn in code(facts, lang):
        accs = set(dot_accumulators(fl, fn))
        for st, act, loop in _epilogue_activations(fl, facts, fn):
            nodes = list(computed_from(fl, fl.stored_value(st), fn, accs))  # type: ignore[arg-type]
            if fn.lang == "py" and not any(n.kind == "name" and n.op in accs for n in nodes):
                reason = f"the activation stored by {fn.name} is not applied to its tl.dot accumulator"
                continue
            late = _late_loads(fl, fn, nodes, loop, inside=True)
            if late_load and not late:
                reason = f"{fn.name} applies the activation, but no value loaded after the K loop (a bias) joins it"
                continue
            return found(f"bias and activation fused after the K loop of {fn.name}",
                         [span(act, "activation")] + [span(c, "per-tile load") for c in late[:1]]
                         + [span(st, "store")], 0.8)
    return missing(reason, confidence=0.75)


@check("epilogue_fp32_activation")
def epilogue_fp32_activation(facts: Facts, lang: str) -> CheckResult:
    """The kernel that runs the GEMM's K loop applies the activation after the loop to values computed from its
    fp32 accumulator (Triton: the ``tl.dot`` accumulator is reached; CUDA: after the MMA loop) with no conversion
    to a 16-bit type on the way, and stores the activated values: bias and GELU in fp32, one rounding at the store."""
    fl = flow(facts)
    reason = "no activation applied after a K loop before a store"
    for fn in code(facts, lang):
        accs = set(dot_accumulators(fl, fn))
        for st, act, loop in _epilogue_activations(fl, facts, fn):
            args = list(act.args) + list((act.kwargs or {}).values())
            nodes = [n for a in args for n in computed_from(fl, a, fn, accs)]
            if fn.lang == "py" and not any(n.kind == "name" and n.op in accs for n in nodes):
                reason = f"the activation in {fn.name} does not read the tl.dot accumulator"
                continue
            bad = [n for n in nodes if low_precision_cast(fl, n, fn)]
            if bad:
                reason = f"the accumulator of {fn.name} is rounded to 16 bits before the activation"
                return missing(reason, [span(bad[0], "rounded before the nonlinearity"), span(act, "activation")],
                               0.8)
            return found(f"activation on the fp32 accumulator after the K loop of {fn.name}, rounded at the store",
                         [span(act, "fp32 activation"), span(st, "store")], 0.8)
    return missing(reason, confidence=0.75)


def _split_parts(fl: Flow, fn: Function) -> set[str]:
    """Names holding a part of a split tile (``lo, hi = tl.split(acc)``)."""
    return {t for a in fn.assigns for t in a.targets
            if a.value.kind == "call" and a.value.op in ("tl.split", ".split") and a.index is not None}


@check("epilogue_subtiles")
def epilogue_subtiles(facts: Facts, lang: str) -> CheckResult:
    """After the K loop, the activation and the store run per sub-tile of the accumulator: at least two stores (or
    one store in a loop over sub-tiles) each store an activation applied to a part of the accumulator, a
    ``tl.split`` half or one of several half-width accumulators carried through the K loop. Splitting the tile only
    for the stores, after a whole-tile activation, does not count."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        accs = dot_accumulators(fl, fn)
        if not accs:
            continue
        parts = _split_parts(fl, fn)
        per_store = []
        for st, act, loop in _epilogue_activations(fl, facts, fn):
            args = list(act.args) + list((act.kwargs or {}).values())
            nodes = [n for a in args for n in computed_from(fl, a, fn, set(accs) | parts)]
            names = {n.op for n in nodes if n.kind == "name"}
            whole = any(n.kind == "call" and n.op in ("tl.split", ".split", "tl.join", "tl.reshape", ".reshape")
                        for n in nodes)
            if names & parts or (len(names & set(accs)) >= 1 and len(accs) >= 2 and not whole):
                per_store.append((st, act))
        sites = {id(st.expr) for st, _ in per_store}
        in_loop = [st for st, _ in per_store if any(lid not in accs.values() for lid in st.loops)
                   and st.loops and fn.loop(st.loops[-1]) is not None
                   and fn.loop(st.loops[-1]).kind in ("tl.static_range", "range", "tl.range")
                   and not is_persistent(fl, fn, fn.loop(st.loops[-1]))]  # type: ignore[arg-type]
        if len(sites) >= 2 or in_loop:
            st, act = per_store[0]
            return found(f"activation and store per sub-tile in {fn.name}",
                         [span(act, "activation on a sub-tile"), span(st, "sub-tile store")]
                         + [span(s, "sub-tile store") for s, _ in per_store[1:2]], 0.8)
    if lang != "triton" and "cuda" in facts.languages:
        hits = [t for t in facts.tokens if t.kind in ("cutlass", "type") and "EpilogueTile" in t.text]
        if hits:
            return found("CUTLASS epilogue tile", [span(hits[0], "EpilogueTile")], 0.6)  # type: ignore[arg-type]
    return missing("the activation and the store run on the whole accumulator tile", confidence=0.75)


@check("persistent_overlap")
def persistent_overlap(facts: Facts, lang: str) -> CheckResult:
    """A persistent loop over tiles (``tl.range(pid, n, NUM_SMS)``) that lets the next tile's loads overlap the
    current epilogue: ``flatten=True`` or ``warp_specialize=True`` on it (or on a loop inside it); CUDA: a
    warp-specialized ping-pong / cooperative CUTLASS kernel schedule."""
    fl = flow(facts)
    plain = None
    for fn in code(facts, "triton"):
        for lp in fn.loops:
            if not is_persistent(fl, fn, lp):
                continue
            plain = plain or lp
            for inner in [lp] + [x for x in fn.loops if x.parent == lp.id]:
                for opt in ("flatten", "warp_specialize"):
                    e = inner.options.get(opt)
                    if e is not None and (e.value is True or fl.fold(e, fn) in (1, True)):
                        return found(f"persistent loop with {opt}=True in {fn.name}", span(inner, opt), 0.85)
    if lang != "triton":
        hits = [t for t in facts.reachable_tokens() if "WarpSpecializedPingpong" in t.text
                or "WarpSpecializedCooperative" in t.text]
        if hits:
            return found("warp-specialized persistent CUTLASS schedule",
                         [span(hits[0], "schedule")], 0.75)  # type: ignore[arg-type]
    if plain is not None:
        return missing("persistent loop without flatten/warp_specialize: tiles run back to back",
                       [span(plain, "persistent loop")], 0.75)
    return missing("no persistent loop over tiles", confidence=0.8)


@check("bias_vector_epilogue")
def bias_vector_epilogue(facts: Facts, lang: str) -> CheckResult:
    """After the K loop (outside it), the kernel loads a vector indexed along N only (one ``tl.arange``, no
    ``[:, None]`` row axis, or a 1-D tensor descriptor) and combines it, broadcast, with the accumulator into the stored value: a bias loaded
    once per tile. CUDA: a global load placed after the MMA loop outside every loop (once per thread per tile)."""

    fl = flow(facts)
    for fn in code(facts, lang):
        loop = main_loop(fl, facts, fn)
        if loop is None:
            continue
        accs = set(dot_accumulators(fl, fn))
        for st in _stores(fl, fn):
            if not _after(st, loop):
                continue
            v = fl.stored_value(st)
            if v is None:
                continue
            nodes = list(computed_from(fl, v, fn, accs))
            if fn.lang == "py" and not any(n.kind == "name" and n.op in accs for n in nodes):
                continue
            for n in nodes:
                if n.kind != "call" or n.op not in LOADS:
                    continue
                c = next((x for x in fn.calls if x.expr is n), None)
                if c is None or loop.id in c.loops or pos(c) < end_pos(loop):
                    continue
                ptr = n.recv if n.op == ".load" else n.kw("pointer", 0)  # a descriptor's block_shape gives its rank
                if fn.lang == "py":
                    if ptr is None or arange_dims(fl, ptr, fn) != 1:
                        continue
                elif c.loops:
                    continue
                return found(f"{fn.name} loads a vector once after the K loop and adds it to the accumulator",
                             [span(c, "per-tile vector load"), span(st, "store")], 0.8)
    return missing("no vector loaded once after the K loop and broadcast into the accumulator", confidence=0.75)


@check("m_tile_options")
def m_tile_options(facts: Facts, lang: str, *, values: list[int], dim: int = 0) -> CheckResult:
    """The GEMM's M tile (dimension ``dim`` of the ``tl.dot`` accumulator, ``tl.zeros((BM, BN))``) is chosen per
    problem shape, by the autotuner (configs with a ``key``) or by a host condition, among options that include
    one of ``values`` (BM = 64 for small M)."""
    fl = flow(facts)
    reason = "no tl.dot accumulator with a tile size chosen per shape"
    for fn in code(facts, "triton"):
        for var in dot_accumulators(fl, fn):
            inits = [a for a in fn.defs().get(var, []) if a.value.kind == "call" and a.value.op == "tl.zeros"]
            for a in inits:
                shape = a.value.kw("shape", 0)
                if shape is None or shape.kind != "tuple" or dim >= len(shape.args):
                    continue
                r = fl.root(shape.args[dim], fn)
                if r.kind != "name" or r.op not in fn.params:
                    continue
                vals, per_shape = tile_param_values(fl, facts, fn, r.op)
                known = {v for v in vals if v is not None}
                if per_shape and known & set(values):
                    return found(f"{fn.name}: {r.op} chosen per shape among {sorted(known)}",
                                 Span(a.line, a.end_line, f"{r.op} tile"), 0.8)
                reason = (f"{fn.name}: {r.op} takes {sorted(known) or 'unknown values'}"
                          + ("" if per_shape else ", the same for every shape"))
    return missing(reason, confidence=0.75)
