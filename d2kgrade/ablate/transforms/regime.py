"""Regimes and launch decisions: a code path removed (so the launcher takes the next one), a constexpr flag fixed
(its branches folded), a module constant or an expression replaced.

These take arguments that name the construct (a path name, a flag, a constant, an expression pattern), so a
rubric can aim them at one reference's launcher; on another file they apply only if it has the same construct.
Expression patterns are matched on their ``ast`` form, so formatting does not matter; they are patterns to find,
never code that d2kgrade runs (the evaluator runs the transformed file, in its sandbox).
"""

from __future__ import annotations

from typing import Any

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext, SkipFile

from d2kgrade.ablate.registry import transform
from d2kgrade.ablate.transforms._base import (
    Ablation,
    code,
    const_value,
    is_jit,
    iter_functions,
    literal,
    norm,
    parse_expr,
)


def _is_path_test(test: cst.BaseExpression, path: str, var: str | None) -> bool:
    """``var == "path"`` (or ``"path" == var``); with no ``var``, any non-constant on the other side
    (``plan["path"] == "tiled"``)."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Equal)):
        return False
    a, b = test.left, test.comparisons[0].comparator
    for x, y in ((a, b), (b, a)):
        if const_value(y, {}) != path or not isinstance(y, cst.SimpleString):
            continue
        if isinstance(x, cst.Name) and (var is None or x.value == var):
            return True
        if var is None and isinstance(x, (cst.Subscript, cst.Attribute)):
            return True
    return False


def _names_path(e: cst.BaseExpression | None, path: str) -> bool:
    """``"path"``, or a ``dict(path="path", ...)`` / ``{"path": "path", ...}`` plan naming it."""
    if e is None:
        return False
    if isinstance(e, cst.SimpleString):
        return const_value(e, {}) == path
    if isinstance(e, cst.Call):
        return any(a.keyword is not None and a.keyword.value == "path" and const_value(a.value, {}) == path
                   for a in e.args)
    if isinstance(e, cst.Dict):
        return any(isinstance(el, cst.DictElement) and const_value(el.key, {}) == "path"
                   and const_value(el.value, {}) == path for el in e.elements)
    return False


def _block_statements(node: cst.BaseSuite) -> list[cst.BaseStatement]:
    return list(node.body) if isinstance(node, cst.IndentedBlock) else [cst.SimpleStatementLine(body=list(node.body))]


def _replace_by_branch(if_node: cst.If, branch: cst.If | cst.Else | None) -> cst.BaseStatement | \
        cst.FlattenSentinel | cst.RemovalSentinel:
    """The statement(s) an ``if`` becomes when only ``branch`` is kept (an elif: that ``if``; an else: its body)."""
    if branch is None:
        return cst.RemoveFromParent()
    if isinstance(branch, cst.If):
        return branch.with_changes(leading_lines=if_node.leading_lines)
    stmts = _block_statements(branch.body)
    stmts[0] = stmts[0].with_changes(leading_lines=[*if_node.leading_lines, *stmts[0].leading_lines])
    return cst.FlattenSentinel(stmts)


@transform("remove_path")
class RemovePath(Ablation):
    """Remove the code path named ``path`` (a string such as ``"split"``): the dispatch arm ``if <var> ==
    "split":`` is cut out of its if/elif chain, and the chooser stops returning it (``if c: return "split"``
    is deleted; ``"a" if c else "split"`` becomes ``"a"``), so the launcher takes the path it would have taken
    without that regime. ``var``: the dispatch variable (default any name)."""

    def __init__(self, context: CodemodContext, *, path: str, var: str | None = None,
                 functions: list[str] | None = None) -> None:
        super().__init__(context, functions=functions)
        self.path, self.var = path, var
        self.elifs: set[int] = set()

    def nothing(self) -> str:
        return f"no dispatch on or choice of the path {self.path!r}"

    def _returns_path(self, suite: cst.BaseSuite) -> bool:
        """The arm ends by returning the path (its name, or a plan dict naming it)."""
        stmts = _block_statements(suite)
        last = stmts[-1] if stmts else None
        return isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], cst.Return) \
            and _names_path(last.body[-1].value, self.path)

    def visit_If(self, node: cst.If) -> bool:
        if isinstance(node.orelse, cst.If):
            self.elifs.add(id(node.orelse))
        return True

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> Any:
        if not self.in_scope() or id(original_node) in self.elifs:
            return updated_node
        # Walk the chain from its head, splicing out the arms that dispatch to or return the path.
        arms: list[cst.If] = []
        node: cst.If | cst.Else | None = updated_node
        while isinstance(node, cst.If):
            arms.append(node)
            node = node.orelse
        tail = node
        keep = [a for a in arms if not (_is_path_test(a.test, self.path, self.var) or self._returns_path(a.body))]
        if len(keep) == len(arms):
            return updated_node
        for a in arms:
            if a not in keep:
                self.record(original_node, f"branch {code(a.test)} removed")
        chain: cst.If | cst.Else | None = tail
        for a in reversed(keep):
            chain = a.with_changes(orelse=chain)
        if isinstance(chain, cst.If):
            return chain.with_changes(leading_lines=updated_node.leading_lines)
        return _replace_by_branch(updated_node, chain)

    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.BaseExpression:
        if not self.in_scope():
            return updated_node
        for arm, other in ((updated_node.body, updated_node.orelse), (updated_node.orelse, updated_node.body)):
            if const_value(arm, {}) == self.path and isinstance(arm, cst.SimpleString):
                self.record(original_node, f"{code(original_node)} -> {code(other)}")
                return other.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)
        return updated_node

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        out = super().transform_module_impl(tree)
        left = [r for r in m.findall(out, m.Return()) if _names_path(r.value, self.path)]  # type: ignore
        if left:
            raise SkipFile(f"a chooser still returns {self.path!r} unconditionally; no other path to fall back to")
        return out


@transform("replace_expr")
class ReplaceExpr(Ablation):
    """Replace every expression equal to the pattern ``old`` (compared as ``ast``, so spacing and parentheses do
    not matter) by ``new``, inside ``function`` (default: anywhere). ``count``: the number of matches expected
    (a different number is a failed transform, not a silent partial one); ``nth``: replace only that match
    (1-based, in source order, innermost first)."""

    def __init__(self, context: CodemodContext, *, old: str, new: str, function: str | None = None,
                 count: int | None = None, nth: int | None = None) -> None:
        super().__init__(context, functions=[function] if function else None)
        self.old = norm(parse_expr(old, "old"))
        self.old_type = type(parse_expr(old, "old"))
        self.new = parse_expr(new, "new")
        self.count = count
        if nth is not None and (not isinstance(nth, int) or nth < 1):
            raise ValueError(f"nth must be an int >= 1, got {nth!r}")
        self.nth = nth
        self.seen = 0
        self.pattern = old

    def nothing(self) -> str:
        return f"no expression {self.pattern!r}"

    def on_leave(self, original_node: cst.CSTNode, updated_node: Any) -> Any:
        out = super().on_leave(original_node, updated_node)
        if isinstance(original_node, self.old_type) and isinstance(out, cst.BaseExpression) and self.in_scope() \
                and norm(original_node) == self.old:
            self.seen += 1
            if self.nth is not None and self.seen != self.nth:
                return out
            self.record(original_node, f"{code(original_node)} -> {code(self.new)}")
            new = self.new
            if out.lpar and not new.lpar:
                new = new.with_changes(lpar=out.lpar, rpar=out.rpar)
            return new
        return out

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        out = super().transform_module_impl(tree)
        if self.count is not None and self.seen != self.count:
            raise SkipFile(f"pattern {self.pattern!r}: expected {self.count} match(es), found {self.seen}")
        if self.nth is not None and self.seen < self.nth:
            raise SkipFile(f"pattern {self.pattern!r}: asked for match {self.nth}, found {self.seen}")
        return out


@transform("set_constant")
class SetConstant(Ablation):
    """Set the module-level constant ``name`` to ``value`` (``_MAX_REG_N = 1024``; a ``tl.constexpr(...)``
    wrapper is kept)."""

    def __init__(self, context: CodemodContext, *, name: str, value: Any) -> None:
        super().__init__(context)
        self.name = name
        self.value = literal(value)

    def nothing(self) -> str:
        return f"no module-level constant {self.name}"

    def _new(self, old: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(old, cst.Call) and m.matches(old.func, m.Attribute(attr=m.Name("constexpr"))) and old.args:
            return old.with_changes(args=[old.args[0].with_changes(value=self.value)])
        return self.value

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        if self.function is None and len(updated_node.targets) == 1 and m.matches(
                updated_node.targets[0].target, m.Name(self.name)):
            self.record(original_node, f"{self.name} = {code(updated_node.value)} -> {code(self.value)}")
            return updated_node.with_changes(value=self._new(updated_node.value))
        return updated_node

    def leave_AnnAssign(self, original_node: cst.AnnAssign, updated_node: cst.AnnAssign) -> cst.AnnAssign:
        if self.function is None and m.matches(updated_node.target, m.Name(self.name)) and updated_node.value:
            self.record(original_node, f"{self.name} = {code(updated_node.value)} -> {code(self.value)}")
            return updated_node.with_changes(value=self._new(updated_node.value))
        return updated_node


@transform("fix_constexpr")
class FixConstexpr(Ablation):
    """Fix the ``tl.constexpr`` flag ``name`` to ``value`` everywhere: the host passes the constant (launch and
    ``dict(...)`` keywords, dict-literal keys, the parameter's default), and in jit functions that take the flag
    ``if name:`` / ``if not name:`` / ``a if name else b`` keep only the branch it selects (``USE_TMA`` False: the
    pointer path; ``EVEN_K`` False: masked loads)."""

    def __init__(self, context: CodemodContext, *, name: str, value: Any, functions: list[str] | None = None) -> None:
        super().__init__(context, functions=functions)
        self.name = name
        self.value = literal(value)
        self.truth = bool(value)
        self.takers: set[str] = set()

    def nothing(self) -> str:
        return f"no jit function takes the constexpr {self.name}"

    def visit_Module(self, node: cst.Module) -> bool:
        super().visit_Module(node)
        self.takers = {f.name.value for f in iter_functions(node) if is_jit(f)
                       and any(p.name.value == self.name for p in f.params.params)}
        return True

    def _branch(self, test: cst.BaseExpression) -> bool | None:
        """True/False when ``test`` is the flag (or its negation), else None."""
        if m.matches(test, m.Name(self.name)):
            return self.truth
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and m.matches(
                test.expression, m.Name(self.name)):
            return not self.truth
        return None

    def _flag_scope(self) -> bool:
        return self.in_jit and self.in_scope() and any(f in self.takers for f, _ in self._fns)

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> Any:
        taken = self._branch(updated_node.test) if self._flag_scope() else None
        if taken is None:
            return updated_node
        self.record(original_node, f"if {code(updated_node.test)}: {'then' if taken else 'else'} branch kept")
        if taken:
            stmts = _block_statements(updated_node.body)
            stmts[0] = stmts[0].with_changes(leading_lines=[*updated_node.leading_lines, *stmts[0].leading_lines])
            return cst.FlattenSentinel(stmts)
        return _replace_by_branch(updated_node, updated_node.orelse)

    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.BaseExpression:
        taken = self._branch(updated_node.test) if self._flag_scope() else None
        if taken is None:
            return updated_node
        self.record(original_node, f"{code(original_node)} -> {'then' if taken else 'else'} value")
        keep = updated_node.body if taken else updated_node.orelse
        return keep.with_changes(lpar=[*updated_node.lpar, *keep.lpar], rpar=[*keep.rpar, *updated_node.rpar])

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        if self.in_jit or not self.takers or updated_node.keyword is None or updated_node.keyword.value != self.name:
            return updated_node
        if updated_node.value.deep_equals(self.value):
            return updated_node
        self.record(original_node, f"{self.name}={code(updated_node.value)} -> {code(self.value)}")
        return updated_node.with_changes(value=self.value)

    def leave_DictElement(self, original_node: cst.DictElement, updated_node: cst.DictElement) -> cst.DictElement:
        if self.in_jit or not self.takers or const_value(updated_node.key, {}) != self.name:
            return updated_node
        v = updated_node.value
        if isinstance(v, cst.Lambda):  # triton.heuristics({"EVEN_K": lambda args: ...}): the lambda returns it
            if v.body.deep_equals(self.value):
                return updated_node
            self.record(original_node, f"heuristic {self.name} -> {code(self.value)}")
            return updated_node.with_changes(value=v.with_changes(body=self.value))
        if v.deep_equals(self.value):
            return updated_node
        self.record(original_node, f"{self.name!r}: {code(v)} -> {code(self.value)}")
        return updated_node.with_changes(value=self.value)

    def leave_Param(self, original_node: cst.Param, updated_node: cst.Param) -> cst.Param:
        if updated_node.name.value == self.name and updated_node.default is not None and self.function in \
                self.takers and not updated_node.default.deep_equals(self.value):
            self.record(original_node, f"default of {self.name} -> {code(self.value)}")
            return updated_node.with_changes(default=self.value)
        return updated_node
