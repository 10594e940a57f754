"""Static checks of task ``swiglu``: the ones only its rubric (``rubrics/swiglu.yaml``) uses.

- ``column_parallel_grid``
- ``flat_row_col_index``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Expr, Function
from d2kgrade.static.registry import CheckResult, check, found, missing

_DIV = {"//", "/"}


def _flat_index(fl: Flow, e: Expr, fn: Function) -> bool:
    """``e`` is a flat element index: it is built from the program id and a ``tl.arange`` (Triton:
    ``pid*BLOCK + tl.arange(0, BLOCK)``), or from ``blockIdx.x`` and ``threadIdx.x`` (CUDA: a global thread
    index, also as the start of a grid-stride loop over it)."""
    names: set[str] = set()
    exprs = [e]
    if e.kind == "name":
        exprs += [lp.start for lp in fn.loops if lp.var == e.op and lp.start is not None]
    for x in exprs:
        for n, _, _ in fl.walk(x, fn, depth=5):
            if n.kind == "call" and n.op in ("tl.program_id", "tl.arange"):
                names.add(n.op)
            elif n.kind == "name" and n.op in ("blockIdx.x", "threadIdx.x"):
                names.add(n.op)
    return {"tl.program_id", "tl.arange"} <= names or {"blockIdx.x", "threadIdx.x"} <= names


def flat_decomposition(fl: Flow, fn: Function) -> Expr | None:
    """The division ``row = i // W`` of a flat element index ``i`` (:func:`_flat_index`) whose column is ``i % W``
    or ``i - row*W``: the (row, column) pair recovered from one index over T x I outputs."""
    divs: list[Expr] = []
    mods = False
    for a in fn.assigns:
        for n in a.value.walk():
            if n.kind != "bin" or len(n.args) != 2 or not _flat_index(fl, n.args[0], fn):
                continue
            if n.op in _DIV:
                divs.append(n)
            elif n.op == "%":
                mods = True
            elif n.op == "-" and any(m.kind == "bin" and m.op == "*" for m in n.args[1].walk()):
                mods = True
    return divs[0] if divs and mods else None


@check("flat_row_col_index")
def flat_row_col_index(facts: Facts, lang: str) -> CheckResult:
    """A kernel indexes a flat element range of the [rows, cols] output and recovers each element's row and column
    by division and remainder (``row = o // I``, ``col = o % I``; CUDA ``row = v / i_vec`` over a global vector
    index): the tiles cover T x I with no lanes masked at the end of a short row."""
    fl = flow(facts)
    for fn in code(facts, lang):
        d = flat_decomposition(fl, fn)
        if d is not None:
            return found(f"{fn.name} splits a flat output index into row and column", span(d, "row = index / width"),
                         0.8)
    return missing("no flat output index split into row and column", confidence=0.75)


@check("column_parallel_grid")
def column_parallel_grid(facts: Facts, lang: str) -> CheckResult:
    """The grid grows with the number of outputs, not with the rows alone: a grid axis over column blocks (a
    second grid axis, ``tl.program_id(1)`` / ``blockIdx.y``), a flat grid over all T x I outputs
    (:func:`flat_row_col_index`), or a CUDA grid-stride loop over them."""
    from d2kgrade.static.checks.cuda import stride_loop

    fl = flow(facts)
    for fn in code(facts, lang):
        for c in fn.calls:
            if c.name == "tl.program_id":
                a = c.expr.kw("axis", 0)
                if a is not None and fl.fold(a, fn) == 1:
                    return found(f"{fn.name} uses grid axis 1", span(c, "program_id(1)"), 0.8)
        for a in fn.assigns:
            if "blockIdx.y" in a.value.names():
                return found(f"{fn.name} uses blockIdx.y", span(a.value, "blockIdx.y"), 0.8)
    flat = flat_row_col_index(facts, lang)
    if flat.passed:
        return flat
    if lang in ("any", "cuda"):
        sl = stride_loop(facts, "cuda", kind="grid")
        if sl.passed:
            return sl
    return missing("the grid covers rows only: no column-block axis, flat output grid or grid-stride loop",
                   confidence=0.75)
