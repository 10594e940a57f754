"""Work decomposition checks: block sizes, grids, persistent loops, tile order, autotuning, pipelining depth."""

from __future__ import annotations

from d2kgrade.static.checkutil import control_names, as_list, code, is_persistent, matches, span, tile_loop_refs
from d2kgrade.static.dataflow import Flow, Site, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import COMPUTED, Expr, Function
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

SM_SOURCES = ["multi_processor_count", "multiprocessor_count", "multiProcessorCount", "cudaDevAttrMultiProcessorCount",
              "get_device_properties"]


def _host_calls(fl: Flow, e: Expr, fn: Function, names: list[str]) -> Expr | None:
    for node, _, _ in fl.walk(e, fn, depth=6):
        if node.kind in ("call", "name", "attr") and (matches(node.op, names) or node.op.rsplit(".", 1)[-1] in names):
            return node
        if node.kind == "const" and isinstance(node.value, str) and node.value in names:
            return node
    return None


def _block_params(fl: Flow, fn: Function, source: list[str]) -> list[tuple[str, Expr]]:
    """Constexpr parameters whose launch value (or heuristic) comes from a call in ``source``."""
    out = []
    for p in sorted(fn.constexprs):
        srcs = fl.param_sources(fn, p)
        if p in fn.heuristics:
            srcs.append((fn.heuristics[p], fl.facts.functions["<module>"]))
        for e, caller in srcs:
            hit = _host_calls(fl, e, caller, source)
            if hit is not None:
                out.append((p, hit))
                break
    return out


@check("whole_row_block")
def whole_row_block(facts: Facts, lang: str, *, source: str | list[str] = "next_power_of_2") -> CheckResult:
    """A kernel's block size comes from ``source`` on the host (``triton.next_power_of_2(N)``) and a load covers
    ``tl.arange(0, BLOCK)`` outside any loop that steps over that block: the whole row sits in registers."""
    fl = flow(facts)
    src = [s if "." in s else f"triton.{s}" for s in as_list(source)] + as_list(source)
    for fn in code(facts, "triton"):
        blocks = _block_params(fl, fn, src)
        for p, hit in blocks:
            for kind, c, _ in fl.memory_ops(fn):
                if kind != "load":
                    continue
                ptr = c.expr.kw("pointer", 0)
                if ptr is None:
                    continue
                uses = any(n.kind == "call" and n.op == "tl.arange" and len(n.args) == 2 and n.args[1].kind == "name"
                           and fl.root(n.args[1], fn).op == p for n, f, _ in fl.walk(ptr, fn) if f is fn)
                if not uses:
                    continue
                if any(tile_loop_refs(fl, fn, lp, p) for lp in fn.loops if lp.id in c.loops):
                    continue
                return found(f"{fn.name} loads tl.arange(0, {p}) in one piece, with {p} from {hit.op} on the host",
                             [span(c, "whole-row load"), Span(hit.line, hit.end_line, f"{p} on the host")], 0.85)
    return missing(f"no kernel loads a whole row with a block size from {' / '.join(as_list(source))}",
                   confidence=0.8)


@check("num_warps_from_block")
def num_warps_from_block(facts: Facts, lang: str, *, min_fixed: int | None = None) -> CheckResult:
    """``num_warps`` is chosen from the problem/block size: a launch passes a computed (non-literal) ``num_warps``
    that depends on a value the launch also uses, or the autotuner/heuristics choose among several values. With
    ``min_fixed``, a constant ``num_warps`` of at least that many warps also counts (enough warps for the
    largest rows)."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        if fn.autotune and len({c.num_warps for c in fn.autotune.configs if c.num_warps is not None}) >= 2:
            return found(f"autotune over num_warps for {fn.name}", Span(fn.autotune.line, fn.autotune.end_line), 0.8)
        if "num_warps" in fn.heuristics:
            e = fn.heuristics["num_warps"]
            return found(f"heuristic num_warps for {fn.name}", span(e, "num_warps heuristic"), 0.85)
        for la in fl.launches_of(fn):
            nw = la.kwargs.get("num_warps")
            caller = facts.functions.get(la.caller)
            if nw is None or caller is None:
                continue
            fixed = fl.fold(nw, caller)
            if fixed is not None:
                if min_fixed is not None and isinstance(fixed, int) and fixed >= min_fixed:
                    return found(f"{fixed} warps for {fn.name} at every size (>= {min_fixed})",
                                 [span(nw, "num_warps"), span(la, "launch")], 0.7)
                continue
            other = {n.op for e in list(la.args) + [v for k, v in la.kwargs.items() if k != "num_warps"]
                     for n, _, _ in fl.walk(e, caller, depth=3) if n.kind == "name"}
            deps = {n.op for n, _, _ in fl.walk(nw, caller, depth=4) if n.kind in ("name", "call")}
            deps |= control_names(fl, nw, caller)  # num_warps = 4; if BLOCK >= 2048: num_warps = 8
            if deps & other or any(matches(d, ("triton.next_power_of_2", "next_power_of_2")) for d in deps):
                return found(f"num_warps computed from the block size for {fn.name}",
                             [span(nw, "num_warps"), span(la, "launch")], 0.8)
    return missing("num_warps is a constant (or absent) at every launch", confidence=0.75)


@check("persistent_loop")
def persistent_loop(facts: Facts, lang: str) -> CheckResult:
    """A reachable kernel loops over work items starting at its program id with a stride of the program count:
    ``for t in tl.range(pid, num_tiles, NUM_SMS)``, ``for (r = blockIdx.x; r < M; r += gridDim.x)``."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for lp in fn.loops:
            if is_persistent(fl, fn, lp):
                return found(f"persistent loop in {fn.name}", span(lp, "loop over work items"), 0.85)
    return missing("no loop over work items strided by the number of programs", confidence=0.85)


@check("grid_size_from")
def grid_size_from(facts: Facts, lang: str, *, source: str | list[str] | None = None) -> CheckResult:
    """A launch's grid is computed from ``source`` (default: the SM count: ``multi_processor_count``,
    ``cudaDevAttrMultiProcessorCount``...), followed through host variables and the grid lambda."""
    fl = flow(facts)
    names = as_list(source) or SM_SOURCES
    for la in facts.launches:
        if la.kernel not in facts.functions:
            continue
        k = facts.functions[la.kernel]
        if lang == "triton" and k.lang != "py" or lang == "cuda" and k.lang != "cuda":
            continue
        caller = facts.functions.get(la.caller)
        if caller is None or la.grid is None:
            continue
        hit = _host_calls(fl, la.grid, caller, names)
        if hit is None and caller.lang == "cuda":  # cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, d)
            for c in caller.calls:
                if not any(matches(n, names) or n.rsplit(".", 1)[-1] in names for n in c.expr.names() | {c.name}):
                    continue
                outs = {x.args[0].op for x in c.expr.walk() if x.kind == "unary" and x.op == "&" and x.args
                        and x.args[0].kind == "name"}
                if any(fl.refs(la.grid, caller, o) for o in outs):
                    hit = c.expr
                    break
        if hit is not None:
            return found(f"grid of {k.name} sized from {hit.op}", [span(la, "launch"),
                                                                     Span(hit.line, hit.end_line, "SM count")], 0.85)
    return missing(f"no launch grid computed from {' / '.join(names[:3])}", confidence=0.8)


@check("grouped_tile_order")
def grouped_tile_order(facts: Facts, lang: str) -> CheckResult:
    """Tiles are visited in grouped (swizzled) order: ``tl.swizzle2d``, or the program id floor-divided by a
    group size that is a product with a compile-time factor (``pid // (GROUP_M * num_pid_n)``) and reduced
    modulo it."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for c in fn.calls:
            if c.name == "tl.swizzle2d":
                return found(f"tl.swizzle2d in {fn.name}", span(c, "swizzle"), 0.9)
        group_vars: dict[str, Expr] = {}
        divs: list[tuple[Expr, Expr]] = []
        mods: list[tuple[Expr, Expr]] = []
        for a in fn.assigns:
            for n in a.value.walk():
                if n.kind == "bin" and len(n.args) == 2 and (
                        n.op in ("//", "%") or (n.op == "/" and fn.lang == "cuda")):  # C: int / int
                    (mods if n.op == "%" else divs).append((n, a.value))
        for node, _ in divs:
            left, right = node.args
            if not fl.pid_derived(left, fn):
                continue
            prod = _group_product(fl, right, fn)
            if prod is None:
                continue
            rn = right.op if right.kind == "name" else None
            has_mod = any(fl.pid_derived(m.args[0], fn) and (
                (rn and m.args[1].kind == "name" and m.args[1].op == rn) or _group_product(fl, m.args[1], fn))
                for m, _ in mods)
            if has_mod:
                group_vars[rn or "group"] = node
                return found(f"grouped tile order in {fn.name}: program id // group of {prod}",
                             span(node, "group index"), 0.85)
    return missing("tiles are visited in row-major (launch) order: no grouping or swizzle of the program id",
                   confidence=0.8)


def _group_product(fl: Flow, e: Expr, fn: Function) -> str | None:
    """``GROUP_M * n`` with a compile-time factor, after following names; returns its text or None."""
    for node, f, _ in fl.walk(e, fn, depth=3):
        if node.kind == "bin" and node.op == "*" and len(node.args) == 2:
            for x in node.args:
                if x.kind == "name" and fl.is_constexpr(x, f):
                    return f"{fl.root(x, f).op} * ..."
                if x.kind == "const" and isinstance(x.value, int):
                    return f"{x.value} * ..."
    return None


@check("autotune_configs")
def autotune_configs(facts: Facts, lang: str, *, min_configs: int = 2, require: list[str] | None = None,
                     vary: list[str] | None = None, any_value: dict[str, list] | None = None) -> CheckResult:
    """A reachable kernel is ``@triton.autotune``-d over at least ``min_configs`` configs with a ``key``; every
    field in ``require`` (``num_warps``, ``num_stages``, a meta-parameter) is set in the configs, and each field
    in ``vary`` takes at least two values (comprehension-generated configs are accepted as varying). With
    ``any_value`` (``{BLOCK_M: [16, 32, 64], BM: [16, 32, 64]}``) some config must set one of those fields to one
    of the listed values (small-M tiles, say)."""
    req = require or []
    for fn in code(facts, "triton"):
        at = fn.autotune
        if at is None:
            continue
        n = len(at.configs)
        problems = []
        if n < min_configs and not at.generated:
            problems.append(f"{n} config(s)")
        if not at.key:
            problems.append("no key")
        for r in req:
            have = [c for c in at.configs if (c.num_warps if r == "num_warps" else c.num_stages if r == "num_stages"
                                              else c.kwargs.get(r)) is not None or r in c.kwargs]
            if not have:
                problems.append(f"{r} never set")
        for v in vary or []:
            vals = {str(c.num_warps if v == "num_warps" else c.num_stages if v == "num_stages" else c.kwargs.get(v))
                    for c in at.configs}
            if len(vals) < 2 and not at.generated:
                problems.append(f"{v} does not vary")
        if any_value and not at.generated and not any(c.kwargs.get(k) in vals for c in at.configs
                                                      for k, vals in any_value.items()):
            problems.append(f"no config with {' or '.join(any_value)} in {list(any_value.values())[0]}")
        sp = Span(at.line, at.end_line, "autotune")
        if not problems:
            return found(f"{fn.name} autotuned over {n}{'+' if at.generated else ''} configs, key={at.key}", sp, 0.9)
        return missing(f"{fn.name} is autotuned but: {', '.join(problems)}", [sp], 0.85)
    return missing("no reachable kernel is autotuned", confidence=0.9)


@check("num_stages")
def num_stages(facts: Facts, lang: str, *, min: int = 3) -> CheckResult:  # noqa: A002
    """Software pipelining is asked for explicitly: ``num_stages >= min`` in an autotune config or at the launch of
    a kernel that has a loop, or ``tl.range(..., num_stages=k)``. (Triton's implicit default is not visible in the
    source and does not count.)"""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        for lp in fn.loops:
            ns = lp.options.get("num_stages")
            if ns is None:
                continue
            vals = [v for v in _param_values(fl, fn, ns) if v is not None]
            if not vals and fl.root(ns, fn).kind == "name":  # a config dict the analysis cannot follow
                vals = _keyword_values(facts, fl.root(ns, fn).op)
            if vals and max(vals) >= min:
                return found(f"tl.range(..., num_stages={max(vals)}) in {fn.name}", span(lp, "pipelined loop"), 0.8)
        if not fn.loops:
            continue
        if fn.autotune:
            vals = [c.num_stages for c in fn.autotune.configs if isinstance(c.num_stages, int)]
            if vals and max(vals) >= min:
                return found(f"autotune configs with num_stages up to {max(vals)} for {fn.name}",
                             Span(fn.autotune.line, fn.autotune.end_line, "configs"), 0.85)
            if any(c.num_stages == COMPUTED for c in fn.autotune.configs):  # as a computed launch value counts
                return found(f"autotune configs of {fn.name} set num_stages (computed)",
                             Span(fn.autotune.line, fn.autotune.end_line, "configs"), 0.7)
        for la in fl.launches_of(fn):
            ns = la.kwargs.get("num_stages")
            caller = facts.functions.get(la.caller)
            if ns is not None and caller is not None:
                v = fl.fold(ns, caller)
                if v is None or v >= min:
                    return found(f"launch of {fn.name} with num_stages={v if v is not None else '(computed)'}",
                                 span(la, "launch"), 0.8)
    return missing(f"no explicit num_stages >= {min} on a looping kernel", confidence=0.75)


def _keyword_values(facts: Facts, key: str) -> list[int]:
    """Integer values bound to keyword ``key`` anywhere in the host code (``dict(NUM_STAGES=4)``, ``NUM_STAGES=5``)."""
    out = []
    for f in facts.functions.values():
        if f.is_device:
            continue
        for e in [a.value for a in f.assigns] + [c.expr for c in f.calls]:
            for n in e.walk():
                v = (n.kwargs or {}).get(key)
                if v is not None and v.kind == "const" and isinstance(v.value, int) and not isinstance(v.value, bool):
                    out.append(v.value)
    return out


@check("program_id_axis")
def program_id_axis(facts: Facts, lang: str, *, axis: int = 1) -> CheckResult:
    """A reachable kernel indexes a grid axis ``axis`` (``tl.program_id(1)``, ``blockIdx.y``): a 2-D split of work."""
    fl = flow(facts)
    dims = {0: "blockIdx.x", 1: "blockIdx.y", 2: "blockIdx.z"}
    for fn in code(facts, lang):
        for c in fn.calls:
            if c.name == "tl.program_id" and (a := c.expr.kw("axis", 0)) is not None and fl.fold(a, fn) == axis:
                return found(f"tl.program_id({axis}) in {fn.name}", span(c), 0.9)
        for a in fn.assigns:
            if dims.get(axis, "") in a.value.names():
                return found(f"{dims[axis]} in {fn.name}", Span(a.line, a.end_line), 0.9)
    return missing(f"no kernel uses grid axis {axis}", confidence=0.85)


def _arange_dims(fl: Flow, e: Expr, fn: Function) -> int:
    """Rank of the broadcast tile an address expression builds from ``tl.arange`` (``a[:, None] + b[None, :]`` ->
    2); 1 for a plain ``tl.arange``; 0 when there is none."""
    rank = 0
    for n, f, _ in fl.walk(e, fn, depth=4):
        if n.kind == "sub" and n.args:
            idx = n.args[1:]
            if len(idx) >= 2 and any(i.kind == "const" and i.value is None for i in idx):
                inner = n.args[0]
                if any(x.kind == "call" and x.op == "tl.arange" for x, _, _ in fl.walk(inner, f, depth=3)):
                    rank = max(rank, len(idx))
        elif n.kind == "call" and n.op == "tl.arange":
            rank = max(rank, 1)
        elif n.kind == "call" and n.op in ("tl.make_block_ptr", "tl.make_tensor_descriptor"):
            shape = n.kw("block_shape")
            if shape is not None and shape.kind == "tuple":
                rank = max(rank, len(shape.args))
    return rank


@check("tile_rank")
def tile_rank(facts: Facts, lang: str, *, min: int = 2, op: str = "load",  # noqa: A002
              pid_rows: bool = False) -> CheckResult:
    """A reachable ``tl.load`` (``op: load``) or ``tl.store`` (``store``) addresses a tile of rank >= ``min`` built
    by broadcasting aranges (``rows[:, None] * stride + cols[None, :]``; 3 for ``[:, None, None]``), or a block
    pointer/descriptor of that rank: several rows (tokens, heads) per program. ``pid_rows``: the leading axis
    (``rows[:, None]``) is offset by the program id, i.e. the program owns those rows (not a ``[2, BLOCK]``
    tile of gathered halves)."""
    fl = flow(facts)
    best = 0
    for fn in code(facts, "triton"):
        for kind, c, _ in fl.memory_ops(fn):
            if kind != op or c.name.startswith("."):
                continue
            ptr = c.expr.kw("pointer", 0)
            r = _arange_dims(fl, ptr, fn) if ptr is not None else 0
            if pid_rows and r >= min and not _pid_lead_axis(fl, ptr, fn):
                continue
            best = max(best, r)
            if r >= min:
                return found(f"{r}-D tile {op} in {fn.name}", span(c, f"{r}-D tile"), 0.85)
    rows = " with program-owned rows" if pid_rows else ""
    return missing(f"no {op} of a tile of rank >= {min}{rows} (largest: {best})", confidence=0.8)


def _pid_lead_axis(fl: Flow, e: Expr, fn: Function) -> bool:
    """Does the address broadcast a program-id-derived index along its leading axis (``rows[:, None, ...]``)?"""
    for n, f, _ in fl.walk(e, fn, depth=4):
        if n.kind != "sub" or len(n.args) < 3:
            continue
        lead, rest = n.args[1], n.args[2:]
        if lead.kind == "other" and lead.op == "slice" and all(i.kind == "const" and i.value is None for i in rest):
            if fl.pid_derived(n.args[0], f):
                return True
    return False


def _arange_sizes(fl: Flow, e: Expr, fn: Function) -> list[Expr]:
    return [n.args[1] for n, f, _ in fl.walk(e, fn, depth=4) if f is fn and n.kind == "call" and n.op == "tl.arange"
            and len(n.args) == 2]


def _param_values(fl: Flow, fn: Function, e: Expr) -> list[int | None]:
    """Compile-time values an arange size takes: folded, from launch arguments, autotune configs or heuristics."""
    e = fl.root(e, fn)
    v = fl.fold(e, fn)
    if isinstance(v, int):
        return [v]
    if e.kind != "name" or e.op not in fn.params:
        return [None]
    out: list[int | None] = []
    if fn.autotune:
        out += [c.kwargs.get(e.op) if isinstance(c.kwargs.get(e.op), int) else None for c in fn.autotune.configs
                if e.op in c.kwargs]
    for src, caller in fl.param_sources(fn, e.op):
        sv = fl.fold(src, caller)
        out.append(sv if isinstance(sv, int) else None)
    return out or [None]


@check("work_per_program")
def work_per_program(facts: Facts, lang: str, *, min_elements: int = 2048) -> CheckResult:
    """Each program handles a tile of at least ``min_elements`` elements per load (the product of its
    ``tl.arange`` sizes, from constants, launch arguments or autotune configs); a size only known at run time
    (``triton.next_power_of_2(N)``) counts as large enough."""
    fl = flow(facts)
    best = 0
    for fn in code(facts, "triton"):
        for kind, c, _ in fl.memory_ops(fn):
            if kind != "load" or c.name.startswith("."):
                continue
            ptr = c.expr.kw("pointer", 0)
            sizes = _arange_sizes(fl, ptr, fn) if ptr is not None else []
            if not sizes:
                continue
            total: int | None = 1
            for s in sizes:
                vals = _param_values(fl, fn, s)
                known = [v for v in vals if v is not None]
                if len(known) < len(vals):
                    total = None
                    break
                total = (total or 1) * min(known)
            if total is None or total >= min_elements:
                return found(f"{fn.name} loads tiles of " + (f"{total}" if total else "run-time sized")
                             + " elements", span(c, "tile load"), 0.75)
            best = max(best, total)
    return missing(f"tiles of at most {best} elements per load, fewer than {min_elements}", confidence=0.75)


@check("pid_bounded_loop")
def pid_bounded_loop(facts: Facts, lang: str, *, include_persistent: bool = False) -> CheckResult:
    """A loop's range bound depends on the program id but the loop is not a persistent one (``for n in
    tl.range(0, (start_m + 1) * BLOCK_M, BLOCK_N)``): work skipped or partitioned per program, as in causal block
    skipping or a split-K slice. ``include_persistent``: persistent loops count too (any per-program partition of
    the iteration space, as Stream-K needs)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for lp in fn.loops:
            if not include_persistent and is_persistent(fl, fn, lp):
                continue
            for e in (lp.stop, lp.start):
                if e is not None and fl.pid_derived(e, fn):
                    return found(f"loop bound from the program id in {fn.name}", span(lp, "bounded loop"), 0.8)
    return missing("no loop whose bounds depend on the program id", confidence=0.8)


@check("reversed_pid")
def reversed_pid(facts: Facts, lang: str) -> CheckResult:
    """Work items are taken in reverse launch order (``start_m = num_blocks - 1 - tl.program_id(0)``), so the
    heaviest blocks start first."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for a in fn.assigns:
            for n in a.value.walk():
                if n.kind == "bin" and n.op == "-" and len(n.args) == 2 and _pid_index(fl, n.args[1], fn) \
                        and not _pid_index(fl, n.args[0], fn):
                    return found(f"reversed program order in {fn.name}", Span(a.line, a.end_line, "n - pid"), 0.8)
    return missing("program ids are used in launch order", confidence=0.8)


_INDEX_CALLS = {"tl.cdiv", "tl.minimum", "tl.maximum", "min", "max", "tl.num_programs", "tl.multiple_of"}


def _pid_index(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> bool:
    """Is ``e`` integer index arithmetic on the program id (``pid // G``, ``rest % n_m``), not data that merely
    passed through a load or a dot addressed by it (a running max is not a tile index)?"""
    if depth > 8:
        return False
    k = e.kind
    if k == "call":
        if e.op == "tl.program_id":
            return True
        return e.op in _INDEX_CALLS and any(_pid_index(fl, x, fn, depth + 1) for x in e.args)
    if k == "name":
        if e.op.startswith("blockIdx"):
            return True
        return any(d.value.kind != "other" and _pid_index(fl, d.value, fn, depth + 1) for d in fl.defs(e.op, fn))
    if k in ("bin", "unary", "ternary", "cast"):
        return any(_pid_index(fl, x, fn, depth + 1) for x in e.args)
    return False


@check("shape_dependent_blocks")
def shape_dependent_blocks(facts: Facts, lang: str) -> CheckResult:
    """Block sizes are chosen per problem shape: autotuned over several values of a block parameter with a
    ``key``, set by ``@triton.heuristics``, or computed on the host from the sizes at launch."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        if fn.autotune and fn.autotune.key:
            for p in fn.constexprs:
                vals = {str(c.kwargs.get(p)) for c in fn.autotune.configs if p in c.kwargs}
                if len(vals) >= 2:
                    return found(f"{fn.name}: {p} autotuned over {len(vals)} values",
                                 Span(fn.autotune.line, fn.autotune.end_line, "configs"), 0.8)
        for p in fn.constexprs:
            if p in fn.heuristics:
                return found(f"{fn.name}: {p} set by a heuristic", span(fn.heuristics[p], "heuristic"), 0.8)
        for la in fl.launches_of(fn):
            caller = facts.functions.get(la.caller)
            if caller is None:
                continue
            for p in sorted(fn.constexprs):
                e = fl.launch_arg(la, fn, p)
                if e is None or fl.fold(e, caller) is not None:
                    continue
                if any(n.kind == "call" and n.op == "tl.arange" and len(n.args) == 2 and n.args[1].kind == "name"
                       and fl.root(n.args[1], fn).op == p for c in fn.calls for n in c.expr.walk()):
                    return found(f"{fn.name}: block size {p} computed at launch", span(la, "launch"), 0.75)
    return missing("block sizes are the same for every shape", confidence=0.75)


@check("head_group_mapping")
def head_group_mapping(facts: Facts, lang: str, *, fastest: bool = False) -> CheckResult:
    """Query heads that share a KV head are mapped to neighbouring programs: a program-id-derived head index is
    divided by the group size (``kv_head = q_head // (HQ // HKV)``, or the group member taken as ``pid % GROUP``
    with ``GROUP = HQ // HKV``), so the heads reading the same K/V run side by side. ``fastest``: the group member
    is the fastest-varying digit of the launch order (``tl.program_id(0) % GROUP``, ``blockIdx.x % G``), so the
    G heads of a KV head run at the same moment (a grid whose fastest axis is the query tile does not count)."""
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


@check("index_math")
def index_math(facts: Facts, lang: str, *, where: str = "before_loop") -> CheckResult:
    """Integer index decomposition (``//`` and ``%`` by a run-time size, as in pixel -> (n, p, q)) relative to the
    main loop (the loop holding the kernel's loads). ``where: before_loop``: such indices are computed from the
    program id before the loop and used by its loads (computed once per tile). ``where: in_loop``: a division or
    modulo by a run-time value happens inside that loop (usually negated: counters should advance without it)."""
    fl = flow(facts)
    for fn in code(facts, lang):
        mem = [c for kind, c, _ in fl.memory_ops(fn) if kind == "load" and c.loops]
        loops = {lid for c in mem for lid in c.loops}
        for a in fn.assigns:
            divs = [n for n in a.value.walk() if n.kind == "bin" and n.op in ("//", "%") and len(n.args) == 2
                    and fl.fold(n.args[1], fn) is None and not fl.is_constexpr(n.args[1], fn)]
            if not divs:
                continue
            if where == "in_loop":
                if set(a.loops) & loops:
                    return found(f"division/modulo by a run-time value inside the loop of {fn.name}",
                                 Span(a.line, a.end_line, "index math in the loop"), 0.8)
                continue
            if any(lid in loops for lid in a.loops) or not fl.pid_derived(divs[0].args[0], fn):
                continue
            for c in mem:
                addr = c.expr.kw("pointer", 0) if c.name == "tl.load" else None
                if addr is not None and any(fl.refs(addr, fn, t) for t in a.targets):
                    return found(f"{', '.join(a.targets)} decomposed from the program id once, used in the loop of "
                                 f"{fn.name}", [Span(a.line, a.end_line, "index math before the loop"),
                                                span(c, "load in the loop")], 0.8)
    if where == "in_loop":
        return missing("no division or modulo by a run-time value inside the main loop", confidence=0.75)
    return missing("no program-id index decomposition before the main loop", confidence=0.75)
