"""Static checks of task ``flash_decoding``: the ones only its rubric (``rubrics/flash_decoding.yaml``) uses.

- ``kv_load_shared_by_heads``
- ``partials_merge_kernel``
- ``prescaled_lowp_dot_operand``
- ``small_m_dot_paths``
- ``split_count_from_sms``
- ``split_online_loop``
"""

from __future__ import annotations

from d2kgrade.static.checks.tensorcore import cuda_tensor_core
from d2kgrade.static.checkutil import code, is_persistent, matches, span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function, Loop
from d2kgrade.static.patterns.access import access_base, call_of, loads_feeding, unit_arange, value_nodes
from d2kgrade.static.patterns.config import param_values
from d2kgrade.static.patterns.names import SM_SOURCES
from d2kgrade.static.patterns.reductions import online
from d2kgrade.static.patterns.roles import launch_tensors
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

LOW_PRECISION = ("bf16", "fp16", "fp8")


def _step_amount(lp: Loop) -> Expr | None:
    """What one iteration adds to the loop variable (``range(lo, hi, STEP)``; C ``t += STEP``)."""
    if lp.kind in ("range", "tl.range"):
        return lp.step
    st = lp.step
    if st is not None and st.kind == "bin" and st.op == "+" and len(st.args) == 2:
        a, b = st.args
        if a.kind == "name" and a.op == lp.var:
            return b
        if b.kind == "name" and b.op == lp.var:
            return a
    return None


def _sm_source(fl: Flow, e: Expr, fn: Function) -> Expr | None:
    """A host value ``e`` is computed from the SM count (followed through host variables, helper returns and, from
    a C++ host function, back to the Python call that passes it)."""
    for n, _, _ in fl.walk(e, fn, depth=10, params=True):
        if n.kind in ("call", "name", "attr") and (matches(n.op, SM_SOURCES) or n.op.rsplit(".", 1)[-1] in SM_SOURCES):
            return n
        if n.kind == "const" and isinstance(n.value, str) and n.value in SM_SOURCES:
            return n
    return None


def _grid_axes(grid: Expr | None) -> list[Expr]:
    if grid is None:
        return []
    if grid.kind == "tuple" or (grid.kind == "call" and grid.op == "dim3"):
        return list(grid.args)
    return [grid]


def _guards(fn: Function) -> list[Expr]:
    """The ``if`` conditions of a function's statements (a negated one by its condition), once each."""
    out: list[Expr] = []
    seen: set[int] = set()
    for x in list(fn.assigns) + list(fn.calls) + list(fn.loops):
        for g in x.guards:
            g = g.args[0] if g.kind == "unary" and g.op == "not" and g.args else g
            if id(g) not in seen:
                seen.add(id(g))
                out.append(g)
    return out


def _dot_operand_loads(fl: Flow, fn: Function, dot: Expr) -> list[Expr]:
    return loads_feeding(fl, dot.args[0], fn, 4) if dot.args else []


def _lead_row_sizes(fl: Flow, ptr: Expr, fn: Function) -> list[Expr]:
    """Sizes of the aranges that index the leading (row) axis of a 2-D address (``rows[:, None]``)."""
    out = []
    for n, f, _ in fl.walk(ptr, fn, depth=4):
        if f is not fn or n.kind != "sub" or len(n.args) != 3:
            continue
        lead, rest = n.args[1], n.args[2]
        if lead.kind == "other" and lead.op == "slice" and rest.kind == "const" and rest.value is None:
            for x, xf, _ in fl.walk(n.args[0], fn, depth=3):
                if x.kind == "call" and x.op == "tl.arange" and len(x.args) == 2:
                    out.append(x.args[1])
    return out


@check("split_online_loop")
def split_online_loop(facts: Facts, lang: str, *, min_step: int = 32) -> CheckResult:
    """A loop over one program's slice of the sequence (its bounds come from the program id; not a persistent
    loop) carries an online softmax (a running max and a sum rescaled by exp(m_old - m_new)) and advances at least
    ``min_step`` positions per iteration (a tile). A loop that moves a known smaller number of positions per
    iteration (one per warp) is not a tile loop; a step known only at run time counts as a tile."""
    fl = flow(facts)
    best = "no loop with program-id bounds carries an online softmax"
    for fn in code(facts, lang):
        for lp in fn.loops:
            if is_persistent(fl, fn, lp):
                continue
            if not any(e is not None and fl.pid_derived(e, fn) for e in (lp.start, lp.stop)):
                continue
            pair = online(fl, fn, lp)
            if pair is None:
                continue
            amount = _step_amount(lp)
            if amount is not None:
                vals = [v for v in param_values(fl, fn, amount) if v is not None]
                if vals and min(vals) < min_step:
                    best = (f"the split loop at line {lp.line} of {fn.name} advances {min(vals)} positions per "
                            f"iteration (< {min_step})")
                    continue
            return found(f"{fn.name}: the loop at line {lp.line} covers the program's slice with an online softmax "
                         f"({pair[0]}, {pair[1]})", span(lp, "split loop"), 0.85)
    return missing(best, confidence=0.8)


@check("split_count_from_sms")
def split_count_from_sms(facts: Facts, lang: str) -> CheckResult:
    """The number of splits is a launch-grid extent computed on the host from the SM count, and the one-split case
    skips the merge: a launch sits under a host condition on that count (the merge only when S > 1, a direct
    launch when S == 1), or a kernel parameter computed from it is tested by a branch of the kernel (a
    direct-write specialisation)."""
    fl = flow(facts)
    best = "no launch grid extent is computed from the SM count"
    for la in facts.launches:
        k = facts.functions.get(la.kernel)
        caller = facts.functions.get(la.caller)
        if k is None or caller is None:
            continue
        if lang == "triton" and k.lang != "py" or lang == "cuda" and k.lang != "cuda":
            continue
        src = None
        for ax in _grid_axes(la.grid):
            src = _sm_source(fl, ax, caller)
            if src is not None:
                break
        if src is None:
            continue
        # the host variables of the grid that carry the SM count (the split count S)
        counts = {n.op for ax in _grid_axes(la.grid) for n in value_nodes(ax, caller, 3) if n.kind == "name"
                  and _sm_source(fl, n, caller) is not None}
        best = f"the grid of {k.name} follows the SM count, but nothing skips the merge for one split"
        for h in facts.hosts():
            for c in h.calls:
                if c.name != "launch" or h is not caller:
                    continue
                for g in c.guards:
                    if {n.op for n in value_nodes(g, h, 2) if n.kind == "name"} & counts:
                        return found(f"split count from the SM count ({src.op}); a launch depends on it",
                                     [span(la, "split grid"), Span(c.line, c.end_line, "conditional launch")], 0.8)
        for la2 in facts.launches:
            k2 = facts.functions.get(la2.kernel)
            c2 = facts.functions.get(la2.caller)
            if k2 is None or c2 is None:
                continue
            for g in _guards(k2):
                names = {n.op for n in g.walk() if n.kind == "name"}
                if not names or not names <= set(k2.params) | set(facts.consts):
                    continue  # a condition on run-time data (an atomic's result...), not on the split count alone
                for p in sorted(names & set(k2.params)):
                    arg = fl.launch_arg(la2, k2, p)
                    if arg is not None and _sm_source(fl, arg, c2) is not None:
                        return found(f"split count from the SM count ({src.op}); {k2.name} branches on {p}, set "
                                     f"from it", [span(la, "split grid"), span(la2, f"{p} from the split count"),
                                                  Span(g.line, g.end_line, "branch")], 0.8)
    return missing(best, confidence=0.75)


@check("prescaled_lowp_dot_operand")
def prescaled_lowp_dot_operand(facts: Facts, lang: str) -> CheckResult:
    """An operand of ``tl.dot`` is loaded data multiplied by a scale and then rounded to 16 bits (``(q *
    qk_scale).to(tl.bfloat16)``): the scale is applied before the MMA in low precision. Usually negated."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        for c in fn.calls:
            if c.name != "tl.dot":
                continue
            for arg in c.expr.args[:2]:
                for n, f, _ in fl.walk(arg, fn, depth=3):
                    if n.kind != "cast" or n.op not in LOW_PRECISION or not n.args:
                        continue
                    inner = fl.root(n.args[0], f)
                    if inner.kind == "name":
                        defs = fl.defs(inner.op, f)
                        inner = defs[0].value if len(defs) == 1 else inner
                    if inner.kind != "bin" or inner.op != "*" or len(inner.args) != 2:
                        continue
                    sides = [bool(loads_feeding(fl, x, f, 4)) for x in inner.args]
                    if sides[0] != sides[1]:
                        return found(f"{fn.name}: a scaled operand is rounded to {n.op} before tl.dot",
                                     [Span(n.line, n.end_line, "scaled, then rounded"), span(c, "tl.dot")], 0.8)
    return missing("no tl.dot operand is scaled and then rounded to 16 bits", confidence=0.75)


@check("small_m_dot_paths")
def small_m_dot_paths(facts: Facts, lang: str, *, max_rows: int = 32) -> CheckResult:
    """Two score paths in one kernel: a ``tl.dot`` whose first operand is a loaded block of at most ``max_rows``
    rows (a constant, or a size computed on the host such as ``max(16, next_power_of_2(G))``), and FMA dot products
    (a reduction of the product of a block loaded before a loop with a tile loaded in it) for a single row."""
    fl = flow(facts)
    best = "no tl.dot in reachable kernels"
    for fn in code(facts, "triton"):
        dots = [c for c in fn.calls if c.name == "tl.dot"]
        if not dots:
            continue
        small = None
        for d in dots:
            for ld in _dot_operand_loads(fl, fn, d.expr):
                ptr = ld.kw("pointer", 0)
                sizes = _lead_row_sizes(fl, ptr, fn) if ptr is not None else []
                if not sizes:
                    continue
                vals = [v for s in sizes for v in param_values(fl, fn, s)]
                known = [v for v in vals if v is not None]
                if known and max(known) > max_rows:
                    best = f"the tl.dot at line {d.line} of {fn.name} takes {max(known)} rows"
                    continue
                small = d
                break
            if small is not None:
                break
        if small is None:
            continue
        fma = _fma_scores(fl, fn)
        if fma is None:
            best = f"{fn.name} pads its rows for tl.dot but has no FMA dot-product path"
            continue
        return found(f"{fn.name}: small-M tl.dot and FMA dot products", [span(small, "small-M tl.dot"),
                                                                       span(fma, "FMA dot products")], 0.8)
    return missing(best, confidence=0.75)


def _fma_scores(fl: Flow, fn: Function) -> Call | None:
    """A reduction inside a loop of the product of a value loaded before that loop with a tile loaded in it."""
    for c in fn.calls:
        if c.name not in ("tl.sum",) or not c.loops or not c.expr.args:
            continue
        arg = c.expr.args[0]
        while arg.kind in ("cast",) and arg.args:
            arg = arg.args[0]
        if arg.kind != "bin" or arg.op != "*" or len(arg.args) != 2:
            continue
        inner_loop = c.loops[-1]
        where = []
        for side in arg.args:
            lds = loads_feeding(fl, side, fn, 3)
            where.append({inner_loop in (call_of(fn, ld).loops if call_of(fn, ld) else ()) for ld in lds})
        if (True in where[0] and False in where[1]) or (False in where[0] and True in where[1]):
            return c
    return None


_ALLOCS = ("torch.empty", "torch.zeros", "torch.full", "torch.ones", "torch.empty_strided")


@check("partials_merge_kernel")
def partials_merge_kernel(facts: Facts, lang: str, *, coalesced: bool = True, fp32: bool = True) -> CheckResult:
    """A later kernel merges what an earlier kernel stored, cheaply: with ``fp32``, every handed-over buffer whose
    host allocation is visible is allocated as float32 (``torch.empty(..., dtype=torch.float32)``, or the default
    dtype); with ``coalesced``, every read of it in a Triton merge kernel has a unit-stride innermost ``tl.arange``
    (a program reads whole partial rows, not one strided element per program)."""
    from d2kgrade.static.lower import dtype_of

    fl = flow(facts)
    launches = [la for la in facts.launches if la.kernel in facts.functions]
    if lang != "any":
        want = "py" if lang == "triton" else "cuda"
        launches = [la for la in launches if facts.functions[la.kernel].lang == want]

    def host_names(la, k: Function, params: set[str]) -> dict[str, str]:
        return launch_tensors(fl, la, params)

    best = "no kernel reads a buffer that an earlier kernel stored"
    for i, la1 in enumerate(launches):
        k1 = facts.functions[la1.kernel]
        out1 = host_names(la1, k1, {b for kind, _, bs in fl.memory_ops(k1) if kind == "store" for b in bs})
        caller = facts.functions.get(la1.caller)
        for la2 in launches[i + 1:]:
            k2 = facts.functions[la2.kernel]
            if k2 is k1:
                continue
            in2 = host_names(la2, k2, {b for kind, _, bs in fl.memory_ops(k2) if kind == "load" for b in bs})
            shared = set(out1.values()) & set(in2.values())
            if not shared:
                continue
            bad = ""
            if fp32 and caller is not None and caller.lang == "py":
                for var in sorted(shared):
                    for d in fl.defs(var, caller):
                        v = d.value
                        if v.kind == "call" and v.op in _ALLOCS:
                            dt = dtype_of(v.kw("dtype"))
                            if dt is not None and dt != "fp32":
                                bad = f"{var} is allocated as {dt}"
            if not bad and coalesced and k2.lang == "py":
                params = {p for p, v in in2.items() if v in shared}
                for kind, c, bs in fl.memory_ops(k2):
                    if kind != "load" or not bs & params:
                        continue
                    ptr = access_base(c)
                    scalar = ptr is not None and not any(
                        n.kind == "call" and n.op == "tl.arange" for n, _, _ in fl.walk(ptr, k2, depth=6))
                    if ptr is None or (not scalar and unit_arange(fl, ptr, k2) is None):
                        # a tile read with lanes across rows scatters; one scalar per split (its lse) does not
                        bad = (f"{k2.name} reads {', '.join(sorted(bs & params))} without a unit-stride tile "
                               f"(line {c.line})")
                        break
            if bad:
                best = bad
                continue
            return found(f"{k1.name} writes {', '.join(sorted(shared))}; {k2.name} merges it",
                         [span(la1, f"launch of {k1.name}"), span(la2, f"launch of {k2.name}")], 0.8)
    return missing(best, confidence=0.75)


@check("kv_load_shared_by_heads")
def kv_load_shared_by_heads(facts: Facts, lang: str) -> CheckResult:
    """CUDA: one load of the KV cache serves every query head of the group: the group's query rows packed into a
    tensor-core MMA (mma/wmma/wgmma issued), or, without tensor cores, a global load whose value is read inside a
    loop over the group's heads (``for (g = 0; g < G; ++g)``, G computed on the host as a ratio of head counts,
    ``Hq / Hkv``), with no reload inside that loop."""

    mma = cuda_tensor_core(facts, lang)
    if mma.passed:
        return mma
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        ratio_params = {p for p in fn.params if p not in fn.pointer_params and any(
            n.kind == "bin" and n.op in ("/", "//") for src, caller in fl.param_sources(fn, p)
            for n, _, _ in fl.walk(src, caller, depth=4))}
        if not ratio_params:
            continue
        head_loops = [lp for lp in fn.loops if lp.stop is not None and fl.refs(lp.stop, fn, next(iter(ratio_params)))
                      or any(lp.stop is not None and fl.refs(lp.stop, fn, p) for p in ratio_params)]
        loads = [c for kind, c, _ in fl.memory_ops(fn) if kind == "load"]
        for lp in head_loops:
            inside = [a for a in fn.assigns if lp.id in a.loops]
            for c in loads:  # a load of the position loop around the head loop, read inside the head loop
                if lp.id in c.loops or lp.parent is None or lp.parent not in c.loops:
                    continue
                reads = [a for a in inside if any(n is c.expr for n, _, _ in fl.walk(a.value, fn, depth=4))]
                if reads:
                    return found(f"{fn.name} loads the cache once per position and uses it for each head of the group "
                                 f"(loop at line {lp.line})", [span(c, "one load"), span(lp, "loop over heads")], 0.75)
    return missing("no cache load reused across a loop over the query heads of a group", confidence=0.7)
