"""Static checks of task ``cross_entropy``: the ones only its rubric (``rubrics/cross_entropy.yaml``) uses.

- ``split_partials_kernels``
"""

from __future__ import annotations

from d2kgrade.static.checkutil import span
from d2kgrade.static.dataflow import Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Function
from d2kgrade.static.patterns.access import kernel_handoffs
from d2kgrade.static.registry import CheckResult, check, found, missing

def _pid_names(fn: Function) -> set[str]:
    """Names bound to the flat program id (``pid = tl.program_id(0)``, ``.to(tl.int64)`` of it, ``blockIdx.x``)."""
    out: set[str] = set()
    for a in fn.assigns:
        for n in a.value.walk():
            if (n.kind == "call" and n.op == "tl.program_id") or (n.kind == "name" and n.op == "blockIdx.x"):
                out.update(a.targets)
    return out

def splits_work_two_ways(fl: Flow, fn: Function) -> bool:
    """The kernel's programs are indexed two ways: a grid axis 1 (``tl.program_id(1)``, ``blockIdx.y``), or the
    flat program id cut into two coordinates, ``row = pid // C`` and ``chunk = pid % C`` (a (row, chunk) work
    list laid out on a 1-D grid)."""
    for c in fn.calls:
        if c.name == "tl.program_id":
            a = c.expr.kw("axis", 0)
            if a is not None and fl.fold(a, fn) == 1:
                return True
    if any("blockIdx.y" in a.value.names() for a in fn.assigns):
        return True
    pids = _pid_names(fn)
    ops: set[str] = set()
    for a in fn.assigns:
        for n in a.value.walk():
            if n.kind == "bin" and n.op in ("//", "/", "%") and n.args:
                lhs = n.args[0]
                if (lhs.kind == "name" and lhs.op in pids) or any(
                        x.kind == "call" and x.op == "tl.program_id" for x in lhs.walk()):
                    ops.add("%" if n.op == "%" else "//")
    return ops == {"//", "%"}

@check("split_partials_kernels")
def split_partials_kernels(facts: Facts, lang: str) -> CheckResult:
    """A kernel whose programs split the work two ways (:func:`splits_work_two_ways`: rows and vocabulary chunks)
    stores a buffer that a later kernel loads: per-chunk partials handed to a merge. The two-way split may be a
    grid axis 1 or a flat (row, chunk) work list; what matters is that one row's vocabulary is shared by several
    producer programs."""
    fl = flow(facts)
    for la1, la2, _, shared in kernel_handoffs(fl, facts, lang):
        k1, k2 = facts.functions[la1.kernel], facts.functions[la2.kernel]
        if splits_work_two_ways(fl, k1):
            return found(f"{k1.name} (programs split two ways) writes {', '.join(sorted(shared))}, which "
                         f"{k2.name} then reads", [span(la1, f"launch of {k1.name}"),
                                                   span(la2, f"launch of {k2.name}")], 0.85)
    return missing("no kernel with programs split over (row, chunk) stores partials that a later kernel loads",
                   confidence=0.8)
