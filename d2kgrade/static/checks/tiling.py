"""Work-decomposition checks: whole rows in one block, persistent loops and SM-sized grids, grouped tile order,
program-id axes, tile rank, work per program, program-bounded loops."""

from __future__ import annotations

from d2kgrade.static.checkutil import as_list, code, is_persistent, matches, span, tile_loop_refs
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Expr, Function
from d2kgrade.static.patterns.config import arange_dims, host_calls, param_values
from d2kgrade.static.patterns.names import SM_SOURCES
from d2kgrade.static.registry import CheckResult, Span, check, found, missing


def _block_params(fl: Flow, fn: Function, source: list[str]) -> list[tuple[str, Expr]]:
    """Constexpr parameters whose launch value (or heuristic) comes from a call in ``source``."""
    out = []
    for p in sorted(fn.constexprs):
        srcs = fl.param_sources(fn, p)
        if p in fn.heuristics:
            srcs.append((fn.heuristics[p], fl.facts.functions["<module>"]))
        for e, caller in srcs:
            hit = host_calls(fl, e, caller, source)
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
        hit = host_calls(fl, la.grid, caller, names)
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


@check("tile_rank")
def tile_rank(facts: Facts, lang: str, *, min: int = 2, op: str = "load",
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
            r = arange_dims(fl, ptr, fn) if ptr is not None else 0
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
                vals = param_values(fl, fn, s)
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
