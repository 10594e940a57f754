"""Memory hints: eviction policies, cache modifiers, alignment and contiguity hints removed.

Each of these is advice to the compiler or the cache, never semantics, so removing it leaves the results
bit-identical and isolates what the hint is worth.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext

from d2kgrade.ablate.registry import transform
from d2kgrade.ablate.transforms._base import Ablation, const_value, dotted, without_args


def _op_of(call: cst.Call) -> str | None:
    """``load`` for ``tl.load`` and descriptor ``.load``, ``store`` likewise, else None."""
    name = dotted(call.func) or ""
    return "load" if name.endswith(".load") else "store" if name.endswith(".store") else None


class _StripKeyword(Ablation):
    KEYWORD = ""

    def __init__(self, context: CodemodContext, *, values: list[str] | None = None, ops: list[str] | None = None,
                 functions: list[str] | None = None) -> None:
        super().__init__(context, functions=functions)
        bad = sorted(set(ops or []) - {"load", "store"})
        if bad:
            raise ValueError(f"ops must be load and/or store, got {bad}")
        self.values = set(values) if values else None
        self.ops = set(ops) if ops else {"load", "store"}

    def nothing(self) -> str:
        vals = f" with value {sorted(self.values)}" if self.values else ""
        return f"no {'/'.join(sorted(self.ops))} passes {self.KEYWORD}{vals}"

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        op = _op_of(updated_node)
        if op not in self.ops or not self.in_scope():
            return updated_node
        drop = []
        for a in updated_node.args:
            if a.keyword is None or a.keyword.value != self.KEYWORD:
                continue
            value = const_value(a.value, self.module_consts)
            if self.values is not None and value not in self.values:
                continue
            drop.append(a)
            self.record(original_node, f"{op}: {self.KEYWORD}={value!r} removed" if value is not None
                        else f"{op}: {self.KEYWORD} removed")
        return without_args(updated_node, drop) if drop else updated_node


@transform("strip_eviction_hints")
class StripEvictionHints(_StripKeyword):
    """Remove ``eviction_policy=`` from ``tl.load``/``tl.store`` and descriptor loads/stores (``values``: only
    these policies, e.g. ``[evict_last]``; ``ops``: only loads or stores; ``functions``: only these functions)."""

    KEYWORD = "eviction_policy"


@transform("strip_cache_modifiers")
class StripCacheModifiers(_StripKeyword):
    """Remove ``cache_modifier=`` (``.cs``, ``.cg``, ``.ca``...) from ``tl.load``/``tl.store`` (``values``,
    ``ops``, ``functions`` as for ``strip_eviction_hints``)."""

    KEYWORD = "cache_modifier"


HINT_CALLS = ("tl.multiple_of", "tl.max_contiguous", "tl.max_constancy")


@transform("strip_alignment_hints")
class StripAlignmentHints(Ablation):
    """Unwrap ``tl.multiple_of(x, n)``, ``tl.max_contiguous(x, n)`` and ``tl.max_constancy(x, n)`` to ``x`` and
    delete ``tl.assume(...)`` statements; with ``strides``, also mark every ``stride*`` parameter of a jit function
    ``do_not_specialize``, so Triton no longer proves row starts 16-byte aligned. The compiler then vectorizes only
    what it can prove by itself: 128-bit accesses become narrower ones."""

    def __init__(self, context: CodemodContext, *, strides: bool = False, functions: list[str] | None = None) -> None:
        super().__init__(context, functions=functions)
        self.strides = strides

    def nothing(self) -> str:
        return "no tl.multiple_of / tl.max_contiguous / tl.max_constancy / tl.assume" + (
            " and no jit function with stride parameters" if self.strides else "")

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        name = dotted(updated_node.func)
        if name in HINT_CALLS and updated_node.args and self.in_scope():
            self.record(original_node, f"{name} removed")
            inner = updated_node.args[0].value
            return inner.with_changes(lpar=[*updated_node.lpar, *inner.lpar], rpar=[*inner.rpar, *updated_node.rpar])
        return updated_node

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        assume = m.Expr(m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("assume"))))
        if self.in_scope() and all(m.matches(s, assume) for s in updated_node.body):
            self.record(original_node, "tl.assume removed")
            return cst.RemoveFromParent()
        return updated_node

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        name, jit = self._fns[-1]
        out = super().leave_FunctionDef(original_node, updated_node)
        if not (self.strides and jit and (self.only is None or name in self.only)):
            return out
        strides = [p.name.value for p in out.params.params if p.name.value.startswith("stride")]
        if not strides:
            return out
        decorators = []
        for d in out.decorators:
            e = d.decorator
            if dotted(e.func if isinstance(e, cst.Call) else e) in ("triton.jit", "jit"):
                call = e if isinstance(e, cst.Call) else cst.Call(func=e)
                if any(a.keyword is not None and a.keyword.value == "do_not_specialize" for a in call.args):
                    decorators.append(d)
                    continue
                arg = cst.Arg(keyword=cst.Name("do_not_specialize"), value=cst.List(
                    [cst.Element(cst.SimpleString(f"\"{x}\"")) for x in strides]),
                    equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                          whitespace_after=cst.SimpleWhitespace("")))
                args = list(call.args)
                if args:
                    args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                d = d.with_changes(decorator=call.with_changes(args=[*args, arg]))
                self.record(original_node.decorators[0] if original_node.decorators else original_node,
                            f"{name}: do_not_specialize {', '.join(strides)}")
            decorators.append(d)
        return out.with_changes(decorators=decorators)
