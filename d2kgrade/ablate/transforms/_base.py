"""The base of every ablation transform, and the small layer of named patterns they share.

An :class:`Ablation` is a libcst codemod (a :class:`libcst.codemod.ContextAwareTransformer`, so matcher
decorators work on it): it rewrites the constructs of one design property and records each rewrite as a
:class:`Change` with the line span of the original node. When it finds nothing to change it raises
:class:`libcst.codemod.SkipFile` with the reason, which :func:`run_transform` turns into :class:`NotApplicable`.
libcst keeps every byte it is not asked to change, so the diff of an ablated file is the changed constructs only.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import libcst as cst
import libcst.matchers as m
from libcst.codemod import (
    CodemodContext,
    ContextAwareTransformer,
    SkipFile,
    SkipReason,
    TransformFailure,
    TransformSkip,
    TransformSuccess,
)
from libcst.metadata import MetadataWrapper, PositionProvider

from d2kgrade.errors import UserError

_EMPTY = cst.Module(body=[])


class NotApplicable(Exception):
    """The transform found nothing to change in this file (the message says what it looked for)."""


@dataclass(frozen=True)
class Change:
    """One rewrite: where it was in the original file, and what it did."""

    line: int
    """First line of the original node (1-based)."""
    end_line: int
    """Last line of the original node."""
    what: str
    """What changed, in words (``eviction_policy='evict_last' removed``)."""


@dataclass(frozen=True)
class Applied:
    """A transformed source and its changes."""

    source: str
    changes: tuple[Change, ...]


class Ablation(ContextAwareTransformer):
    """Base of the transforms: tracks the enclosing function (and whether it is ``@triton.jit``), records
    changes with positions, and skips the file when nothing changed.

    Subclasses that override ``visit_FunctionDef``/``leave_FunctionDef`` must call these."""

    METADATA_DEPENDENCIES = (PositionProvider,)
    NAME = ""

    def __init__(self, context: CodemodContext, *, functions: list[str] | None = None) -> None:
        super().__init__(context)
        self.only = set(functions) if functions else None
        self.changes: list[Change] = []
        self._fns: list[tuple[str, bool]] = []
        self.module_consts: dict[str, cst.BaseExpression] = {}

    # ----------------------------------------------------------------- scope

    def visit_Module(self, node: cst.Module) -> bool:
        self.module_consts = module_constants(node)
        return True

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        outer_jit = bool(self._fns) and self._fns[-1][1]
        self._fns.append((node.name.value, outer_jit or is_jit(node)))
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        self._fns.pop()
        return updated_node

    @property
    def function(self) -> str | None:
        """Name of the innermost enclosing function (None at module level)."""
        return self._fns[-1][0] if self._fns else None

    @property
    def in_jit(self) -> bool:
        """Inside a ``@triton.jit`` function."""
        return bool(self._fns) and self._fns[-1][1]

    def in_scope(self) -> bool:
        """The current function is one the transform was limited to (``functions``), or there is no limit."""
        return self.only is None or any(name in self.only for name, _ in self._fns)

    # ----------------------------------------------------------------- bookkeeping

    def record(self, node: cst.CSTNode, what: str) -> None:
        """Record a change made to ``node`` (a node of the original tree)."""
        try:
            pos = self.get_metadata(PositionProvider, node)
            self.changes.append(Change(pos.start.line, pos.end.line, what))
        except KeyError:  # a node built by the transform itself
            self.changes.append(Change(0, 0, what))

    def nothing(self) -> str:
        """Why the transform did not apply (the SkipFile reason); subclasses say what they looked for."""
        return "nothing to change"

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        new = tree.visit(self)
        new = self.finish(new)
        if not self.changes:
            raise SkipFile(self.nothing() + (f" in {', '.join(sorted(self.only))}" if self.only else ""))
        return new

    def finish(self, tree: cst.Module) -> cst.Module:
        """A second pass after the visit (dead-code removal, say); the default does nothing."""
        return tree


def run_transform(cls: type[Ablation], source: str, args: dict[str, Any]) -> Applied:
    """Apply one transform to ``source``.

    Raises:
        NotApplicable: nothing to change. UserError: arguments the transform rejects, or a file it cannot parse.
    """
    try:
        codemod = cls(CodemodContext(), **args)
    except (TypeError, ValueError) as exc:
        raise UserError(f"transform {cls.NAME}: {exc}") from None
    try:
        wrapper = _parse(source)
    except cst.ParserSyntaxError as exc:
        raise UserError(f"transform {cls.NAME}: the file does not parse: {str(exc).splitlines()[0]}") from None
    result = _transform(codemod, wrapper)
    if isinstance(result, TransformSkip):
        raise NotApplicable(f"{cls.NAME}: {result.skip_description}")
    if isinstance(result, TransformFailure):
        err = result.error
        if isinstance(err, (cst.ParserSyntaxError, SyntaxError)):
            raise UserError(f"transform {cls.NAME}: the file does not parse: {str(err).splitlines()[0]}")
        if isinstance(err, (UserError, NotApplicable)):
            raise err
        raise RuntimeError(f"transform {cls.NAME} failed: {type(err).__name__}: {err}") from err
    assert isinstance(result, TransformSuccess)
    return Applied(result.code, tuple(codemod.changes))


@functools.lru_cache(maxsize=32)
def _parse(source: str) -> MetadataWrapper:
    """Parsed once per source text, with its metadata: a kernel is ablated once per property (147 transforms of
    26 references), and libcst trees are immutable, so every transform of one text can visit the same tree and
    share the positions resolved on it. A wrapper per transform (what :meth:`Codemod.transform_module` builds: a
    deep copy, then the positions again) doubled the time: the suite's 147 transforms took 49 s, not 26 s, on
    one CPU core."""
    return MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)  # a parsed tree has no shared nodes


def _transform(codemod: Ablation, wrapper: MetadataWrapper) -> TransformSuccess | TransformSkip | TransformFailure:
    """:meth:`libcst.codemod.Codemod.transform_module` on an already-wrapped tree (its one-pass branch; a codemod
    that asks for several passes gets that method itself)."""
    try:
        if codemod.should_allow_multiple_passes():
            return TransformSuccess(code=codemod.transform_module(wrapper.module).code, warning_messages=[])
        old = codemod.context.wrapper
        with codemod.resolve(wrapper):
            codemod.context = replace(codemod.context, wrapper=wrapper)
            try:
                out = codemod.transform_module_impl(wrapper.module)
            finally:
                codemod.context = replace(codemod.context, wrapper=old)
    except SkipFile as exc:
        return TransformSkip(skip_reason=SkipReason.OTHER, skip_description=str(exc), warning_messages=[])
    except Exception as exc:  # noqa: BLE001 - reported as a failure, as transform_module does
        return TransformFailure(error=exc, traceback_str="", warning_messages=[])
    return TransformSuccess(code=out.code, warning_messages=[])


# --------------------------------------------------------------------------------------------- patterns


def dotted(node: cst.CSTNode | None) -> str | None:
    """``tl.exp2`` for ``tl.exp2``, ``x`` for ``x``, ``.load`` for a method on anything else; None otherwise."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        if base is not None and not base.startswith("."):
            return f"{base}.{node.attr.value}"
        return f".{node.attr.value}"
    return None


def code(node: cst.CSTNode) -> str:
    """Source text of a node."""
    return _EMPTY.code_for_node(node)


def norm(text_or_node: str | cst.CSTNode) -> str:
    """A formatting-independent key of an expression (its ``ast`` dump), for matching patterns given as text."""
    text = text_or_node if isinstance(text_or_node, str) else code(text_or_node)
    try:
        return ast.dump(ast.parse(text.strip(), mode="eval"))
    except SyntaxError:
        return "\0" + text  # never equal to a parsed pattern


def parse_expr(text: str, what: str) -> cst.BaseExpression:
    """Parse a Python expression given as a transform argument.

    Raises:
        ValueError: it is not one expression.
    """
    try:
        ast.parse(text.strip(), mode="eval")
        return cst.parse_expression(text.strip())
    except (SyntaxError, cst.ParserSyntaxError) as exc:
        raise ValueError(f"{what} {text!r} is not a Python expression ({exc})") from None


def literal(value: Any) -> cst.BaseExpression:
    """A libcst expression for a YAML scalar (int, float, bool, str, None)."""
    if isinstance(value, (bool, type(None), int, float, str)):
        return cst.parse_expression(repr(value))
    raise ValueError(f"value {value!r} must be a number, a string, a bool or null")


def is_jit(fn: cst.FunctionDef) -> bool:
    """Is the function decorated with ``triton.jit`` (or ``jit``, ``triton.autotune(...)``/``heuristics``)?"""
    for d in fn.decorators:
        e = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        name = dotted(e) or ""
        if name in ("triton.jit", "jit", "tl.jit") or name.startswith(("triton.autotune", "triton.heuristics")):
            return True
    return False


def module_constants(module: cst.Module) -> dict[str, cst.BaseExpression]:
    """Module-level ``NAME = value`` bindings (the value expression; ``tl.constexpr(v)`` unwrapped to ``v``)."""
    out: dict[str, cst.BaseExpression] = {}
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            target = value = None
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target, value = small.targets[0].target, small.value
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                target, value = small.target, small.value
            if isinstance(target, cst.Name) and value is not None:
                if isinstance(value, cst.Call) and dotted(value.func) in ("tl.constexpr", "triton.language.constexpr") \
                        and value.args:
                    value = value.args[0].value
                out[target.value] = value
    return out


def const_value(expr: cst.BaseExpression, consts: dict[str, cst.BaseExpression], depth: int = 0) -> Any:
    """The value of a literal, a negated literal, or a module constant bound to one; None if not constant."""
    if depth > 4:
        return None
    if isinstance(expr, cst.Name) and expr.value in consts:
        return const_value(consts[expr.value], consts, depth + 1)
    if isinstance(expr, (cst.SimpleString, cst.Integer, cst.Float, cst.ConcatenatedString)):
        try:
            return ast.literal_eval(code(expr))
        except ValueError:
            return None
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        v = const_value(expr.expression, consts, depth + 1)
        return -v if isinstance(v, (int, float)) else None
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[expr.value]
    return None


def kwarg(call: cst.Call, name: str) -> cst.Arg | None:
    """The keyword argument ``name`` of a call, or None."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a
    return None


def without_args(call: cst.Call, drop: Sequence[cst.Arg]) -> cst.Call:
    """``call`` without the arguments in ``drop`` (identity), keeping the comma layout valid: when the last
    argument goes, the new last one takes its comma (usually none)."""
    ids = {id(a) for a in drop}
    kept = [a for a in call.args if id(a) not in ids]
    if kept and call.args and id(call.args[-1]) in ids:
        kept[-1] = kept[-1].with_changes(comma=call.args[-1].comma)
    return call.with_changes(args=kept)


def names_in(node: cst.CSTNode) -> set[str]:
    """Every ``Name`` read in a node."""
    return {n.value for n in m.findall(node, m.Name())}  # type: ignore[union-attr]


def launch_kernel(call: cst.Call) -> str | None:
    """``k`` for a launch ``k[grid](...)`` (also ``mod.k[grid](...)``), else None."""
    if isinstance(call.func, cst.Subscript):
        name = dotted(call.func.value)
        return name.rsplit(".", 1)[-1] if name else None
    return None


def iter_functions(module: cst.Module) -> Iterable[cst.FunctionDef]:
    """Every function definition of the module, nested ones included."""
    return m.findall(module, m.FunctionDef())  # type: ignore[return-value]


def jit_params(module: cst.Module) -> dict[str, set[str]]:
    """For each ``@triton.jit`` function, the names of its parameters."""
    return {f.name.value: {p.name.value for p in f.params.params} for f in iter_functions(module) if is_jit(f)}
