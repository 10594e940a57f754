"""Pipelining and launch configuration: software-pipeline depth forced down, autotuning cut to one config, and
two generic keyword edits (drop a keyword of a call or launch; set one to a fixed value)."""

from __future__ import annotations

from typing import Any

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext

from d2kgrade.ablate.registry import transform
from d2kgrade.ablate.transforms._base import Ablation, code, const_value, dotted, launch_kernel, literal, without_args

STAGE_KEYS = ("num_stages", "NUM_STAGES")


@transform("set_num_stages")
class SetNumStages(Ablation):
    """Force the software-pipeline depth down to ``value`` (default 1: no pipelining): every ``num_stages=`` and
    ``NUM_STAGES=`` keyword (``tl.range``, ``triton.Config``, launches, config ``dict(...)``) and every
    ``"num_stages"``/``"NUM_STAGES"`` key of a dict literal whose value is above ``value`` or not a literal."""

    def __init__(self, context: CodemodContext, *, value: int = 1, functions: list[str] | None = None) -> None:
        super().__init__(context, functions=functions)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"value must be an int >= 1, got {value!r}")
        self.value = value

    def nothing(self) -> str:
        return f"no num_stages / NUM_STAGES above {self.value}"

    def _lower(self, expr: cst.BaseExpression) -> bool:
        v = const_value(expr, self.module_consts)
        return not (isinstance(v, int) and v <= self.value)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        if updated_node.keyword is None or updated_node.keyword.value not in STAGE_KEYS or not self.in_scope():
            return updated_node
        if not self._lower(updated_node.value):
            return updated_node
        self.record(original_node, f"{updated_node.keyword.value}={code(updated_node.value)} -> {self.value}")
        return updated_node.with_changes(value=cst.Integer(str(self.value)))

    def leave_DictElement(self, original_node: cst.DictElement, updated_node: cst.DictElement) -> cst.DictElement:
        key = const_value(updated_node.key, {})
        if key not in STAGE_KEYS or not self.in_scope() or not self._lower(updated_node.value):
            return updated_node
        self.record(original_node, f"{key!r}: {code(updated_node.value)} -> {self.value}")
        return updated_node.with_changes(value=cst.Integer(str(self.value)))


def _configs_arg(call: cst.Call) -> cst.Arg | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == "configs":
            return a
    return call.args[0] if call.args and call.args[0].keyword is None else None


@transform("one_autotune_config")
class OneAutotuneConfig(Ablation):
    """Cut every ``triton.autotune`` to one config, the ``keep``-th (default the first; negative counts from the
    end): a config list literal keeps one element; a comprehension keeps one element of the list it iterates;
    a module-level name bound to either is cut where it is bound; anything else becomes ``configs[keep:keep+1]``.
    With one config the autotuner runs it without benchmarking."""

    def __init__(self, context: CodemodContext, *, keep: int = 0, functions: list[str] | None = None) -> None:
        super().__init__(context, functions=functions)
        if not isinstance(keep, int) or isinstance(keep, bool):
            raise ValueError(f"keep must be an int, got {keep!r}")
        self.keep = keep
        self.bound: set[str] = set()

    def nothing(self) -> str:
        return "no triton.autotune with more than one config"

    def visit_Module(self, node: cst.Module) -> bool:
        super().visit_Module(node)
        for call in m.findall(node, m.Call()):
            assert isinstance(call, cst.Call)
            if dotted(call.func) in ("triton.autotune", "autotune"):
                arg = _configs_arg(call)
                if arg is not None and isinstance(arg.value, cst.Name) and isinstance(
                        self.module_consts.get(arg.value.value), (cst.List, cst.ListComp)):
                    self.bound.add(arg.value.value)
        return True

    def _cut(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """One config out of a list literal or a comprehension over one; None when that is not the shape."""
        if isinstance(node, cst.List) and len(node.elements) > 1:
            try:
                el = node.elements[self.keep]
            except IndexError:
                raise ValueError(f"keep={self.keep}: the config list has {len(node.elements)} entries") from None
            return node.with_changes(elements=[el.with_changes(comma=cst.MaybeSentinel.DEFAULT)])
        if isinstance(node, cst.ListComp) and isinstance(node.for_in.iter, cst.List) \
                and len(node.for_in.iter.elements) > 1 and node.for_in.inner_for_in is None:
            inner = self._cut(node.for_in.iter)
            return node.with_changes(for_in=node.for_in.with_changes(iter=inner))
        return None

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        if self.function is None and len(updated_node.targets) == 1 and isinstance(
                updated_node.targets[0].target, cst.Name) and updated_node.targets[0].target.value in self.bound:
            cut = self._cut(updated_node.value)
            if cut is not None:
                self.record(original_node, f"{updated_node.targets[0].target.value}: one config (#{self.keep})")
                return updated_node.with_changes(value=cut)
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if dotted(updated_node.func) not in ("triton.autotune", "autotune") or not self.in_scope():
            return updated_node
        arg = _configs_arg(updated_node)
        if arg is None or (isinstance(arg.value, cst.Name) and arg.value.value in self.bound):
            return updated_node
        cut = self._cut(arg.value)
        if cut is None:
            stop = self.keep + 1
            cut = cst.parse_expression(f"({code(arg.value)})[{self.keep}:{stop if stop else ''}]")
        self.record(original_node, f"autotune: one config (#{self.keep})")
        args = [a.with_changes(value=cut) if a is arg else a for a in updated_node.args]
        return updated_node.with_changes(args=args)


def _target(call: cst.Call, name: str | None, launch: str | None) -> bool:
    if name is not None and dotted(call.func) == name:
        return True
    return launch is not None and launch_kernel(call) == launch


class _KeywordEdit(Ablation):
    def __init__(self, context: CodemodContext, *, keyword: str, call: str | None = None, launch: str | None = None,
                 functions: list[str] | None = None) -> None:
        super().__init__(context, functions=functions)
        if (call is None) == (launch is None):
            raise ValueError("give exactly one of call (a dotted name such as tl.range) or launch (a kernel name)")
        self.keyword, self.call, self.launch = keyword, call, launch

    def nothing(self) -> str:
        return f"no {'call ' + self.call if self.call else 'launch of ' + str(self.launch)} passes {self.keyword}="


@transform("drop_call_kwarg")
class DropCallKwarg(_KeywordEdit):
    """Remove the keyword ``keyword`` from every call of ``call`` (``tl.range``) or every launch of kernel
    ``launch`` (``flatten=True``, ``warp_specialize=True``...), so the default applies."""

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if not _target(updated_node, self.call, self.launch) or not self.in_scope():
            return updated_node
        drop = [a for a in updated_node.args if a.keyword is not None and a.keyword.value == self.keyword]
        for a in drop:
            self.record(original_node, f"{self.keyword}={code(a.value)} removed")
        return without_args(updated_node, drop) if drop else updated_node


@transform("set_call_kwarg")
class SetCallKwarg(_KeywordEdit):
    """Set the keyword ``keyword`` of every call of ``call`` or launch of ``launch`` to the constant ``value``
    (``num_warps=4`` for every row length, say); only where the keyword is already passed."""

    def __init__(self, context: CodemodContext, *, keyword: str, value: Any, call: str | None = None,
                 launch: str | None = None, functions: list[str] | None = None) -> None:
        super().__init__(context, keyword=keyword, call=call, launch=launch, functions=functions)
        self.value = literal(value)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if not _target(updated_node, self.call, self.launch) or not self.in_scope():
            return updated_node
        args = []
        for a in updated_node.args:
            if a.keyword is not None and a.keyword.value == self.keyword and not a.value.deep_equals(self.value):
                self.record(original_node, f"{self.keyword}={code(a.value)} -> {code(self.value)}")
                a = a.with_changes(value=self.value)
            args.append(a)
        return updated_node.with_changes(args=args)
