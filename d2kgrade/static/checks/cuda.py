"""CUDA-specific checks: shared memory, grid- and block-stride loops, a warp per row, register arrays, kernel
templates launched with several configurations."""

from __future__ import annotations

import re

from d2kgrade.static.checkutil import code, is_persistent, span
from d2kgrade.static.dataflow import flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Function, Launch
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


@check("shared_memory")
def shared_memory(facts: Facts, lang: str, *, min_buffers: int = 1) -> CheckResult:
    """Reachable CUDA code declares at least ``min_buffers`` ``__shared__`` buffers (static or ``extern``)."""
    bufs = [b for b in facts.shared if b.func in facts.reachable or (not b.func and "cuda" in facts.languages)]
    if len(bufs) >= min_buffers:
        return found(f"{len(bufs)} __shared__ buffer(s): {', '.join(b.name for b in bufs[:4])}",
                     [Span(b.line, b.line, f"__shared__ {b.type} {b.name}") for b in bufs[:4]], 0.9)
    return missing(f"{len(bufs)} __shared__ buffer(s), fewer than {min_buffers}", confidence=0.9)


def _stride_kind(names: set[str]) -> str | None:
    if any(n.startswith("gridDim") for n in names):
        return "grid"
    if any(n.startswith("blockDim") for n in names):
        return "block"
    return None


@check("stride_loop")
def stride_loop(facts: Facts, lang: str, *, kind: str = "grid") -> CheckResult:
    """A CUDA loop strides by the whole grid (``kind: grid``: ``i += blockDim.x * gridDim.x`` from a global thread
    index, or ``r += gridDim.x`` from ``blockIdx.x``), by the block (``kind: block``: ``i = threadIdx.x;
    i += blockDim.x``, the threads of one block sweeping a row) or by a warp (``kind: warp``: ``i = start + lane;
    i += 32``, consecutive lanes on consecutive elements; also a sub-warp of a template width, CSR-vector's
    ``lane = threadIdx.x & (VS - 1); i = start + lane; i += VS``)."""
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        for lp in fn.loops:
            if lp.step is None:
                continue
            step = lp.step
            if step.kind == "bin" and step.op == "+" and len(step.args) == 2 and lp.var:
                # i += 32: classify the increment, not i itself (whose start may come from blockDim-based math)
                inc = [x for x in step.args if not (x.kind == "name" and x.op == lp.var)]
                step = inc[0] if len(inc) == 1 else step
            step_names = {n.op for n, _, _ in fl.walk(step, fn, depth=3) if n.kind == "name"}
            start_names = {n.op for n, _, _ in fl.walk(lp.start, fn, depth=3) if n.kind == "name"} if lp.start else set()
            sk = _stride_kind(step_names)
            if kind == "grid" and (sk == "grid" or is_persistent(fl, fn, lp)):
                return found(f"grid-stride loop in {fn.name}", span(lp, "grid-stride loop"), 0.9)
            if kind == "block" and sk == "block" and any(n.startswith("threadIdx") for n in start_names):
                return found(f"block-stride loop in {fn.name}", span(lp, "block-stride loop"), 0.9)
            if kind == "warp" and sk is None and ("warpSize" in step_names or any(
                    n.kind == "const" and n.value == 32 for n in step.walk())) and start_names:
                return found(f"warp-stride loop (lanes over consecutive elements) in {fn.name}",
                             span(lp, "warp-stride loop"), 0.85)
            if kind == "warp" and lp.start is not None and step.kind == "name" and step.op in fn.constexprs and any(
                    n.kind == "bin" and n.op in ("&", "%") and len(n.args) == 2 and "threadIdx.x" in n.args[0].names()
                    and step.op in n.args[1].names() for n, _, _ in fl.walk(lp.start, fn, depth=4)):
                return found(f"lane-group stride loop (groups of {step.op} lanes over consecutive elements) in "
                             f"{fn.name}", span(lp, "sub-warp stride loop"), 0.8)
    return missing(f"no {kind}-stride loop in reachable CUDA code", confidence=0.85)


@check("warp_per_row")
def warp_per_row(facts: Facts, lang: str) -> CheckResult:
    """Each warp owns a row: a warp index (``threadIdx.x / 32``, ``>> 5``, ``/ warpSize``) is combined with
    ``blockIdx`` into the row index, and the lane index strides the columns."""
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        warp_vars = set()
        mem = fl.memory_ops(fn)
        for a in fn.assigns:
            for n in a.value.walk():
                if n.kind == "bin" and len(n.args) == 2 and "threadIdx.x" in n.args[0].names() and (
                        (n.op == "/" and (fl.fold(n.args[1], fn) == 32 or "warpSize" in n.args[1].names()))
                        or (n.op == ">>" and fl.fold(n.args[1], fn) == 5)):
                    warp_vars.update(a.targets)
                    break
            if set(a.targets) & warp_vars and any(x.startswith("blockIdx") for x in a.value.names()):
                row = a.targets[0]  # row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, in one expression
                used = [c for _, c, _ in mem if fl.refs(c.expr.args[0], fn, row)] if mem else []
                if used:
                    return found(f"row index {row} from blockIdx and warp id in {fn.name}",
                                 [Span(a.line, a.end_line, "row = block * warps + warp"),
                                  span(used[0], "row access")], 0.85)
        if not warp_vars:
            continue
        for a in fn.assigns:
            if a.value.kind == "other":
                continue
            names = a.value.names()
            if not (names & warp_vars and any(x.startswith("blockIdx") for x in names)) or set(a.targets) & warp_vars:
                continue
            row = a.targets[0]
            used = [c for _, c, _ in mem if fl.refs(c.expr.args[0], fn, row)] if mem else []
            if used:
                return found(f"row index {row} from blockIdx and warp id in {fn.name}",
                             [Span(a.line, a.end_line, "row = block * warps + warp"), span(used[0], "row access")],
                             0.85)
    return missing("no row index built from a warp index", confidence=0.8)


_ARRAY = re.compile(r"^(?P<type>.+?)\s+(?P<name>\w+)\[(?P<dims>.*)\]$")


def _compile_time(dim: str, fn: Function, facts: Facts) -> bool:
    """Is an array extent a compile-time expression (``ITEMS * V``, ``WM / 16``): every name in it a template
    parameter, a ``constexpr`` local or a constant? Its value is not known, but registers can hold it."""
    names = re.findall(r"[A-Za-z_]\w*", dim)
    return bool(names) and all(n in fn.constexprs or n in facts.consts for n in names) and not re.search(
        r"[^\w\s*+/()%-]", dim)


@check("register_array")
def register_array(facts: Facts, lang: str, *, min_size: int = 2) -> CheckResult:
    """A reachable CUDA kernel keeps a per-thread array of at least ``min_size`` elements in registers
    (``float v[8];``, a local array of compile-time size, not ``__shared__``)."""
    for t in facts.reachable_tokens("array"):
        m = _ARRAY.match(t.text)
        fn = facts.functions.get(t.func)
        if not m or fn is None:
            continue
        size = 1
        for d in m.group("dims").split("]["):
            v = facts.consts.get(d.strip())
            if v is None:
                try:
                    v = int(d.strip().rstrip("uUlL"))
                except ValueError:
                    v = min_size if _compile_time(d, fn, facts) else None
            if v is None:
                size = 0
                break
            size *= int(v)
        if size >= min_size:
            return found(f"register array {m.group('name')}[{m.group('dims')}] in {fn.name}",
                         Span(t.line, t.end_line, "per-thread array"), 0.8)
    return missing(f"no per-thread register array of >= {min_size} elements", confidence=0.75)


@check("template_variants")
def template_variants(facts: Facts, lang: str, *, min: int = 2) -> CheckResult:
    """The host launches one CUDA kernel template with at least ``min`` different template arguments (tile shapes
    chosen per problem shape: ``gemm<128, 256, 64><<<...>>>`` in one branch, ``gemm<128, 128, 64>`` in another)."""
    by_kernel: dict[str, dict[str, object]] = {}
    for la in facts.launches:
        if la.kernel in facts.functions and facts.functions[la.kernel].lang == "cuda" and la.template:
            for t in _instantiations(facts, la):
                by_kernel.setdefault(la.kernel, {})[t] = la
    for k, variants in by_kernel.items():
        if len(variants) >= min:
            return found(f"{facts.functions[k].name} launched with {len(variants)} template configurations",
                         [span(la, f"<{t}>") for t, la in list(variants.items())[:4]], 0.8)  # type: ignore[arg-type]
    return missing(f"no kernel template launched with {min} different configurations", confidence=0.75)


def _instantiations(facts: Facts, la: Launch) -> list[str]:
    """The template arguments a launch runs with: its own, or, when they are the template parameters of the host
    function around it (``template <int BM, int BN> void run(...) { gemm<BM, BN><<<...>>>(...); }``), those of
    every call of that host function (``run<128, 256>(...)``, ``run<128, 128>(...)``)."""
    caller = facts.functions.get(la.caller)
    names = set(re.findall(r"[A-Za-z_]\w*", la.template))
    if caller is None or not caller.constexprs or not names <= caller.constexprs:
        return [la.template]
    calls = [str(c.expr.value).replace(" ", "") for f in facts.hosts("cuda") for c in f.calls
             if "cu:" + c.name.split("::")[-1] == caller.key and c.expr.value]
    return calls or [la.template]
