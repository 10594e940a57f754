"""GEMM-family checks: fused epilogues (GELU form, fast division, fp32 math, sub-tiles, bias vectors), skinny and
split-K GEMMs (weights streamed once, fp32 partial reductions, Stream-K ranges, operand eviction hints), and
block-scaled fp8 GEMMs (per-block promotion, scale granularity, fresh fp8 MMAs, K-major operands).

Most of these read the *roles* of a kernel's pointers from the submission's signature: ``kernel(X, W, b)``,
``kernel(A, B)``, ``kernel(A, B, a_s, b_s)``. :func:`input_params` maps a kernel parameter back to the input of
``kernel(...)`` (or of the launching C++ host function of a ``.cu`` file) whose tensor it receives, through host
variables, helper launchers, ``.contiguous()``/``.data_ptr()``/``TensorDescriptor.from_tensor`` and the like, so
"loads of B" means loads through the pointer the weights arrive in, whatever it is called.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from d2kgrade.static.checkutil import code, is_persistent, matches, span
from d2kgrade.static.dataflow import EXPS, Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function, Loop, end_pos, pos
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

DOTS = {"tl.dot", "tl.dot_scaled"}
CUDA_MMA = ["wmma::mma_sync", "nvcuda::wmma::mma_sync", "mma_sync", "cute::gemm", "__hmma*", "cutlass::gemm::*"]
MMA_ASM = ("mma.sync", "wgmma.mma_async", "wmma.mma", "mma.sp")
EXP_CALLS = EXPS | {"libdevice.exp", "libdevice.exp2", "libdevice.fast_expf", "__expf", "expf", "exp2f"}
EXP2_CALLS = {"tl.exp2", "libdevice.exp2", "exp2f", "exp2", "__exp2f", "h2exp2", "hexp2", "fast_exp2"}
SIGMOIDS = {"tl.sigmoid"}
ERF_TANH = ["libdevice.tanh", "libdevice.erf", "libdevice.tanhf", "libdevice.erff", "tl.erf", "tanhf", "erff",
            "tanh", "erf", "__tanhf", "htanh", "h2tanh"]
ACTIVATIONS = EXP_CALLS | SIGMOIDS | set(ERF_TANH) | {"tl.inline_asm_elementwise", "asm"}
FAST_DIVS = {"tl.fdiv": 1, "__fdividef": 1, "fdividef": 1, "libdevice.fast_dividef": 1, "__frcp_rn": 0,
             "__frcp_rz": 0, "__frcp_rd": 0, "__frcp_ru": 0, "libdevice.fast_rcpf": 0}
"""Fast division/reciprocal calls -> index of the denominator argument (``tl.fdiv`` only with
``ieee_rounding=False``)."""
DIVISIONS = {"/": 1, **FAST_DIVS, "tl.div_rn": 1, "libdevice.div_rn": 1, "__fdiv_rn": 1, "__fdiv_rz": 1,
             "libdevice.rcp_rn": 0}
FAST_ASM = ("tanh.approx", "rcp.approx", "ex2.approx")
LOW_PRECISION = {"bf16", "fp16", "fp8"}
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
LOG2E = 1.0 / math.log(2.0)
TENSOR_METHODS = {".contiguous", ".t", ".transpose", ".permute", ".view", ".reshape", ".data_ptr", ".to", ".float",
                  ".half", ".bfloat16", ".flatten", ".clone", ".expand", ".cuda", ".detach", ".view_as",
                  ".expand_as", ".unsqueeze", ".squeeze", ".narrow", ".mT", ".T"}
TRANSPOSES = {".t", ".transpose", ".permute", ".T", ".mT"}
TRANSPOSE_CALLS = {"tl.trans", "tl.permute", ".trans", ".permute", ".T"}


# ------------------------------------------------------------------------------------------------ inputs


def _entry(facts: Facts) -> Function | None:
    """The function whose parameters are the submission's inputs: ``kernel`` (Python), else the launching C++ host
    function of a ``.cu`` file."""
    k = facts.functions.get("kernel")
    if k is not None:
        return k
    hosts = [f for f in facts.hosts("cuda") if f.launches]
    return hosts[0] if hosts else None


def _tensor_roots(fl: Flow, e: Expr, fn: Function, depth: int = 0,
                  seen: set[int] | None = None) -> list[tuple[Function, str, frozenset[str]]]:
    """Host parameters whose tensor ``e`` is (through copies, ``.contiguous()``, casts, descriptors...), with the
    tensor methods applied on the way."""
    seen = seen if seen is not None else set()
    if depth > 12 or id(e) in seen:
        return []
    seen.add(id(e))
    k = e.kind
    out: list[tuple[Function, str, frozenset[str]]] = []
    if k == "name":
        if e.op in fn.params:
            return [(fn, e.op, frozenset())]
        for a in fl.defs(e.op, fn):
            v = a.value
            if a.index is not None and v.kind == "tuple" and a.index < len(v.args):
                v = v.args[a.index]
            out += _tensor_roots(fl, v, fn, depth + 1, seen)
        return out
    if k == "call":
        if e.recv is not None and (e.op in TENSOR_METHODS):
            return [(f, p, ms | {e.op}) for f, p, ms in _tensor_roots(fl, e.recv, fn, depth + 1, seen)]
        if e.op.endswith("from_tensor") or e.op in ("reinterpret_cast", "static_cast", "torch.as_strided") \
                or e.op.endswith(".contiguous"):
            first = e.args[0] if e.args else None
            return _tensor_roots(fl, first, fn, depth + 1, seen) if first is not None else []
        return []
    if k == "attr" and e.op in ("T", "mT") and e.recv is not None:
        return [(f, p, ms | {".T"}) for f, p, ms in _tensor_roots(fl, e.recv, fn, depth + 1, seen)]
    if k == "cast" and e.args:
        return _tensor_roots(fl, e.args[0], fn, depth + 1, seen)
    if k == "ternary" and len(e.args) == 3:
        return _tensor_roots(fl, e.args[1], fn, depth + 1, seen) + _tensor_roots(fl, e.args[2], fn, depth + 1, seen)
    return out


def _input_of(fl: Flow, facts: Facts, f: Function, p: str, depth: int = 0) -> list[tuple[int, frozenset[str]]]:
    """Which input(s) of the entry a host parameter ``p`` of ``f`` carries, with the tensor methods applied."""
    entry = _entry(facts)
    if entry is None or depth > 4:
        return []
    if f is entry:
        return [(entry.params.index(p), frozenset())] if p in entry.params else []
    out: list[tuple[int, frozenset[str]]] = []
    srcs = [(src, caller) for src, caller in fl.param_sources(f, p)]
    if f.lang == "cuda" and not f.is_device:  # a C++ host function called from Python as ext.name(...)
        for py in facts.hosts("py"):
            for c in py.calls:
                if c.expr.recv is not None and c.name == "." + f.name and p in f.params:
                    i = f.params.index(p)
                    if i < len(c.expr.args):
                        srcs.append((c.expr.args[i], py))
    for src, caller in srcs:
        for g, q, ms in _tensor_roots(fl, src, caller):
            out += [(i, ms | m2) for i, m2 in _input_of(fl, facts, g, q, depth + 1)]
    return out


def input_params(fl: Flow, facts: Facts, fn: Function, index: int) -> dict[str, frozenset[str]]:
    """Parameters of kernel ``fn`` that receive input ``index`` of the submission -> tensor methods applied on the
    host on the way (``{".t", ".contiguous"}`` for a transposed copy)."""
    key = f"gemm-inputs:{fn.key}:{index}"

    def compute() -> dict[str, frozenset[str]]:
        out: dict[str, frozenset[str]] = {}
        for p in fn.params:
            if p in fn.constexprs:
                continue
            for src, caller in fl.param_sources(fn, p):
                for g, q, ms in _tensor_roots(fl, src, caller):
                    for i, m2 in _input_of(fl, facts, g, q):
                        if i == index:
                            out[p] = out.get(p, frozenset()) | ms | m2
        return out

    return facts.memo(key, compute)


def _loads_of(fl: Flow, fn: Function, params: Iterable[str]) -> list[Call]:
    ps = set(params)
    return [c for kind, c, bases in fl.memory_ops(fn) if kind == "load" and bases & ps]


# ------------------------------------------------------------------------------------------------ structure


def _mma_calls(facts: Facts, fn: Function) -> list[Call]:
    """Tensor-core calls of a kernel: ``tl.dot``, wmma/CuTe calls, inline ``mma``/``wgmma`` asm."""
    out = [c for c in fn.calls if c.name in DOTS or matches(c.name, CUDA_MMA)]
    if fn.lang == "cuda":
        asm_lines = {(t.line, t.end_line) for t in facts.tokens
                     if t.kind == "asm" and any(p in t.text for p in MMA_ASM)}
        out += [c for c in fn.calls if c.name == "asm" and any(a <= c.line <= b for a, b in asm_lines)]
    return out


def _asm_text(facts: Facts, c: Call) -> str:
    if isinstance(c.expr.value, str):
        return c.expr.value
    return " ".join(t.text for t in facts.tokens if t.kind == "asm" and t.line <= c.line <= t.end_line)


def _dot_accumulators(fl: Flow, fn: Function) -> dict[str, int]:
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


def _main_loop(fl: Flow, facts: Facts, fn: Function) -> Loop | None:
    """The K loop: the loop of a dot accumulator (Triton), or the outermost non-persistent loop around the MMA
    calls (CUDA)."""
    accs = _dot_accumulators(fl, fn)
    if accs:
        return fn.loop(next(iter(accs.values())))
    for c in _mma_calls(facts, fn):
        for lid in c.loops:
            lp = fn.loop(lid)
            if lp is not None and not is_persistent(fl, fn, lp):
                return lp
    return None


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


# ------------------------------------------------------------------------------------------------ polynomials

Poly = tuple[str | None, dict[int, float]]


def _key(e: Expr, depth: int = 0) -> str:
    if depth > 5:
        return "..."
    if e.kind in ("name", "const"):
        return e.op
    return f"{e.kind}:{e.op}(" + ",".join(_key(a, depth + 1) for a in e.args) + ")" + (
        "." + _key(e.recv, depth + 1) if e.recv is not None else "")


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


def _poly(fl: Flow, e: Expr, fn: Function, env=None, depth: int = 0) -> Poly | None:  # noqa: ANN001
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
        return _key(e), {1: 1.0}
    return None


def _gelu_scale(fl: Flow, e: Expr, fn: Function, env=None) -> float | None:  # noqa: ANN001
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
    """Divisions and reciprocals of a kernel: (node, numerator or None, denominator, fast)."""
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
        elif n.op == "asm" and "tanh.approx" in _asm_text(facts, c):
            if any((s := _gelu_scale(fl, x, fn)) is not None and _close(s, SQRT_2_OVER_PI) for x in n.args):
                out.append((n, "tanh.approx", None))
    return out


@check("gelu_sigmoid_form")
def gelu_sigmoid_form(facts: Facts, lang: str) -> CheckResult:
    """tanh-GELU is evaluated as x * sigmoid(2z), z = sqrt(2/pi) * (x + 0.044715 x^3): an exponential whose
    argument is -2z (``tl.exp``, ``__expf``) or -2z*log2(e) (``tl.exp2``, ``exp2f``; the constants may be folded
    in any arrangement, the polynomial is evaluated) sits in the denominator of a division or reciprocal
    (``x / (1 + e)``, ``tl.fdiv``, ``__frcp_rn``) whose numerator does not hold it (a tanh built as
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


# ------------------------------------------------------------------------------------------------ epilogue


def _value_nodes(fl: Flow, e: Expr, fn: Function, stop: set[str], depth: int = 0,
                 seen: set[int] | None = None) -> Iterable[Expr]:
    """Nodes of the value ``e`` computes, following definitions, not descending into load addresses, subscript
    indices or the definitions of the names in ``stop`` (yielded themselves)."""
    seen = seen if seen is not None else set()
    if depth > 14 or id(e) in seen:
        return
    seen.add(id(e))
    yield e
    k = e.kind
    if k == "name":
        if e.op in stop:
            return
        for a in fl.defs(e.op, fn):
            v = a.value
            if v.kind == "other" and v.op in ("loop-var", "item-write"):
                if v.op == "item-write" and len(v.args) == 2:
                    yield from _value_nodes(fl, v.args[1], fn, stop, depth + 1, seen)
                continue
            yield from _value_nodes(fl, v, fn, stop, depth + 1, seen)
        return
    if k == "call" and (e.op in ("tl.load", "load", "tl.atomic_add") or e.op.startswith("__ld") or e.op == ".load"):
        return
    if k == "sub":
        if e.args:
            yield from _value_nodes(fl, e.args[0], fn, stop, depth + 1, seen)
        return
    if e.recv is not None:
        yield from _value_nodes(fl, e.recv, fn, stop, depth + 1, seen)
    for a in e.args:
        yield from _value_nodes(fl, a, fn, stop, depth + 1, seen)
    for a in (e.kwargs or {}).values():
        yield from _value_nodes(fl, a, fn, stop, depth + 1, seen)


def _low_precision_cast(fl: Flow, n: Expr, fn: Function) -> bool:
    """A conversion to a 16-bit (or 8-bit) float: ``x.to(tl.bfloat16)``, ``x.to(y.dtype.element_ty)``,
    ``__float2bfloat16``."""
    if n.kind == "cast":
        return n.op in LOW_PRECISION
    if n.kind == "call" and n.op == ".to" and n.args:
        from d2kgrade.static.lower import dtype_of

        dt = dtype_of(n.args[0])
        return dt in LOW_PRECISION or (dt is None and n.args[0].kind in ("attr", "name")
                                       and "int" not in _key(n.args[0]))
    return n.kind == "call" and matches(n.op, ["__float2bfloat16*", "__float2half*", "__float22bfloat162*"])


def _epilogue_activations(fl: Flow, facts: Facts, fn: Function) -> list[tuple[Call, Expr, Loop]]:
    """(store, activation call, K loop): stores after the K loop whose value passes through an activation."""
    loop = _main_loop(fl, facts, fn)
    if loop is None:
        return []
    out = []
    for st in _stores(fl, fn):
        if not _after(st, loop):
            continue
        v = fl.stored_value(st)
        if v is None:
            continue
        for n in _value_nodes(fl, v, fn, set()):
            if _is_activation(facts, n):
                out.append((st, n, loop))
                break
    return out


def _late_loads(fl: Flow, fn: Function, nodes: list[Expr], loop: Loop) -> list[Call]:
    """Loads among ``nodes`` made after the K loop, outside it."""
    out = []
    for n in nodes:
        if n.kind == "call" and n.op in ("tl.load", "load"):
            c = next((x for x in fn.calls if x.expr is n), None)
            if c is not None and loop.id not in c.loops and pos(c) >= end_pos(loop):
                out.append(c)
    return out


@check("epilogue_activation")
def epilogue_activation(facts: Facts, lang: str, *, late_load: bool = True) -> CheckResult:
    """The kernel that runs the GEMM's K loop (``tl.dot`` accumulating, or CUDA MMAs in a loop) stores, after the
    loop, values computed from its accumulator (Triton: the carried ``tl.dot`` accumulator is read) and passed
    through an activation (an exponential, ``tl.sigmoid``, tanh/erf, inline-asm ``tanh.approx``) and, with
    ``late_load``, combined with a value loaded after the loop (the bias): bias and activation fused into the GEMM."""
    fl = flow(facts)
    reason = "no store after a K loop of values passed through an activation"
    for fn in code(facts, lang):
        accs = set(_dot_accumulators(fl, fn))
        for st, act, loop in _epilogue_activations(fl, facts, fn):
            nodes = list(_value_nodes(fl, fl.stored_value(st), fn, accs))  # type: ignore[arg-type]
            if fn.lang == "py" and not any(n.kind == "name" and n.op in accs for n in nodes):
                reason = f"the activation stored by {fn.name} is not applied to its tl.dot accumulator"
                continue
            late = _late_loads(fl, fn, nodes, loop)
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
        accs = set(_dot_accumulators(fl, fn))
        for st, act, loop in _epilogue_activations(fl, facts, fn):
            args = list(act.args) + list((act.kwargs or {}).values())
            nodes = [n for a in args for n in _value_nodes(fl, a, fn, accs)]
            if fn.lang == "py" and not any(n.kind == "name" and n.op in accs for n in nodes):
                reason = f"the activation in {fn.name} does not read the tl.dot accumulator"
                continue
            bad = [n for n in nodes if _low_precision_cast(fl, n, fn)]
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
        accs = _dot_accumulators(fl, fn)
        if not accs:
            continue
        parts = _split_parts(fl, fn)
        per_store = []
        for st, act, loop in _epilogue_activations(fl, facts, fn):
            args = list(act.args) + list((act.kwargs or {}).values())
            nodes = [n for a in args for n in _value_nodes(fl, a, fn, set(accs) | parts)]
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
    ``[:, None]`` row axis) and combines it, broadcast, with the accumulator into the stored value: a bias loaded
    once per tile. CUDA: a global load placed after the MMA loop outside every loop (once per thread per tile)."""
    from d2kgrade.static.checks.tiling import _arange_dims

    fl = flow(facts)
    for fn in code(facts, lang):
        loop = _main_loop(fl, facts, fn)
        if loop is None:
            continue
        accs = set(_dot_accumulators(fl, fn))
        for st in _stores(fl, fn):
            if not _after(st, loop):
                continue
            v = fl.stored_value(st)
            if v is None:
                continue
            nodes = list(_value_nodes(fl, v, fn, accs))
            if fn.lang == "py" and not any(n.kind == "name" and n.op in accs for n in nodes):
                continue
            for n in nodes:
                if n.kind != "call" or n.op not in ("tl.load", "load"):
                    continue
                c = next((x for x in fn.calls if x.expr is n), None)
                if c is None or loop.id in c.loops or pos(c) < end_pos(loop):
                    continue
                ptr = n.kw("pointer", 0)
                if fn.lang == "py":
                    if ptr is None or _arange_dims(fl, ptr, fn) != 1:
                        continue
                elif c.loops:
                    continue
                return found(f"{fn.name} loads a vector once after the K loop and adds it to the accumulator",
                             [span(c, "per-tile vector load"), span(st, "store")], 0.8)
    return missing("no vector loaded once after the K loop and broadcast into the accumulator", confidence=0.75)


def _int_options(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> list[int | None]:
    """Values a host expression may take: constants, branches of conditionals, tuple elements by index."""
    if depth > 8:
        return [None]
    v = fl.fold(e, fn)
    if isinstance(v, int) and not isinstance(v, bool):
        return [v]
    if e.kind == "ternary" and len(e.args) == 3:
        return _int_options(fl, e.args[1], fn, depth + 1) + _int_options(fl, e.args[2], fn, depth + 1)
    if e.kind == "name":
        out: list[int | None] = []
        for a in fl.defs(e.op, fn):
            val = a.value
            if val.kind == "other" and val.op == "loop-var" and val.args:
                val = val.args[0]
            if a.index is not None:
                out += _tuple_options(fl, val, a.index, fn, depth + 1)
            elif val.kind == "tuple" and val.args and all(x.kind == "tuple" for x in val.args):
                # `for bm, bn in [(64, 128), ...]`: every target gets the sequence; its position is the index
                sibs = [b for b in fn.assigns if b.value is a.value]
                i = sibs.index(a) if len(sibs) > 1 else None
                for x in val.args:
                    out += _tuple_options(fl, x, i, fn, depth + 1) if i is not None else [None]
            elif val.kind == "tuple" and val.args:  # `for bm in (64, 128)`
                for x in val.args:
                    out += _int_options(fl, x, fn, depth + 1)
            else:
                out += _int_options(fl, val, fn, depth + 1)
        return out or [None]
    return [None]


def _generated_config_values(fl: Flow, facts: Facts, p: str) -> list[int | None]:
    """Values of meta-parameter ``p`` in ``triton.Config`` s built by host code (loops over literal lists)."""
    out: list[int | None] = []
    for g in facts.functions.values():
        if g.is_device:
            continue
        for c in g.calls:
            if c.name not in ("triton.Config", "Config"):
                continue
            meta = c.expr.kw("kwargs", 0)
            v = (meta.kwargs or {}).get(p) if meta is not None else None
            if v is not None:
                out += _int_options(fl, v, g)
    return out


def _tuple_options(fl: Flow, e: Expr, i: int, fn: Function, depth: int) -> list[int | None]:
    if e.kind == "tuple" and i < len(e.args):
        return _int_options(fl, e.args[i], fn, depth + 1)
    if e.kind == "ternary" and len(e.args) == 3:
        return _tuple_options(fl, e.args[1], i, fn, depth + 1) + _tuple_options(fl, e.args[2], i, fn, depth + 1)
    return [None]


def _conditional(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> bool:
    """Is the host value ``e`` chosen by a condition (a ternary, or definitions in different branches)?"""
    if depth > 6:
        return False
    if e.kind == "ternary":
        return True
    if e.kind == "name":
        defs = fl.defs(e.op, fn)
        if len(defs) > 1 and any(d.guards for d in defs):
            return True
        return any(_conditional(fl, d.value, fn, depth + 1) for d in defs)
    return False


def _tile_param_values(fl: Flow, facts: Facts, fn: Function, p: str) -> tuple[list[int | None], bool]:
    """Values of a kernel's tile parameter over its autotune configs and launches, and whether they are chosen
    per problem shape (autotuned with a key, or picked by a host condition)."""
    vals: list[int | None] = []
    per_shape = False
    if fn.autotune is not None:
        vs = [c.kwargs.get(p) for c in fn.autotune.configs if p in c.kwargs]
        if fn.autotune.generated and any(v is None for v in vs):
            vs = [v for v in vs if v is not None] + _generated_config_values(fl, facts, p)
        vals += [v if isinstance(v, int) else None for v in vs]
        per_shape = per_shape or (bool(fn.autotune.key) and len({str(v) for v in vs}) >= 2)
    for la in fl.launches_of(fn):
        caller = facts.functions.get(la.caller)
        arg = fl.launch_arg(la, fn, p)
        if caller is None or arg is None:
            continue
        opts = _int_options(fl, arg, caller)
        vals += opts
        if len({o for o in opts if o is not None}) >= 2 and _conditional(fl, arg, caller):
            per_shape = True
    return vals, per_shape


@check("m_tile_options")
def m_tile_options(facts: Facts, lang: str, *, values: list[int], dim: int = 0) -> CheckResult:
    """The GEMM's M tile (dimension ``dim`` of the ``tl.dot`` accumulator, ``tl.zeros((BM, BN))``) is chosen per
    problem shape, by the autotuner (configs with a ``key``) or by a host condition, among options that include
    one of ``values`` (BM = 64 for small M)."""
    fl = flow(facts)
    reason = "no tl.dot accumulator with a tile size chosen per shape"
    for fn in code(facts, "triton"):
        for var in _dot_accumulators(fl, fn):
            inits = [a for a in fn.defs().get(var, []) if a.value.kind == "call" and a.value.op == "tl.zeros"]
            for a in inits:
                shape = a.value.kw("shape", 0)
                if shape is None or shape.kind != "tuple" or dim >= len(shape.args):
                    continue
                r = fl.root(shape.args[dim], fn)
                if r.kind != "name" or r.op not in fn.params:
                    continue
                vals, per_shape = _tile_param_values(fl, facts, fn, r.op)
                known = {v for v in vals if v is not None}
                if per_shape and known & set(values):
                    return found(f"{fn.name}: {r.op} chosen per shape among {sorted(known)}",
                                 Span(a.line, a.end_line, f"{r.op} tile"), 0.8)
                reason = (f"{fn.name}: {r.op} takes {sorted(known) or 'unknown values'}"
                          + ("" if per_shape else ", the same for every shape"))
    return missing(reason, confidence=0.75)


# ------------------------------------------------------------------------------------------------ skinny GEMMs


def _varies_with(fl: Flow, fn: Function, e: Expr, loop: Loop) -> bool:
    """Does the address ``e`` change across the iterations of ``loop`` (reads its variable, or a value it carries)?"""
    carried = set(fl.carried(fn).get(loop.id, {}))
    names = {loop.var} | carried if loop.var else carried
    # a name assigned from a loop-variable-derived value inside the loop (tile = it // k_iters) varies too
    for n, f, _ in fl.walk(e, fn, depth=8):
        if f is fn and n.kind == "name" and n.op in names:
            return True
    return False


def _row_arange_sizes(fl: Flow, ptr: Expr, fn: Function) -> list[Expr]:
    """Sizes of the ``tl.arange`` s that index a tile's leading (row) axis: ``rows[:, None]``."""
    out = []
    for n, f, _ in fl.walk(ptr, fn, depth=5):
        if f is not fn or n.kind != "sub" or len(n.args) < 3:
            continue
        lead, rest = n.args[1], n.args[2:]
        if lead.kind == "other" and lead.op == "slice" and rest and all(i.kind == "const" and i.value is None
                                                                         for i in rest):
            for x, g, _ in fl.walk(n.args[0], fn, depth=4):
                if g is fn and x.kind == "call" and x.op == "tl.arange" and len(x.args) == 2:
                    out.append(x.args[1])
    return out


def _values(fl: Flow, facts: Facts, fn: Function, e: Expr) -> list[int | None]:
    r = fl.root(e, fn)
    v = fl.fold(r, fn)
    if isinstance(v, int):
        return [v]
    if r.kind == "bin" and r.op == "//" and len(r.args) == 2:  # BN // 2
        d = fl.fold(r.args[1], fn)
        return [x // d if isinstance(x, int) and isinstance(d, int) and d else None
                for x in _values(fl, facts, fn, r.args[0])]
    if r.kind == "name" and r.op in fn.params:
        vals, _ = _tile_param_values(fl, facts, fn, r.op)
        return vals or [None]
    return [None]


@check("weights_read_once")
def weights_read_once(facts: Facts, lang: str, *, input_index: int = 1, rows_index: int = 0, max_m: int = 64,
                      max_bn: int = 64) -> CheckResult:
    """A kernel streams the weights (input ``input_index``) once: each of its weight loads sits in a K loop and
    its address changes across every enclosing loop (no loop over M rows re-reads the same slab); the tile of
    activation rows (input ``rows_index``) is not a fixed size below ``max_m`` (all M <= ``max_m`` rows in one
    tile, or a size taken from M); and the weights are spread over many programs: a weight tile no wider than
    ``max_bn`` rows, or K split across programs. CUDA: the weight loads change across every enclosing loop."""
    fl = flow(facts)
    reason = f"no kernel loads input {input_index}"
    for fn in code(facts, lang):
        wp = input_params(fl, facts, fn, input_index)
        w_loads = [c for c in _loads_of(fl, fn, wp) if c.loops]
        if not w_loads:
            continue
        again = []
        for c in w_loads:
            addr = c.expr.kw("pointer", 0) if not c.name.startswith(".") else c.expr.recv
            for lid in c.loops:
                lp = fn.loop(lid)
                if lp is not None and addr is not None and not _varies_with(fl, fn, addr, lp) and not (
                        c.name.startswith(".") and c.expr.args and _varies_with(fl, fn, c.expr.args[0], lp)):
                    again.append((c, lp))
        if again:
            c, lp = again[0]
            reason = f"{fn.name} loads the same weights again on every iteration of the loop at line {lp.line}"
            continue
        if fn.lang == "cuda":
            return found(f"{fn.name} reads each weight element once per program", span(w_loads[0], "weights"), 0.6)
        rp = input_params(fl, facts, fn, rows_index)
        small = []
        for c in _loads_of(fl, fn, rp):
            ptr = c.expr.kw("pointer", 0)
            for s in (_row_arange_sizes(fl, ptr, fn) if ptr is not None else []):
                vals = _values(fl, facts, fn, s)
                if vals and all(v is not None and v < max_m for v in vals):
                    small.append((c, vals))
        if small:
            reason = f"{fn.name} tiles the activation rows by {sorted(set(small[0][1]))} < {max_m}: weights re-read"
            continue
        wide = True
        for c in w_loads:
            ptr = c.expr.kw("pointer", 0)
            sizes = _row_arange_sizes(fl, ptr, fn) if ptr is not None else []
            for s in sizes:
                vals = _values(fl, facts, fn, s)
                if not vals or not all(v is not None and v > max_bn for v in vals):
                    wide = False
            if not sizes:
                wide = False
        split = any(fl.pid_derived(e, fn) for lp in fn.loops if not is_persistent(fl, fn, lp)
                    for e in (lp.start, lp.stop) if e is not None)
        if wide and not split:
            reason = f"{fn.name} streams the weights in tiles wider than {max_bn} rows with K unsplit: few programs"
            continue
        return found(f"{fn.name} streams each weight element once", span(w_loads[0], "weight load"), 0.75)
    return missing(reason, confidence=0.7)


def _low_precision_value(fl: Flow, e: Expr, fn: Function) -> Expr | None:
    r = e
    for _ in range(4):
        if _low_precision_cast(fl, r, fn):
            return r
        if r.kind == "name":
            defs = fl.defs(r.op, fn)
            if len(defs) != 1:
                return None
            r = defs[0].value
        else:
            return None
    return None


@check("fp32_partial_reduction")
def fp32_partial_reduction(facts: Facts, lang: str) -> CheckResult:
    """Split-K partials are reduced in fp32 by the submission's kernels: a loop accumulator (or reduced value) is
    atomically added unconverted (not cast to 16 bits first), or stored unconverted into a buffer that a later
    kernel loads and sums."""
    fl = flow(facts)
    reason = "no split partials reduced by atomics or by a later kernel"
    for fn in code(facts, lang):
        carried = {v for by in fl.carried(fn).values() for v in by}
        for c in fn.calls:
            if c.name not in ("tl.atomic_add", "atomicAdd", "atomicAdd_block", "atomicAdd_system"):
                continue
            v = c.expr.kw("val", 1)
            if v is None:
                continue
            acc = fl.reduction_derived(v, fn) is not None or any(
                n.kind == "name" and n.op in carried and f is fn for n, f, _ in fl.walk(v, fn, depth=3))
            if not acc:
                continue
            low = _low_precision_value(fl, v, fn)
            if low is not None:
                reason = f"{fn.name} adds its partials atomically after rounding them to 16 bits"
                continue
            return found(f"{fn.name} adds fp32 partials atomically", span(c, "fp32 atomic"), 0.8)
    launches = [la for la in facts.launches if la.kernel in facts.functions]
    for i, la1 in enumerate(launches):
        k1 = facts.functions[la1.kernel]
        if not k1.inlined or (lang == "triton" and k1.lang != "py") or (lang == "cuda" and k1.lang != "cuda"):
            continue
        carried = {v for by in fl.carried(k1).values() for v in by}
        for kind, st, bases in fl.memory_ops(k1):
            if kind != "store":
                continue
            v = fl.stored_value(st)
            if v is None or not any(n.kind == "name" and n.op in carried and f is k1
                                    for n, f, _ in fl.walk(v, k1, depth=3)):
                continue
            if _low_precision_value(fl, v, k1) is not None:
                reason = f"{k1.name} stores its partials rounded to 16 bits"
                continue
            hosts = set()
            for b in bases:
                e = fl.launch_arg(la1, k1, b)
                if e is not None and e.kind == "name":
                    hosts.add(e.op)
            for la2 in launches[i + 1:]:
                k2 = facts.functions[la2.kernel]
                if k2 is k1:
                    continue
                sums = any(fl.is_reduction(c.expr, k2) for c in k2.calls) or bool(fl.carried(k2))
                for kind2, ld, b2 in fl.memory_ops(k2):
                    if kind2 != "load" or not sums:
                        continue
                    if any((e := fl.launch_arg(la2, k2, b)) is not None and e.kind == "name" and e.op in hosts
                           for b in b2):
                        return found(f"{k1.name} stores fp32 partials that {k2.name} sums",
                                     [span(st, "fp32 partial"), span(ld, "summed")], 0.8)
    return missing(reason, confidence=0.75)


@check("stream_k_ranges")
def stream_k_ranges(facts: Facts, lang: str) -> CheckResult:
    """Stream-K: a kernel launched on a grid sized from the SM count walks a program-id-bounded range of the
    flattened (tile, k-iteration) space: inside a loop whose bounds come from the program id, one counter is both
    floor-divided (the tile) and reduced modulo (the first k-iteration) by the same value, an inner K loop starts
    or stops at that remainder, and partial tiles are combined through atomics."""
    from d2kgrade.static.checks.tiling import SM_SOURCES, _host_calls
    from d2kgrade.static.checks.values import ATOMICS

    fl = flow(facts)
    reason = "no program-id range over (tile, k-iteration) work"
    for fn in code(facts, lang):
        for lp in fn.loops:
            carried = fl.carried(fn).get(lp.id, {})
            bounds = [e for e in (lp.start, lp.stop) if e is not None]
            bounds += [a.value for v in carried for a in fn.defs().get(v, []) if lp.id not in a.loops]
            if not any(fl.pid_derived(e, fn) for e in bounds):
                continue
            divs: dict[str, list[tuple[str, str]]] = {}
            for a in fn.assigns:
                if lp.id not in a.loops:
                    continue
                for n in a.value.nodes():
                    if n.kind == "bin" and n.op in ("//", "%") and len(n.args) == 2 and n.args[0].kind == "name":
                        divs.setdefault(_key(n.args[0]) + "|" + _key(n.args[1]), []).append((n.op, a.targets[0]))
            for pair in divs.values():
                ops = {o for o, _ in pair}
                if ops != {"//", "%"}:
                    continue
                rem = {t for o, t in pair if o == "%"}
                inner = [x for x in fn.loops if x.parent == lp.id or (x.id != lp.id and x.line > lp.line
                                                                      and x.end_line <= lp.end_line)]
                if not any(e is not None and any(fl.refs(e, fn, r) for r in rem)
                           for x in inner for e in (x.start, x.stop)):
                    continue
                if not any(c.name in ATOMICS for c in fn.calls):
                    reason = f"{fn.name} walks (tile, k) ranges but never combines partial tiles"
                    continue
                sized = False
                for la in fl.launches_of(fn):
                    caller = facts.functions.get(la.caller)
                    if caller is not None and la.grid is not None and _host_calls(fl, la.grid, caller, SM_SOURCES):
                        sized = True
                if not sized:
                    reason = f"{fn.name} walks (tile, k) ranges on a grid not sized from the SM count"
                    continue
                return found(f"Stream-K ranges of (tile, k-iteration) work in {fn.name}", span(lp, "work range"),
                             0.8)
    return missing(reason, confidence=0.75)


@check("operand_eviction_hints")
def operand_eviction_hints(facts: Facts, lang: str, *, stream_index: int = 1, reuse_index: int = 0,
                           min_k_tile: int = 128) -> CheckResult:
    """Loads of the streamed operand (input ``stream_index``, the weights) carry ``evict_first`` and loads of the
    reused operand (input ``reuse_index``) ``evict_last`` in one kernel, whose K tile (the innermost ``tl.arange``
    of the streamed loads) is at least ``min_k_tile`` wide. CUDA: the weights are read with a streaming intrinsic
    (``__ldcs``, ``__ldlu``) or ``L1::no_allocate`` / ``evict_first`` asm."""
    from d2kgrade.static.checks.memory import _unit_arange

    fl = flow(facts)

    def policy(c: Call, fn: Function) -> object:
        e = c.expr.kw("eviction_policy")
        if e is None:
            return None
        return e.value if e.kind == "const" else facts.consts.get(e.op) if e.kind == "name" else fl.fold(e, fn)

    reason = "no eviction hints on the GEMM operands"
    for fn in code(facts, "triton"):
        sl = _loads_of(fl, fn, input_params(fl, facts, fn, stream_index))
        rl = _loads_of(fl, fn, input_params(fl, facts, fn, reuse_index))
        if not sl or not rl:
            continue
        sp = {policy(c, fn) for c in sl}
        rp = {policy(c, fn) for c in rl}
        if "evict_first" not in sp or "evict_last" not in rp:
            reason = f"{fn.name}: streamed operand {sorted(map(str, sp))}, reused operand {sorted(map(str, rp))}"
            continue
        narrow = None
        for c in sl:
            ptr = c.expr.kw("pointer", 0)
            ar = _unit_arange(fl, ptr, fn) if ptr is not None else None
            if ar is not None and len(ar.args) == 2:
                vals = _values(fl, facts, fn, ar.args[1])
                if vals and all(v is not None and v < min_k_tile for v in vals):
                    narrow = vals
        if narrow:
            reason = f"{fn.name}: evict_first/evict_last hints, but K tiles of {sorted(set(narrow))}"
            continue
        return found(f"{fn.name}: weights evict_first, activations evict_last",
                     [span(sl[0], "evict_first"), span(rl[0], "evict_last")], 0.85)
    if lang != "triton":
        for fn in code(facts, "cuda"):
            wp = input_params(fl, facts, fn, stream_index)
            hits = [c for c in fn.calls if c.name in ("__ldcs", "__ldlu") and c.expr.args
                    and fl.bases(c.expr.args[0], fn) & set(wp)]
            if hits:
                return found(f"{fn.name} streams the weights with {hits[0].name}", span(hits[0], hits[0].name), 0.7)
        hits = [t for t in facts.reachable_tokens("asm") if "L1::no_allocate" in t.text or "evict_first" in t.text]
        if hits:
            return found("streaming (no-allocate / evict_first) loads in inline asm",
                         [span(hits[0], "asm")], 0.7)  # type: ignore[arg-type]
    return missing(reason, confidence=0.8)


@check("cuda_swap_ab")
def cuda_swap_ab(facts: Facts, lang: str) -> CheckResult:
    """CUDA code without tensor-core instructions cannot compute a swapped-operand MMA (fails); with them, which
    operand feeds the MMA's M side is not visible statically (cannot tell)."""
    hits = [c for f in code(facts, "cuda") for c in _mma_calls(facts, f)]
    if hits:
        return CheckResult(None, "tensor-core CUDA code: operand roles not visible statically", [span(hits[0])], 0.0)
    return missing("no tensor-core instructions in the CUDA code, so no swap-AB MMA", confidence=0.8)


# ------------------------------------------------------------------------------------------------ block-scaled fp8


def _fresh_dot(c: Call) -> bool:
    """A ``tl.dot`` that starts from zero (no accumulator argument)."""
    e = c.expr
    return c.name == "tl.dot" and len(e.args) < 3 and not (e.kwargs and "acc" in e.kwargs)


def _promotions(fl: Flow, facts: Facts, fn: Function) -> list[tuple[Expr, Loop]]:
    """Per-block promotions: an update of a loop-carried accumulator adding a fresh block product multiplied by
    values loaded in the same loop (the block's scales)."""
    out = []
    carried = fl.carried(fn)
    loads = {id(c.expr): c for kind, c, _ in fl.memory_ops(fn) if kind == "load"}
    for lid, by_var in carried.items():
        loop = fn.loop(lid)
        if loop is None:
            continue
        for var, ups in by_var.items():
            for a in ups:
                nodes = [(n, f) for n, f, _ in fl.walk(a.value, fn, within=loop, depth=5)]
                fresh = [n for n, f in nodes if f is fn and n.kind == "call"
                         and any(c.expr is n and _fresh_dot(c) for c in fn.calls)]
                if fn.lang == "cuda":
                    fresh = _cuda_fresh_parts(fl, facts, fn, a.value, loop)
                if not fresh:
                    continue
                scaled = [n for n, f in nodes if f is fn and id(n) in loads and lid in loads[id(n)].loops
                          and not any(n is x for fr in fresh for x, _, _ in fl.walk(fr, fn, depth=3) if x is not fr)]
                if scaled:
                    out.append((a.value, loop))
    return out


def _cuda_fresh_parts(fl: Flow, facts: Facts, fn: Function, value: Expr, loop: Loop) -> list[Expr]:
    """CUDA: arrays read by ``value`` that are zeroed inside ``loop`` and written by an MMA in it (a temporary
    accumulator per K block)."""
    arrays = {n.args[0].op for n in value.nodes() if n.kind == "sub" and n.args and n.args[0].kind == "name"}
    arrays |= {n.op for n in value.nodes() if n.kind == "name"}
    mmas = [c for c in _mma_calls(facts, fn) if loop.id in c.loops]
    if not mmas:
        return []
    out = []
    for arr in arrays:
        zeroed = [a for a in fn.defs().get(arr, []) if loop.id in a.loops and a.value.kind == "other"
                  and a.value.op == "item-write" and len(a.value.args) == 2 and fl.fold(a.value.args[1], fn) == 0]
        zeroed += [a for a in fn.assigns if loop.id in a.loops and a.value.kind == "call"
                   and a.value.op.endswith("fill_fragment") and a.value.args and arr in a.value.args[0].names()]
        filled = [c for c in fn.calls if loop.id in c.loops and c.name.endswith("fill_fragment") and c.expr.args
                  and arr in c.expr.args[0].names() and c.expr.args[1:] and fl.fold(c.expr.args[1], fn) == 0]
        fed = any(arr in d.value.names() for d in fn.assigns if loop.id in d.loops and d.targets
                  and "@" in d.targets[0]) or any(arr in c.expr.names() for c in mmas)
        if (zeroed or filled) and fed:
            out.append(next(n for n in value.nodes() if (n.kind == "name" and n.op == arr) or (
                n.kind == "sub" and n.args and n.args[0].kind == "name" and n.args[0].op == arr)))
    return out


@check("per_block_promotion")
def per_block_promotion(facts: Facts, lang: str) -> CheckResult:
    """Inside the K loop, a fresh block product (``tl.dot`` without an accumulator argument; CUDA: an MMA into a
    temporary accumulator zeroed in the loop) is multiplied by values loaded in the same iteration (the block's
    scales) and added to a loop-carried accumulator (``acc += tl.dot(a, b) * sa[:, None] * sb``,
    ``tl.fma(tl.dot(a, b), s, acc)``)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        hits = _promotions(fl, facts, fn)
        if hits:
            v, loop = hits[0]
            return found(f"per-block promotion of a fresh block product in {fn.name}",
                         [span(v, "acc += partial * scales"), span(loop, "K loop")], 0.8)
    return missing("no fresh per-block product scaled by in-loop loads and added to an accumulator", confidence=0.8)


def _k_tile_values(fl: Flow, facts: Facts, fn: Function, loads: list[Call]) -> list[int | None]:
    """Widths of the K tile of the operand loads: innermost unit-stride ``tl.arange``, descriptor block shape, or
    the multiplier of the loop variable in a descriptor offset."""
    from d2kgrade.static.checks.memory import _unit_arange

    vals: list[int | None] = []
    for c in loads:
        if c.name.startswith("."):
            coords = c.expr.args[0] if c.expr.args else None
            if coords is not None and coords.kind == "tuple" and len(coords.args) >= 2:
                k = coords.args[-1]
                for n, f, _ in fl.walk(k, fn, depth=2):
                    if f is fn and n.kind == "bin" and n.op == "*" and len(n.args) == 2:
                        for x in n.args:
                            if x.kind == "name" and (fl.is_constexpr(x, fn) or fl.fold(x, fn) is not None):
                                vals += _values(fl, facts, fn, x)
                        break
            continue
        ptr = c.expr.kw("pointer", 0)
        if ptr is None:
            continue
        blk = [n for n, f, _ in fl.walk(ptr, fn, depth=4)
               if f is fn and n.kind == "call" and n.op == "tl.make_block_ptr"]
        shape = blk[0].kw("block_shape") if blk else None
        if shape is not None and shape.kind == "tuple" and shape.args:
            vals += _values(fl, facts, fn, shape.args[-1])  # [BM, BK] of the K-major A
            continue
        ar = _unit_arange(fl, ptr, fn)
        if ar is not None and len(ar.args) == 2:
            vals += _values(fl, facts, fn, ar.args[1])
    return vals


@check("scale_block_k")
def scale_block_k(facts: Facts, lang: str, *, block: int = 128, a_index: int = 0, b_index: int = 1,
                  scale_indices: list[int] | None = None) -> CheckResult:
    """The K loop steps exactly one scale block: the K tile of the operand loads (inputs ``a_index`` and
    ``b_index``) is ``block`` wide in every configuration, and the scales (inputs ``scale_indices``, default the
    next two) are loaded inside that loop, in the same iteration as the tiles. CUDA: the K loop's tile constant is
    ``block`` and the scales are loaded in it."""
    fl = flow(facts)
    sidx = scale_indices or [b_index + 1, b_index + 2]
    reason = "no K loop loading both operand tiles and scales"
    for fn in code(facts, lang):
        op_loads = _loads_of(fl, fn, set(input_params(fl, facts, fn, a_index)) | set(input_params(fl, facts, fn,
                                                                                                    b_index)))
        sc_params = set()
        for i in sidx:
            sc_params |= set(input_params(fl, facts, fn, i))
        sc_loads = _loads_of(fl, fn, sc_params)
        if fn.lang == "cuda":
            mmas = _mma_calls(facts, fn)
            loop = _main_loop(fl, facts, fn)
            if loop is None or not mmas:
                continue
            in_loop = [c for c in sc_loads if loop.id in c.loops]
            steps = [fl.fold(e, fn) for e in (loop.step,) if e is not None]
            kt = [v for n in (loop.stop, loop.step) if n is not None for x, f, _ in fl.walk(n, fn, depth=3)
                  if f is fn and x.kind == "name" and (v := fl.fold(x, fn)) is not None and v == block]
            if in_loop and (kt or block in steps):
                return found(f"{fn.name} steps one {block}-wide scale block per K iteration and loads its scales",
                             [span(loop, "K loop"), span(in_loop[0], "scale load")], 0.7)
            continue
        loops = {lid for c in op_loads for lid in c.loops}
        in_loop = [c for c in sc_loads if set(c.loops) & loops]
        if not op_loads or not in_loop:
            if op_loads:
                reason = f"{fn.name} does not load the scales in its K loop"
            continue
        a_loads = _loads_of(fl, fn, input_params(fl, facts, fn, a_index))
        vals = _k_tile_values(fl, facts, fn, [c for c in a_loads if c.loops])
        known = {v for v in vals if v is not None}
        wide = {v for c in _loads_of(fl, fn, input_params(fl, facts, fn, b_index))
                for x in (_row_arange_sizes(fl, c.expr.kw("pointer", 0), fn) if c.expr.kw("pointer", 0) is not None
                          else []) for v in _values(fl, facts, fn, x) if v is not None and (v > block or block % v)}
        if wide:
            reason = f"{fn.name}: weight tiles of {sorted(wide)} rows span several {block}-row scale blocks"
            continue
        if known and known == {block}:
            return found(f"{fn.name}: K tile {block} with the block's scales loaded in the same iteration",
                         [span(in_loop[0], "scale load"), span(op_loads[0], "operand tile")], 0.8)
        reason = f"{fn.name}: K tile {sorted(known) or 'unknown'}, not {block}"
    return missing(reason, confidence=0.75)


def _converted_operand(fl: Flow, fn: Function, c: Call) -> Expr | None:
    """A 16/32-bit conversion applied in registers to an operand of a ``tl.dot``."""
    for arg in c.expr.args[:2]:
        for n in _value_nodes(fl, arg, fn, set()):
            if n.kind == "cast" and n.op in ("bf16", "fp16", "fp32"):
                return n
            if n.kind == "call" and n.op == ".to":
                return n
    return None


@check("fresh_fp8_mma")
def fresh_fp8_mma(facts: Facts, lang: str) -> CheckResult:
    """The fp8 MMAs never carry their (reduced-precision) accumulator across K blocks: the loaded tiles reach
    ``tl.dot`` unconverted, and every such ``tl.dot`` in a loop starts fresh (no accumulator argument) or passes
    ``max_num_imprecise_acc`` <= 128; CUDA: an ``e4m3``/``e5m2`` MMA into a temporary zeroed every K block. A
    kernel without fp8 MMAs has nothing to guard and fails."""
    fl = flow(facts)
    reason = "no fp8 MMA"
    for fn in code(facts, lang):
        if fn.lang == "cuda":
            fp8 = [c for c in _mma_calls(facts, fn) if any(p in _asm_text(facts, c) for p in ("e4m3", "e5m2"))]
            if fp8 and _promotions(fl, facts, fn):
                return found(f"{fn.name}: fp8 MMA into a temporary promoted every K block", span(fp8[0], "fp8 mma"),
                             0.75)
            continue
        dots = [c for c in fn.calls if c.name == "tl.dot" and c.loops]
        native = [c for c in dots if _converted_operand(fl, fn, c) is None]
        if not native:
            if dots:
                reason = f"{fn.name} converts the operands before tl.dot: no fp8 MMA"
            continue
        bad = []
        for c in native:
            lim = c.expr.kw("max_num_imprecise_acc")
            if _fresh_dot(c) or (lim is not None and isinstance(fl.fold(lim, fn), int) and 0 < fl.fold(lim, fn) <= 128):
                continue
            bad.append(c)
        if bad:
            return missing(f"{fn.name}: tl.dot carries its accumulator across K blocks with the default "
                           "max_num_imprecise_acc", [span(bad[0], "carried fp8 accumulator")], 0.8)
        return found(f"{fn.name}: fresh fp8 tl.dot per K block", span(native[0], "fresh tl.dot"), 0.8)
    return missing(reason, confidence=0.75)


@check("k_major_operands")
def k_major_operands(facts: Facts, lang: str, *, input_index: int = 1) -> CheckResult:
    """The weights (input ``input_index``, [N, K]) reach the MMA K-major: no transposed copy is made on the host
    (``B.t().contiguous()``) and a ``tl.dot`` operand is a transposed view (``tl.trans``, ``tl.permute``, ``.T``)
    of a tile loaded from them; CUDA: an MMA with ``.row.col`` operands or a ``col_major`` B fragment."""
    fl = flow(facts)
    reason = f"no tl.dot on a transposed view of input {input_index}"
    for fn in code(facts, lang):
        params = input_params(fl, facts, fn, input_index)
        copies = [p for p, ms in params.items() if ms & TRANSPOSES and ".contiguous" in ms]
        if copies:
            return missing(f"input {input_index} is transposed and copied on the host before {fn.name}",
                           confidence=0.85)
        if fn.lang == "cuda":
            mmas = _mma_calls(facts, fn)
            if any(".row.col" in _asm_text(facts, c) for c in mmas) or any(
                    t.kind == "type" and "col_major" in t.text for t in facts.tokens) or any(
                    "col_major" in _key(c.expr) for c in fn.calls if "fragment" in c.name):
                return found(f"{fn.name}: TN (row.col) MMA operands", span(mmas[0], "mma"), 0.7)
            continue
        loads = {id(c.expr) for c in _loads_of(fl, fn, params)}
        for c in fn.calls:
            if c.name not in DOTS:
                continue
            for arg in c.expr.args[:2]:
                nodes = list(_value_nodes(fl, arg, fn, set()))
                tr = [n for n in nodes if (n.kind == "call" and n.op in TRANSPOSE_CALLS)
                      or (n.kind == "attr" and n.op == "T")]
                if tr and any(id(n) in loads for n in nodes):
                    return found(f"{fn.name}: tl.dot on a transposed view of the K-major weight tile",
                                 span(c, "transposed operand"), 0.8)
    return missing(reason, confidence=0.75)

