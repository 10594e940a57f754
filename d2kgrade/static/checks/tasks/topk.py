"""Static checks of task ``topk``: the ones only its rubric (``rubrics/topk.yaml``) uses.

- ``atomic_at_loaded_address``
- ``candidate_buffer_passes``
- ``compact_then_sort``
- ``cuda_smem_digit_histogram``
- ``order_preserving_key``
- ``radix_digit_select``
- ``running_topk``
- ``tie_rank_or_packed``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code, matches, span
from d2kgrade.static.dataflow import Flow, flow, site_of
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function
from d2kgrade.static.patterns.access import (
    access_base,
    call_of,
    is_global_load,
    loads_feeding,
    reaches,
    shared_names,
    value_nodes,
)
from d2kgrade.static.patterns.names import ATOMICS, SCANS
from d2kgrade.static.patterns.sorts import sort_sites
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

SORTS = ("tl.sort", "tl.topk")


def _compaction_stores(fl: Flow, fn: Function) -> list[tuple[Call, set[str]]]:
    """Masked stores at compacted slots: the address takes a prefix sum of a mask (``base + tl.cumsum(sel) - 1``) or
    a slot claimed with an atomic counter."""
    out = []
    for kind, c, b in fl.memory_ops(fn):
        if kind != "store" or c.name != "tl.store" or c.expr.kw("mask", 2) is None:
            continue
        addr = access_base(c)
        if addr is None:
            continue
        if reaches(fl, addr, fn, lambda n, f: n.kind == "call" and (n.op in SCANS or n.op in ATOMICS), 4):
            out.append((c, b))
    return out


def _cuda_compaction(facts: Facts, fl: Flow, fn: Function) -> Span | None:
    """CUDA: an on-chip buffer written at a slot returned by an atomic counter (``words[atomicAdd(&n, 1)] = w``)."""
    shared = shared_names(facts, fn)
    for a in fn.assigns:
        v = a.value
        if not (v.kind == "other" and v.op == "item-write" and v.args and set(a.targets) & shared):
            continue
        target = v.args[0]
        idx = target.args[1:] if target.kind == "sub" else ()
        for i in idx:
            if reaches(fl, i, fn, lambda n, f: n.kind == "call" and n.op in ATOMICS, 3):
                return Span(a.line, a.end_line, "slot from an atomic counter")
    return None


@check("radix_digit_select")
def radix_digit_select(facts: Facts, lang: str, *, max_bins: int | None = None) -> CheckResult:
    """A digit histogram drives the selection: the result of ``tl.histogram`` (of at most ``max_bins`` bins) reaches
    a comparison with loaded keys (``digit(key) > t``, ``key >> s == prefix``), which narrows the keys to a bucket."""
    fl = flow(facts)
    best = "no tl.histogram in reachable kernels"
    for fn in code(facts, "triton"):
        hists = [c for c in fn.calls if c.name == "tl.histogram"]
        if max_bins is not None:
            ok = []
            for c in hists:
                nb = c.expr.kw("num_bins", 1)
                v = fl.fold(nb, fn) if nb is not None else None
                if v is None or v <= max_bins:
                    ok.append(c)
                else:
                    best = f"tl.histogram of {v} bins in {fn.name} (> {max_bins})"
            hists = ok
        if not hists:
            continue
        hist_ids = {id(c.expr) for c in hists}
        best = f"the histogram of {fn.name} does not narrow the keys"
        for e in [a.value for a in fn.assigns] + [c.expr for c in fn.calls]:
            for n in e.walk():
                if n.kind != "cmp" or len(n.args) != 2:
                    continue
                vals = [value_nodes(s, fn, 10, opaque_loads=True) for s in n.args]
                h_side = [any(id(x) in hist_ids for x in v) for v in vals]
                k_side = [any(is_global_load(x, fn) for x in v) for v in vals]
                if (h_side[0] and k_side[1] and not h_side[1]) or (h_side[1] and k_side[0] and not h_side[0]):
                    return found(f"{fn.name}: a digit histogram picks the bucket the keys are compared with",
                                 [span(hists[0], "histogram"), Span(n.line, n.end_line, "narrowing")], 0.8)
    return missing(best, confidence=0.75)


@check("cuda_smem_digit_histogram")
def cuda_smem_digit_histogram(facts: Facts, lang: str) -> CheckResult:
    """CUDA: a ``__shared__`` histogram is incremented with ``atomicAdd`` at a digit of a loaded key (``atomicAdd(&hist[
    (key >> s) & mask], 1)``)."""
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        shared = shared_names(facts, fn)
        for c in fn.calls:
            if not matches(c.name, ("atomicAdd", "atomicAdd_block")) or not c.expr.args:
                continue
            tgt = c.expr.args[0]
            sub = next((n for n in tgt.walk() if n.kind == "sub" and n.args and n.args[0].kind == "name"
                        and n.args[0].op in shared), None)
            if sub is None:
                continue
            idx = sub.args[1:]  # hist[(key >> s) & mask], or hist[digit] with digit = (key >> s) & mask
            if any(any(n.kind == "bin" and n.op in (">>", "&") for n, _, _ in fl.walk(i, fn, depth=3)) for i in idx):
                return found(f"{fn.name}: shared-memory digit histogram", span(c, "atomicAdd on a shared bin"), 0.8)
    return missing("no shared-memory digit histogram", confidence=0.75)


@check("compact_then_sort")
def compact_then_sort(facts: Facts, lang: str) -> CheckResult:
    """Survivors are compacted into a buffer and only that buffer is sorted: a ``tl.sort``/``tl.topk`` reads a buffer
    that this kernel (or an earlier one) wrote at compacted slots (a prefix sum of the selection mask, or slots
    claimed with an atomic counter). CUDA: an on-chip buffer written at atomically claimed slots."""
    fl = flow(facts)
    for fn in code(facts, lang):
        if fn.lang == "cuda":
            sp = _cuda_compaction(facts, fl, fn)
            if sp is not None:
                return found(f"{fn.name}: survivors compacted into an on-chip buffer", sp, 0.7)
            continue
        comp = {x for _, b in _compaction_stores(fl, fn) for x in b}
        for c in fn.calls:
            if c.name not in SORTS or not c.expr.args:
                continue
            for ld in loads_feeding(fl, c.expr.args[0], fn, 4):
                call = call_of(fn, ld)
                bases = fl.bases(access_base(ld), fn) if access_base(ld) is not None else set()
                producers = [p for b in bases for p in fl.producers(fn, b)
                             if any(p[1] is s for s, _ in _compaction_stores(fl, p[0]))]
                if bases & comp or producers:
                    return found(f"{fn.name}: {c.name} sorts a compacted buffer", [span(c, c.name)] +
                                 ([span(call, "compacted buffer")] if call else []), 0.8)
    return missing("no sort of a compacted survivor buffer", confidence=0.75)


@check("candidate_buffer_passes")
def candidate_buffer_passes(facts: Facts, lang: str) -> CheckResult:
    """A pass compacts keys into a candidate buffer (stores at prefix-sum or atomic slots) and a later digit
    histogram reads that buffer (in the same kernel, or in a kernel launched after), so the later passes scan the
    candidates, not the row."""
    fl = flow(facts)
    for fn in code(facts, "cuda" if lang == "cuda" else lang):
        if fn.lang == "cuda":
            sp = _cuda_candidate_histogram(facts, fl, fn)
            if sp is not None:
                return found(f"{fn.name}: a digit histogram reads the compacted candidates", sp, 0.75)
            continue
        comp = {x for _, b in _compaction_stores(fl, fn) for x in b}
        for c in fn.calls:
            if c.name != "tl.histogram" or not c.expr.args:
                continue
            for ld in loads_feeding(fl, c.expr.args[0], fn, 6):
                addr = access_base(ld)
                if addr is None:
                    continue
                bases = fl.bases(addr, fn)
                producers = [p for b in bases for p in fl.producers(fn, b)
                             if any(p[1] is s for s, _ in _compaction_stores(fl, p[0]))]
                if bases & comp or producers:
                    return found(f"{fn.name}: a digit histogram reads the compacted candidates",
                                 [span(c, "histogram of candidates")], 0.8)
    return missing("no digit histogram over a compacted candidate buffer", confidence=0.75)


def _cuda_candidate_histogram(facts: Facts, fl: Flow, fn: Function) -> Span | None:
    """CUDA: keys appended at atomically claimed slots to a buffer (shared array or global pointer) that a later
    shared-memory histogram reads."""
    shared = shared_names(facts, fn)
    comp: set[str] = set()
    for a in fn.assigns:
        v = a.value
        if v.kind == "other" and v.op == "item-write" and v.args and v.args[0].kind == "sub":
            if any(reaches(fl, i, fn, lambda n, f: n.kind == "call" and n.op in ATOMICS, 3) is not None
                   for i in v.args[0].args[1:]):
                comp.update(a.targets)
    for kind, c, b in fl.memory_ops(fn):
        addr = access_base(c)
        if kind == "store" and addr is not None and reaches(fl, addr, fn, lambda n, f: n.kind == "call"
                                                               and n.op in ATOMICS, 3) is not None:
            comp |= b
    if not comp:
        return None
    for c in fn.calls:
        if not matches(c.name, ("atomicAdd", "atomicAdd_block")) or not c.expr.args:
            continue
        sub = next((n for n in c.expr.args[0].walk() if n.kind == "sub" and n.args and n.args[0].kind == "name"
                    and n.args[0].op in shared), None)
        if sub is None:
            continue
        for n in [x for i in sub.args[1:] for x in value_nodes(i, fn, 4)]:
            if (n.kind == "sub" and n.args and n.args[0].kind == "name" and n.args[0].op in comp) or (
                    is_global_load(n, fn) and fl.bases(access_base(n), fn) & comp if access_base(n) is not None
                    else False):
                return span(c, "histogram of candidates")
    return None


_SIGN_CASTS = ("int32", "uint32", "int16", "uint16", "int64")


@check("order_preserving_key")
def order_preserving_key(facts: Facts, lang: str) -> CheckResult:
    """Float bits become integer keys in float order: the bits (an integer cast or ``__float_as_uint``) are flipped
    depending on the sign (``tl.where(b < 0, b ^ 0x7FFFFFFF, b)``, ``(b >> 31) ? ~b : b | 0x80000000``, ``b ^ ((b >>
    31) | INT_MIN)``)."""
    fl = flow(facts)

    def bits_vars(fn: Function) -> set[str]:
        out = set()
        for a in fn.assigns:
            v = a.value
            if (v.kind == "cast" and v.op in _SIGN_CASTS) or (v.kind == "call" and matches(
                    v.op, ("__float_as_uint", "__float_as_int", "__half_as_ushort", "__bfloat16_as_ushort"))):
                out.update(a.targets)
        return out

    for fn in code(facts, lang):
        bits = bits_vars(fn)
        if not bits:
            continue
        for e in [a.value for a in fn.assigns] + [c.expr for c in fn.calls]:
            for n in e.walk():
                if n.kind == "ternary" or (n.kind == "call" and n.op == "tl.where"):
                    if len(n.args) < 3:
                        continue
                    cond, a, b = n.args[:3]
                    names = cond.names() & bits
                    if not names:
                        continue
                    flips = [x for x in (a, b) if any((y.kind == "bin" and y.op == "^") or (y.kind == "unary"
                                                                                             and y.op == "~")
                                                      for y in x.walk()) and x.names() & names]
                    if flips:
                        return found(f"{fn.name}: sign-dependent bit flip of the float bits",
                                     Span(n.line, n.end_line, "order-preserving key"), 0.85)
                if n.kind == "bin" and n.op == "^" and len(n.args) == 2:
                    for x, y in (n.args, reversed(n.args)):
                        if x.kind == "name" and x.op in bits and any(
                                s.kind == "bin" and s.op == ">>" and s.args[0].kind == "name" and s.args[0].op == x.op
                                and fl.fold(s.args[1], fn) == 31 for s in y.walk()):
                            return found(f"{fn.name}: bits xor-ed with a sign mask",
                                         Span(n.line, n.end_line, "order-preserving key"), 0.85)
    return missing("no sign-dependent flip of float bits into integer keys", confidence=0.75)


@check("atomic_at_loaded_address")
def atomic_at_loaded_address(facts: Facts, lang: str) -> CheckResult:
    """An atomic add into global memory at an address that depends on loaded data (``tl.atomic_add(hist + digit(x),
    1)``): one global atomic per element. Usually negated."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for c in fn.calls:
            if c.name not in ATOMICS or not c.expr.args:
                continue
            ptr = c.expr.kw("pointer", 0)
            if ptr is None or not fl.bases(ptr, fn):
                continue
            if loads_feeding(fl, ptr, fn, 4):
                return found(f"{fn.name}: atomic at an address computed from loaded data", span(c, "per-element "
                                                                                                    "atomic"), 0.8)
    return missing("no global atomic at a data-dependent address", confidence=0.75)


def _mask_cmps(fl: Flow, e: Expr, fn: Function, site, depth: int = 0) -> set[str]:
    """Comparison operators a boolean mask read at ``site`` is made of (through casts, names whose definitions
    reach the site, ``&``/``|``), not looking into the values compared."""
    if depth > 6:
        return set()
    if e.kind == "cmp":
        return {e.op}
    if e.kind == "cast" and e.args:
        return _mask_cmps(fl, e.args[0], fn, site, depth + 1)
    if e.kind == "bin" and e.op in ("&", "|"):
        return set().union(*(_mask_cmps(fl, a, fn, site, depth + 1) for a in e.args))
    if e.kind == "name":
        defs = fn.defs().get(e.op, [])
        live = [d for d in defs if site is None or fl.reaches(d, site, defs)]
        return set().union(set(), *(_mask_cmps(fl, d.value, fn, site_of(d), depth + 1) for d in live))
    return set()


def _scan_of(fl: Flow, e: Expr, fn: Function, site, depth: int = 0):
    """The prefix-sum call a value read at ``site`` comes from (through ``+``/``-`` and names), with the site
    where that call's argument is read."""
    if depth > 4:
        return None, None
    if e.kind == "call" and e.op in SCANS:
        return e, site
    if e.kind == "bin" and e.op in ("+", "-"):
        for a in e.args:
            hit = _scan_of(fl, a, fn, site, depth + 1)
            if hit[0] is not None:
                return hit
    if e.kind == "name":
        defs = fn.defs().get(e.op, [])
        for d in defs:
            if site is None or fl.reaches(d, site, defs):
                hit = _scan_of(fl, d.value, fn, site_of(d), depth + 1)
                if hit[0] is not None:
                    return hit
    return None, None


@check("tie_rank_or_packed")
def tie_rank_or_packed(facts: Facts, lang: str) -> CheckResult:
    """Ties at the threshold are taken exactly: a prefix sum over an equality mask gives each tied key its rank, which
    is compared with the number still needed, a count computed from the data (``rank = tl.cumsum(eq); take = eq &
    (rank <= need)`` with ``need = k - count_above``); or the
    selection sorts packed (key << 32 | index) words built from the input itself, a total order."""
    fl = flow(facts)
    stored = {x for f in facts.kernels() for kind, _, b in fl.memory_ops(f) if kind == "store" for x in b}
    for fn in code(facts, "triton"):
        for e, at in [(a.value, site_of(a)) for a in fn.assigns] + [(c.expr, site_of(c)) for c in fn.calls]:
            for n in e.walk():
                if n.kind != "cmp" or n.op not in ("<=", "<") or len(n.args) != 2:
                    continue
                scan, scan_site = _scan_of(fl, n.args[0], fn, at)
                if scan is None or not scan.args:
                    continue
                counted = any(x.kind == "call" and (x.op == "tl.histogram" or fl.is_reduction(x, fn))
                              for x in value_nodes(n.args[1], fn, 8, opaque_loads=True))
                if counted and "==" in _mask_cmps(fl, scan.args[0], fn, scan_site):
                    return found(f"{fn.name}: tie rank from a prefix sum of the equality mask",
                                 Span(n.line, n.end_line, "rank <= need"), 0.8)
        for site in sort_sites(fl, fn):  # tl.sort / tl.topk, or a hand-written compare-exchange network
            shifted = reaches(fl, site.operand, fn, lambda x, f: x.kind == "bin" and x.op == "<<"
                               and len(x.args) == 2 and fl.fold(x.args[1], f) == 32, 8 if site.network else 4)
            if shifted is None:
                continue
            srcs = loads_feeding(fl, site.operand, fn, 8 if site.network else 5)
            if srcs and all(not (fl.bases(access_base(ld), fn) & stored) for ld in srcs if access_base(ld) is not None):
                what = "a compare-exchange network" if site.network else site.node.op
                return found(f"{fn.name}: {what} orders packed (key, index) words of the input",
                             span(site.node, "total-order selection"), 0.8)
    return missing("no tie rank over an equality mask and no selection on packed words", confidence=0.75)


@check("running_topk")
def running_topk(facts: Facts, lang: str) -> CheckResult:
    """A single pass with a running selection: a loop over the row's tiles carries a top-k buffer whose new value
    is ordered (a sort, or a hand-written compare-exchange network) from the old buffer and the tile just loaded,
    so the row is read once and only the k best survive each step."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        carried = fl.carried(fn)
        sites = sort_sites(fl, fn)
        if not sites:
            continue
        site_ids = {id(s.node): s for s in sites}
        for lp in fn.loops:
            loads = [c for kind, c, _ in fl.memory_ops(fn) if kind == "load" and lp.id in c.loops]
            for var, updates in carried.get(lp.id, {}).items():
                for a in updates:
                    hit = next((site_ids[id(n)] for n, _, _ in fl.walk(a.value, fn, depth=8, within=lp)
                                if id(n) in site_ids), None)
                    if hit is None:
                        continue
                    nodes = [n for n, _, _ in fl.walk(hit.operand, fn, depth=10, within=lp)]
                    reads_old = any(n.kind == "name" and n.op == var for n in nodes)
                    reads_tile = any(n is c.expr for n in nodes for c in loads)
                    if reads_old and reads_tile:
                        return found(f"{fn.name}: {var} keeps a running selection, re-ordered with each tile "
                                     f"(loop at line {lp.line})", [span(lp, "one pass"), span(hit.node, "merge")], 0.75)
    return missing("no loop carries a selection re-ordered with each loaded tile", confidence=0.7)
