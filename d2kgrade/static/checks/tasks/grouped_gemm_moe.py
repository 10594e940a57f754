"""Static checks of task ``grouped_gemm_moe``: the ones only its rubric (``rubrics/grouped_gemm_moe.yaml``) uses.

- ``gather_tile_sizes``
- ``int64_expert_base``
- ``segment_descriptor_load``
- ``segment_lookup``
- ``skips_empty_segments``
"""

from __future__ import annotations

from typing import Any

from d2kgrade.static.checks.values import branch_on_loaded
from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Expr, Function
from d2kgrade.static.patterns.access import access_address, broadcast, gather_loads, unit_arange
from d2kgrade.static.patterns.config import config_dicts, host_values, launch_param, template_values
from d2kgrade.static.patterns.liveness import data_dependent
from d2kgrade.static.patterns.roles import entry_params, input_params_with_methods
from d2kgrade.static.registry import CheckResult, check, found, missing


def _param_values(fl: Flow, facts: Facts, fn: Function, p: str) -> set[Any]:
    """Values a Triton meta-parameter takes: autotune configs, heuristics aside, and host choices at launches."""
    vals = {c[p] for c in config_dicts(facts, fn) if p in c}
    for la in fl.launches_of(fn):
        for e, g, _ in launch_param(fl, la, fn, p):
            vals |= host_values(fl, e, g)
    return vals


def _shared_search(fl: Flow, facts: Facts, fn: Function, addr: Expr) -> Expr | None:
    """CUDA: a read of a ``__shared__`` table filled from loaded data (``tile_end[e] = run`` with ``run`` summing
    loaded offsets) in the guard of a definition that ``addr`` reads: a binary search over a table each block
    builds in shared memory (``if (tile_end[mid] <= tile) lo = mid + 1;``)."""
    if fn.lang != "cuda":
        return None
    shared = {b.name for b in facts.shared if b.func == fn.key}
    filled = {n for n in shared if any(data_dependent(fl, d.value, fn) is not None for d in fn.defs().get(n, []))}
    if not filled:
        return None
    for n, f, _ in fl.walk(addr, fn, depth=6):
        if f is not fn or n.kind != "name":
            continue
        for d in fn.defs().get(n.op, []):
            for g in d.guards:
                for x in g.walk():
                    if x.kind == "sub" and x.args and x.args[0].kind == "name" and x.args[0].op in filled:
                        return x
    return None


@check("segment_lookup")
def segment_lookup(facts: Facts, lang: str, *, input_index: int = 1) -> CheckResult:
    """The segment (expert) whose data a program reads from input ``input_index`` of ``kernel(...)`` is found
    through loaded data: the address of that input's loads depends on a search of loaded boundaries (``e =
    tl.sum(tile_end <= t)``, a binary search ``if (starts[mid] <= tile) lo = mid``, also over a ``__shared__``
    table of tile counts each CUDA block fills from loaded offsets) or on a loaded tile table
    (``e = tl.load(tile_expert + pid)``), not on the program id alone: a flattened (segment, tile) schedule in
    which empty segments own no tiles."""
    fl = flow(facts)
    for fn in code(facts, lang):
        # a .cu file has no kernel(...): its inputs are the parameters of the launching C++ host function
        targets = entry_params(fl, facts, fn, input_index) or set(input_params_with_methods(fl, facts, fn,
                                                                                          input_index))
        if not targets:
            continue
        for kind, c, bases in fl.memory_ops(fn):
            if kind != "load" or not (bases & targets):
                continue
            addr = access_address(c)
            if addr is None:
                continue
            src = data_dependent(fl, addr, fn) or _shared_search(fl, facts, fn, addr)
            if src is not None:
                return found(f"{fn.name} reads {'/'.join(sorted(bases & targets))} at a segment found from loaded "
                             f"data", [span(c, "segment-indexed load"), span(src, "loaded boundaries / table")], 0.8)
    return missing(f"no load of input {input_index} addressed by a segment looked up from loaded data "
                   "(the segment is the program id, or comes from the host)", confidence=0.75)


@check("skips_empty_segments")
def skips_empty_segments(facts: Facts, lang: str, *, input_index: int = 1) -> CheckResult:
    """Programs do no work for empty segments: segments are looked up through loaded boundaries (empty ones own
    no tiles, ``segment_lookup``) or a kernel branches on loaded segment bounds (``if rows_e > 0:``)."""
    r = segment_lookup(facts, lang, input_index=input_index)
    if r.passed:
        return found("empty segments own no tiles: " + r.reason, r.evidence, 0.75)
    b = branch_on_loaded(facts, lang)
    if b.passed:
        return found("a kernel branches on loaded bounds: " + b.reason, b.evidence, 0.7)
    return missing("segments are neither looked up from loaded bounds nor skipped by a branch on them",
                   confidence=0.7)


@check("gather_tile_sizes")
def gather_tile_sizes(facts: Facts, lang: str, *, small: int | None = None) -> CheckResult:
    """The tile of a data-dependent gather (rows addressed from loaded offsets: ``rows = o_e + m*BM +
    tl.arange(0, BM)``) is sized per problem: its ``tl.arange`` size parameter takes at least two values across
    autotune configs, host choices and launches (CUDA: a template argument of the gathering kernel), in one kernel
    or across the gathering kernels the host picks between (a decode and a prefill kernel). With ``small``, one of
    the values is at most ``small`` rows (a decode tile) and another is larger."""
    fl = flow(facts)

    def ok(vals: set[Any]) -> bool:
        nums = {v for v in vals if isinstance(v, int)}
        if small is None:
            return len(vals) >= 2
        return bool(nums) and min(nums) <= small < max(nums)

    want = f"a value <= {small} and a larger one" if small is not None else "several values"
    union: set[Any] = set()
    first = None
    for fn in code(facts, lang):
        gathers = gather_loads(fl, fn)
        if not gathers:
            continue
        if fn.lang == "cuda":
            for pos, vals in template_values(facts, fn).items():
                if ok(vals):
                    return found(f"{fn.name}: template argument {pos + 1} takes {sorted(vals, key=str)}",
                                 span(next(iter(gathers.values())), "gather"), 0.7)
            continue
        params: set[str] = set()
        for c in gathers.values():  # rows = o_e + m*BM + tl.arange(0, BM): the arange added to loaded offsets
            addr = access_address(c)
            for n, f, _ in fl.walk(addr, fn, depth=6) if addr is not None else ():
                if f is not fn or n.kind != "bin" or n.op != "+" or len(n.args) != 2:
                    continue
                for a, b in (n.args, n.args[::-1]):
                    if broadcast(a) or fl.bases(b, fn):
                        continue  # a column index of a 2-D tile, or an offset added to a pointer
                    ar = unit_arange(fl, a, fn)
                    if ar is None or len(ar.args) != 2 or data_dependent(fl, b, fn) is None:
                        continue
                    r = fl.root(ar.args[1], fn)
                    if r.kind == "name" and r.op in fn.constexprs:
                        params.add(r.op)
        for p in sorted(params):
            vals = _param_values(fl, facts, fn, p)
            if ok(vals):
                return found(f"{fn.name}: gathered tile {p} takes {sorted(vals, key=str)}",
                             span(next(iter(gathers.values())), "gathered rows"), 0.75)
            union |= vals
            first = first or next(iter(gathers.values()))
    if first is not None and ok(union):  # a decode kernel and a prefill kernel, each with its own tile
        return found(f"the gathering kernels' row tiles take {sorted(union, key=str)}", span(first, "gathered rows"),
                     0.7)
    return missing(f"no gathered tile whose size takes {want}", confidence=0.7)


def _weight_targets(fl: Flow, facts: Facts, fn: Function, input_index: int) -> set[str]:
    return entry_params(fl, facts, fn, input_index) | set(input_params_with_methods(fl, facts, fn, input_index))


def _element_indexed(fl: Flow, e: Expr, fn: Function) -> bool:
    """Does ``e`` vary per element (a ``tl.arange``, ``threadIdx``, a loop counter of the tile)?"""
    for n, _, _ in fl.walk(e, fn, depth=5):
        if n.kind == "call" and n.op == "tl.arange":
            return True
        if n.kind == "name" and n.op.startswith("threadIdx"):
            return True
    return False


def _is_wide(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> bool:
    """A 64-bit value: a cast to int64, or a product with such a factor (``(int64_t)e * N`` in ``... * K``)."""
    if e.kind == "cast" and e.op in ("int64", "uint64"):
        return True
    if depth < 4 and e.kind == "bin" and e.op == "*" and len(e.args) == 2:
        return any(_is_wide(fl, x, fn, depth + 1) for x in e.args)
    if depth < 4 and e.kind == "name":
        defs = fl.defs(e.op, fn)
        return bool(defs) and all(_is_wide(fl, d.value, fn, depth + 1) for d in defs)
    return False


def _descriptor_base(fl: Flow, desc: Expr | None, fn: Function) -> Expr | None:
    """The base pointer of a device tensor descriptor (``tl.make_tensor_descriptor(w + e * s, shape=...)``); None
    for a host descriptor. Its shape and strides are sizes, not addresses."""
    for n, f, _ in fl.walk(desc, fn, depth=4) if desc is not None else ():
        if f is fn and n.kind == "call" and n.op == "tl.make_tensor_descriptor":
            return n.kw("base", 0)
    return None


def _stride_param(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> bool:
    """Is ``e`` (or a factor of it) a run-time integer parameter of the kernel (``stride_we``, ``N``, ``K``)?"""
    if depth < 3 and e.kind == "bin" and e.op == "*":
        return any(_stride_param(fl, x, fn, depth + 1) for x in e.args)
    r = fl.root(e, fn)
    return r.kind == "name" and r.op in fn.params and r.op not in fn.constexprs and r.op not in fn.pointer_params


def _compile_time(fl: Flow, e: Expr, fn: Function) -> bool:
    r = fl.root(e, fn)
    return fl.fold(e, fn) is not None or (r.kind == "name" and (r.op in fn.constexprs or r.op in fl.facts.consts))


def _base_products(fl: Flow, addr: Expr, fn: Function) -> tuple[list[Expr], list[Expr]]:
    """Products of a run-time scalar (an expert / segment index, not an element index) with a run-time factor in
    ``addr``: (widened ones, 32-bit ones)."""
    wide, narrow = [], []
    for n, f, _ in fl.walk(addr, fn, depth=6):
        if f is not fn or n.kind != "bin" or n.op != "*" or len(n.args) != 2:
            continue
        a, b = n.args
        if any(_compile_time(fl, x, fn) for x in (a, b)) or any(_element_indexed(fl, x, fn) for x in (a, b)):
            continue  # a tile offset (pid_n * BN) or an element index, not a segment base
        if not any(_stride_param(fl, x, fn) for x in (a, b)):
            continue  # not index x stride (a count of tiles, say)
        (wide if _is_wide(fl, a, fn) or _is_wide(fl, b, fn) else narrow).append(n)
    return wide, narrow


@check("int64_expert_base")
def int64_expert_base(facts: Facts, lang: str, *, input_index: int = 1) -> CheckResult:
    """The base of a segment's (expert's) slab of input ``input_index`` (the [E, N, K] weights) is formed in 64
    bits: in the addresses of that input's loads and tensor descriptors, every product of a run-time scalar index
    with a run-time stride (``e * stride_we``, ``e * N * K``) has a factor converted to int64 first
    (``e.to(tl.int64) * stride_we``, ``(int64_t)e * N * K``), and one such widened product exists, or the input is
    read through a tensor descriptor (TMA computes the address of ``desc.load([e * N + n0, k])`` in 64 bits).
    Widening only the token rows, or a product of 32-bit values, fails."""
    fl = flow(facts)
    good = None
    for fn in code(facts, lang):
        targets = _weight_targets(fl, facts, fn, input_index)
        if not targets:
            continue
        for kind, c, bases in fl.memory_ops(fn):
            if kind != "load" or not (bases & targets):
                continue
            addr = _descriptor_base(fl, c.expr.recv, fn) if c.name == ".load" else access_address(c)
            if addr is None and c.name != ".load":
                continue
            wide, narrow = _base_products(fl, addr, fn) if addr is not None else ([], [])
            if narrow:
                return missing(f"{fn.name} forms the base of input {input_index} in 32 bits "
                               f"(line {narrow[0].line})", [span(narrow[0], "32-bit product")], 0.75)
            if good is None and (wide or c.name == ".load"):  # TMA forms descriptor addresses in 64 bits
                good = (fn, c, wide[0] if wide else c.expr)
    if good is not None:
        fn, c, w = good
        return found(f"{fn.name} widens the segment base of input {input_index} to 64 bits",
                     [span(w, "int64 product"), span(c, "load")], 0.8)
    return missing(f"no 64-bit segment base in the loads of input {input_index}", confidence=0.7)


@check("segment_descriptor_load")
def segment_descriptor_load(facts: Facts, lang: str, *, input_index: int = 1) -> CheckResult:
    """Input ``input_index`` (the weights) is read through a tensor descriptor (TMA): a ``desc.load([...])`` of a
    descriptor built on that input (``tl.make_tensor_descriptor`` of its pointer, per segment or over the
    flattened [E*N, K] tensor, or a host ``TensorDescriptor`` of it). Descriptor loads of other inputs only (the
    activations) do not count."""
    fl = flow(facts)
    other = None
    for fn in code(facts, "triton"):
        targets = _weight_targets(fl, facts, fn, input_index)
        for kind, c, bases in fl.memory_ops(fn):
            if kind != "load" or c.name != ".load":
                continue
            if bases & targets:
                return found(f"{fn.name} loads input {input_index} through a tensor descriptor", span(c, "TMA load"),
                             0.85)
            other = other or c
    if other is not None:
        return missing(f"tensor-descriptor loads read other inputs, not input {input_index}",
                       [span(other, "descriptor load")], 0.75)
    return missing(f"no tensor-descriptor load of input {input_index}", confidence=0.8)
