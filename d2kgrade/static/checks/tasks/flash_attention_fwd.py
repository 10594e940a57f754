"""Static checks of task ``flash_attention_fwd``: the ones only its rubric (``rubrics/flash_attention_fwd.yaml``) uses.

- ``causal_blocks_skipped``
- ``head_group_mapping``
- ``renormalised_in_kv_loop``
- ``reversed_pid``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import Flow, Site, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function, Loop
from d2kgrade.static.patterns.access import access_address, has_arange
from d2kgrade.static.patterns.liveness import evaluated_sites
from d2kgrade.static.patterns.reductions import is_max_update, online, rescale
from d2kgrade.static.patterns.roles import entry_params
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


@check("reversed_pid")
def reversed_pid(facts: Facts, lang: str) -> CheckResult:
    """Work items are taken in reverse launch order (``start_m = num_blocks - 1 - tl.program_id(0)``), or in
    reverse claim order from an atomic work counter (``m = num_m - 1 - tile // n`` with ``tile =
    tl.atomic_add(counter, 1)``), so the heaviest blocks start first."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for a in fn.assigns:
            for n in a.value.walk():
                if n.kind == "bin" and n.op == "-" and len(n.args) == 2 and _pid_index(fl, n.args[1], fn) \
                        and not _pid_index(fl, n.args[0], fn):
                    return found(f"reversed program order in {fn.name}", Span(a.line, a.end_line, "n - pid"), 0.8)
    return missing("program ids are used in launch order", confidence=0.8)


CLAIMS = {"tl.atomic_add", "atomicAdd"}
_INDEX_CALLS = {"tl.cdiv", "tl.minimum", "tl.maximum", "min", "max", "tl.num_programs", "tl.multiple_of"}


def _pid_index(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> bool:
    """Is ``e`` integer index arithmetic on the program id (``pid // G``, ``rest % n_m``) or on a work id claimed
    from an atomic counter, not data that merely passed through a load or a dot addressed by it (a running max is
    not a tile index)?"""
    if depth > 14:
        return False
    k = e.kind
    if k == "call":
        if e.op == "tl.program_id":
            return True
        if e.op in CLAIMS and len(e.args) >= 2 and fl.fold(e.args[1], fn) is not None:
            return True  # a work id claimed from an atomic counter: tile = tl.atomic_add(counter, 1)
        return e.op in _INDEX_CALLS and any(_pid_index(fl, x, fn, depth + 1) for x in e.args)
    if k == "name":
        if e.op.startswith("blockIdx"):
            return True
        return any(d.value.kind != "other" and _pid_index(fl, d.value, fn, depth + 1) for d in fl.defs(e.op, fn))
    if k in ("bin", "unary", "ternary", "cast"):
        return any(_pid_index(fl, x, fn, depth + 1) for x in e.args)
    return False


@check("head_group_mapping")
def head_group_mapping(facts: Facts, lang: str, *, fastest: bool = False) -> CheckResult:
    """Query heads that share a KV head are mapped to neighbouring programs: a program-id-derived head index is
    divided by the group size (``kv_head = q_head // (HQ // HKV)``, or the group member taken as ``pid % GROUP``
    with ``GROUP = HQ // HKV``), so the heads reading the same K/V run side by side. ``fastest``: the group member
    is the fastest-varying digit of the launch order (``tl.program_id(0) % GROUP``, ``blockIdx.x % G``), so the
    G heads of a KV head run at the same moment (a grid whose fastest axis is the query tile does not count). Or
    the G query heads are packed into one program's rows (PackGQA): the query load's row index holds a head
    offset ``rows // ROWS`` (an ``arange`` divided by a compile-time size), so one K/V load serves them all."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for a in fn.assigns:
            for n in a.value.walk():
                if n.kind != "bin" or n.op not in ("//", "%", "/") or len(n.args) != 2:
                    continue
                if n.op == "/" and fn.lang != "cuda":
                    continue
                left, right = n.args
                if fastest and (n.op != "%" or not _launch_index(fl, left, fn, site_of(a))):
                    continue
                if not fl.pid_derived(left, fn):
                    continue
                for x, f, _ in fl.walk(right, fn, depth=3):
                    if x.kind == "bin" and x.op in ("//", "/") and len(x.args) == 2 and all(
                            y.kind == "name" and fl.fold(y, f) is None for y in x.args):
                        return found(f"head index {a.targets[0]} grouped by a head ratio in {fn.name}",
                                     Span(a.line, a.end_line, "q heads -> kv head"), 0.75)
    packed = _packed_query_heads(fl, facts)
    if packed is not None:
        fn, c = packed
        return found(f"{fn.name} stacks the query heads of a KV head in one tile (PackGQA)", span(c, "q rows"), 0.75)
    if fastest:
        return missing("the fastest launch index is never split by a query/KV head ratio", confidence=0.7)
    return missing("no program-id head index divided by a query/KV head ratio", confidence=0.7)


def _launch_index(fl: Flow, e: Expr, fn: Function, site: Site | None = None) -> bool:
    """Is ``e`` (read at ``site``) the launch index itself (``tl.program_id(0)``, ``blockIdx.x``), possibly through
    a plain copy (``pid = tl.program_id(0)``; later ``pid = pid // G`` redefinitions do not reach ``site``)?"""
    r = fl.root(e, fn)
    if r.kind == "name" and r.op == "blockIdx.x":
        return True
    if r.kind == "name":
        defs = fl.defs(r.op, fn)
        if site is not None:
            defs = [d for d in defs if fl.reaches(d, site, defs)]
        r = defs[0].value if len(defs) == 1 else r
    if r.kind == "call" and r.op == "tl.program_id":
        ax = r.kw("axis", 0)
        return ax is not None and fl.fold(ax, fn) == 0
    return r.kind == "name" and r.op == "blockIdx.x"


def _packed_query_heads(fl: Flow, facts: Facts) -> tuple[Function, Call] | None:
    """A Triton load of the queries (input 0) whose address holds ``tl.arange(...) // C`` with ``C`` a
    compile-time size: the tile's rows span several heads."""
    for fn in code(facts, "triton"):
        targets = entry_params(fl, facts, fn, 0)
        for kind, c, bases in fl.memory_ops(fn):
            if kind != "load" or not (bases & targets):
                continue
            addr = access_address(c)
            for n, f, _ in fl.walk(addr, fn, depth=6) if addr is not None else ():
                if f is fn and n.kind == "bin" and n.op == "//" and len(n.args) == 2 and has_arange(fl, n.args[0], fn) \
                        and _compile_time(fl, n.args[1], fn):
                    return fn, c
    return None


def _compile_time(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> bool:
    """A compile-time value: a literal, a constexpr parameter or module constant, or a local built from them
    (``ROWS: tl.constexpr = BLOCK_M // G``)."""
    if fl.fold(e, fn) is not None:
        return True
    if e.kind == "name":
        if e.op in fn.constexprs or e.op in fl.facts.consts:
            return True
        defs = fl.defs(e.op, fn)
        return depth < 4 and bool(defs) and all(_compile_time(fl, d.value, fn, depth + 1) for d in defs)
    if e.kind == "bin" and depth < 4:
        return all(_compile_time(fl, x, fn, depth + 1) for x in e.args)
    return False


def _online_loops(fl: Flow, fn: Function) -> list[tuple[Loop, str, str]]:
    out = []
    for lp in fn.loops:
        ms = online(fl, fn, lp)
        if ms is not None:
            out.append((lp, ms[0], ms[1]))
    return out


def _rescaled_sums(fl: Flow, fn: Function, lp: Loop) -> set[str]:
    """Every carried value of ``lp`` rescaled by the running max (the denominator l, the output accumulator)."""
    by_var = fl.carried(fn).get(lp.id, {})
    maxes = [m for m, ups in by_var.items() if any(is_max_update(fl, fn, a, m, lp) for a in ups)]
    return {v for v, ups in by_var.items() for m in maxes if v != m
            and any(rescale(fl, fn, a, v, m, lp) is not None for a in ups)}


@check("renormalised_in_kv_loop")
def renormalised_in_kv_loop(facts: Facts, lang: str) -> CheckResult:
    """Inside the loop that carries an online softmax (a running max and a rescaled running sum), values are
    divided by the running sum: the output is renormalised on every K/V block instead of once after the loop.
    Usually negated. A division after that loop (once per tile, even inside a persistent loop over tiles, or in
    a store loop) does not count."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for lp, _m, _s in _online_loops(fl, fn):
            sums = _rescaled_sums(fl, fn, lp)
            for e, site in evaluated_sites(fn):
                if lp.id not in site[1]:
                    continue
                for n in e.walk():
                    if n.kind == "bin" and n.op == "/" and len(n.args) == 2 and any(
                            _reads_sum(fl, fn, n.args[1], s_var, lp) for s_var in sums):
                        return found(f"{fn.name} divides by the running sum inside the K/V loop at line {lp.line}",
                                     [span(n, "per-block division"), span(lp, "K/V loop")], 0.8)
    return missing("no division by the running sum inside the online-softmax loop", confidence=0.8)


def _reads_sum(fl: Flow, fn: Function, e: Expr, s_var: str, lp: Loop) -> bool:
    """Does ``e`` read the running sum, directly or through a value of the same iteration (``new_sum = l *
    alpha + rowsum(p)``)?"""
    names = e.names()
    if s_var in names:
        return True
    return any(s_var in a.value.names() for n in names for a in fn.defs().get(n, []) if lp.id in a.loops)


@check("causal_blocks_skipped")
def causal_blocks_skipped(facts: Facts, lang: str) -> CheckResult:
    """Causal block skipping: a loop carrying an online softmax has a bound that depends on the query block (the
    program id or a claimed work id: blocks right of the diagonal are never visited), and the causal mask is not
    evaluated on every block: either a second sibling loop over the diagonal band carries the same softmax (a
    mask-free stage then a masked stage, also through one helper inlined twice), or the mask (``tl.where``) sits
    under a branch on the loop position (only blocks that cross the diagonal take it)."""
    fl = flow(facts)
    reason = "no online-softmax loop bounded by the query block"
    for fn in code(facts, "triton"):
        loops = _online_loops(fl, fn)
        bounded = [(lp, m, s) for lp, m, s in loops
                   if any(e is not None and (fl.pid_derived(e, fn) or _pid_index(fl, e, fn)) for e in (lp.start, lp.stop))]
        if not bounded:
            continue
        lp0 = bounded[0][0]
        siblings = [lp for lp, _, _ in loops if lp.parent == lp0.parent]
        if len(siblings) >= 2:
            return found(f"{fn.name}: {len(siblings)} K/V stages, bounded by the query block", [
                span(lp, "stage") for lp in siblings[:2]], 0.8)
        for lp, _, _ in bounded:
            for c in fn.calls:
                if c.name != "tl.where" or lp.id not in c.loops:
                    continue
                if any(lp.var is not None and lp.var in g.names() or _loop_defined(fn, g, lp) for g in c.guards):
                    return found(f"{fn.name}: the causal mask is applied only on blocks that cross the diagonal",
                                 [span(lp, "K/V loop"), span(c, "masked block")], 0.75)
        reason = f"{fn.name} bounds its K/V loop by the query block but masks every block"
    return missing(reason, confidence=0.7)


def _loop_defined(fn: Function, g: Expr, lp: Loop) -> bool:
    """Does guard ``g`` read a value defined inside ``lp`` (``diag = n0 + BN > q0`` computed per block)?"""
    return any(lp.id in a.loops for n in g.names() for a in fn.defs().get(n, []))
