"""Numerics: exp2 with a folded log2(e) back to exp, reciprocal-multiply back to division, fast division back
to IEEE division, fp32 upcasts of loaded values removed."""

from __future__ import annotations

import math
from collections import Counter

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext, SkipFile

from d2kgrade.ablate.registry import transform
from d2kgrade.ablate.transforms._base import Ablation, code, dotted

LOG2E = 1.0 / math.log(2.0)
LN2 = math.log(2.0)
_MATH = {"math.e": math.e, "math.pi": math.pi}
_FUNCS = {"math.log": math.log, "math.log2": math.log2, "math.sqrt": math.sqrt, "math.exp": math.exp}


def fold(e: cst.BaseExpression, env: dict[str, float], depth: int = 0) -> float | None:
    """The value of a constant arithmetic expression (literals, names bound to constants, + - * / **, unary
    minus, ``math.log/log2/sqrt/exp``, ``math.e/pi``, ``tl.constexpr(x)``); None when not constant."""
    if depth > 12:
        return None
    if isinstance(e, (cst.Integer, cst.Float)):
        return float(e.evaluated_value)
    if isinstance(e, cst.Name):
        return env.get(e.value)
    if isinstance(e, cst.Attribute):
        return _MATH.get(dotted(e) or "")
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, (cst.Minus, cst.Plus)):
        v = fold(e.expression, env, depth + 1)
        return None if v is None else (-v if isinstance(e.operator, cst.Minus) else v)
    if isinstance(e, cst.BinaryOperation):
        a, b = fold(e.left, env, depth + 1), fold(e.right, env, depth + 1)
        if a is None or b is None:
            return None
        try:
            if isinstance(e.operator, cst.Add):
                return a + b
            if isinstance(e.operator, cst.Subtract):
                return a - b
            if isinstance(e.operator, cst.Multiply):
                return a * b
            if isinstance(e.operator, cst.Divide):
                return a / b
            if isinstance(e.operator, cst.Power):
                return float(a ** b)
        except (ZeroDivisionError, OverflowError, ValueError):
            return None
        return None
    if isinstance(e, cst.Call) and len(e.args) == 1:
        name = dotted(e.func) or ""
        v = fold(e.args[0].value, env, depth + 1)
        if v is None:
            return None
        if name in ("tl.constexpr", "float"):
            return v
        fn = _FUNCS.get(name)
        try:
            return fn(v) if fn else None
        except ValueError:
            return None
    return None


def _close(v: float | None, target: float) -> bool:
    return v is not None and abs(v - target) <= 1e-6 * target


class _Bindings(cst.CSTVisitor):
    """Every ``name = value`` / ``name: T = value`` of a module, in order (one walk)."""

    def __init__(self) -> None:
        self.found: list[tuple[str, cst.BaseExpression]] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self.found.append((node.targets[0].target.value, node.value))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name) and node.value is not None:
            self.found.append((node.target.value, node.value))


def constant_env(module: cst.Module) -> dict[str, float]:
    """Every name assigned a constant number anywhere in the file (module level and inside functions)."""
    b = _Bindings()
    module.visit(b)
    env: dict[str, float] = {}
    for _ in range(3):  # constants defined from constants
        for name, value in b.found:
            if (v := fold(value, env)) is not None:
                env[name] = v
    return env


EXP2_NAMES = {"tl.exp2": "exp", "tl.math.exp2": "exp", "libdevice.exp2": "exp", "tl.log2": "log",
              "tl.math.log2": "log", "libdevice.log2": "log"}


@transform("exp2_to_exp")
class Exp2ToExp(Ablation):
    """``exp2`` with log2(e) folded in -> ``exp`` in the natural domain: ``tl.exp2``/``tl.log2`` (also
    ``tl.math.``/``libdevice.``) become ``tl.exp``/``tl.log``, and every multiplication by log2(e) or ln(2), and
    division by either, loses that factor (``(x - m) * LOG2E`` -> ``(x - m)``, ``D ** -0.5 * LOG2E`` ->
    ``D ** -0.5``, ``log2(s) * LN2`` -> ``log(s)``), in kernels and on the host alike, so every value that lived
    in the log2 domain lives in the natural one and the results are the same up to rounding."""

    def __init__(self, context: CodemodContext, *, functions: list[str] | None = None) -> None:
        super().__init__(context, functions=functions)
        self.env: dict[str, float] = {}
        self.calls = 0
        self.bare: set[int] = set()

    def nothing(self) -> str:
        return "no tl.exp2 / tl.log2 call"

    def visit_Module(self, node: cst.Module) -> bool:
        super().visit_Module(node)
        self.env = constant_env(node)
        return True

    def _factor(self, e: cst.BaseExpression) -> int:
        """1 when ``e`` is log2(e) or ln(2) (a literal, a named constant), -1 when it is minus one, else 0."""
        neg = isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Minus)
        inner = e.expression if neg else e  # type: ignore[union-attr]
        if isinstance(inner, (cst.Name, cst.Float, cst.Integer)) or (isinstance(inner, cst.Call) and dotted(
                inner.func) == "tl.constexpr"):
            v = fold(inner, self.env)
            if _close(v, LOG2E) or _close(v, LN2):
                return -1 if neg else 1
        return 0

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        name = dotted(updated_node.func)
        if name in EXP2_NAMES and self.in_scope():
            assert isinstance(updated_node.func, cst.Attribute)
            self.calls += 1
            new = EXP2_NAMES[name]
            self.record(original_node, f"{name} -> {name.rsplit('.', 1)[0]}.{new}")
            return updated_node.with_changes(func=updated_node.func.with_changes(attr=cst.Name(new)))
        return updated_node

    def leave_BinaryOperation(self, original_node: cst.BinaryOperation,
                              updated_node: cst.BinaryOperation) -> cst.BaseExpression:
        if not self.in_scope() or not isinstance(updated_node.operator, (cst.Multiply, cst.Divide)):
            return updated_node
        sides = [(updated_node.right, updated_node.left)]
        if isinstance(updated_node.operator, cst.Multiply):
            sides.append((updated_node.left, updated_node.right))
        for factor, rest in sides:
            sign = self._factor(factor)
            if sign == 0:
                continue
            self.record(original_node, f"factor {code(factor)} removed")
            if sign < 0:
                inner = rest if isinstance(rest, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or rest.lpar \
                    else rest.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                return cst.UnaryOperation(operator=cst.Minus(), expression=inner, lpar=updated_node.lpar,
                                          rpar=updated_node.rpar)
            out = rest.with_changes(lpar=[*updated_node.lpar, *rest.lpar], rpar=[*rest.rpar, *updated_node.rpar])
            self.bare.add(id(out))
            return out
        return updated_node

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        # exp2((x - m) * LOG2E) -> exp(x - m), not exp((x - m)): parentheses the factor needed, an argument does not
        v = updated_node.value
        if id(v) in self.bare and len(v.lpar) == 1 and len(v.rpar) == 1:
            return updated_node.with_changes(value=v.with_changes(lpar=[], rpar=[]))
        return updated_node

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        out = super().transform_module_impl(tree)
        if not self.calls:
            raise SkipFile(self.nothing())
        return out


def _assigns(fn: cst.FunctionDef) -> list[cst.Assign]:
    return [a for a in m.findall(fn.body, m.Assign(targets=[m.AssignTarget(target=m.Name())]))
            if isinstance(a, cst.Assign)]


def _wrap(e: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(e, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or e.lpar:
        return e
    return e.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


RSQRT = ("tl.rsqrt", "tl.math.rsqrt", "libdevice.rsqrt")


@transform("reciprocal_to_division")
class ReciprocalToDivision(Ablation):
    """A reciprocal computed once and multiplied in -> a division per element: for ``inv = 1.0 / s`` (or
    ``r = tl.rsqrt(v)``) in a jit function, each ``x * inv`` (``x * inv[:, None]``, ``x *= inv``) becomes
    ``x / s`` (``x / tl.sqrt(v)``), and the assignment goes when nothing else reads it (``names``: only these
    reciprocals)."""

    def __init__(self, context: CodemodContext, *, names: list[str] | None = None,
                 functions: list[str] | None = None) -> None:
        super().__init__(context, functions=functions)
        self.names = set(names) if names else None
        self.recips: list[dict[str, cst.BaseExpression]] = []
        self.assign_of: dict[str, cst.Assign] = {}
        self.used: set[str] = set()

    def nothing(self) -> str:
        return "no reciprocal (1 / s, tl.rsqrt(v)) multiplied into element-wise values"

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        super().visit_FunctionDef(node)
        found: dict[str, cst.BaseExpression] = {}
        if self.in_jit and self.in_scope():
            assigns = _assigns(node)
            counts = Counter(a.targets[0].target.value for a in assigns)  # type: ignore[union-attr]
            for a in assigns:
                name = a.targets[0].target.value  # type: ignore[union-attr]
                if counts[name] != 1 or (self.names is not None and name not in self.names):
                    continue
                v = a.value
                den = None
                if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Divide) \
                        and isinstance(v.left, (cst.Float, cst.Integer)) and float(v.left.evaluated_value) == 1.0:
                    den = v.right
                elif isinstance(v, cst.Call) and dotted(v.func) in RSQRT and len(v.args) == 1:
                    den = cst.Call(func=cst.parse_expression(dotted(v.func).replace("rsqrt", "sqrt")),
                                   args=[v.args[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)])
                if den is not None:
                    found[name] = _wrap(den.with_changes(lpar=[], rpar=[]) if den.lpar else den)
                    self.assign_of[name] = a
        self.recips.append(found)
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        found = self.recips.pop()
        if found:
            # Drop the reciprocal's assignment when no read of it is left.
            reads = Counter(n.value for n in m.findall(updated_node.body, m.Name()) if isinstance(n, cst.Name))
            dead = {name for name in found if name in self.used and reads[name] == 1}  # the target itself
            if dead:
                updated_node = updated_node.visit(_DropAssigns(dead))
                for name in dead:
                    self.record(self.assign_of[name], f"{name} removed (no read left)")
        return super().leave_FunctionDef(original_node, updated_node)

    def _sub(self, e: cst.BaseExpression) -> cst.BaseExpression | None:
        """The denominator for ``inv`` or ``inv[...]``; None when ``e`` is neither."""
        table = self.recips[-1] if self.recips else {}
        if isinstance(e, cst.Name) and e.value in table:
            self._mark(e.value)
            return table[e.value]
        if isinstance(e, cst.Subscript) and isinstance(e.value, cst.Name) and e.value.value in table and not e.lpar:
            self._mark(e.value.value)
            return e.with_changes(value=table[e.value.value])
        return None

    def _mark(self, name: str) -> None:
        self.used.add(name)

    def leave_BinaryOperation(self, original_node: cst.BinaryOperation,
                              updated_node: cst.BinaryOperation) -> cst.BaseExpression:
        if not isinstance(updated_node.operator, cst.Multiply):
            return updated_node
        for r, x in ((updated_node.right, updated_node.left), (updated_node.left, updated_node.right)):
            den = self._sub(r)
            if den is not None:
                self.record(original_node, f"* {code(r)} -> / {code(den)}")
                return cst.BinaryOperation(left=x, operator=cst.Divide(), right=_wrap(den), lpar=updated_node.lpar,
                                           rpar=updated_node.rpar)
        return updated_node

    def leave_AugAssign(self, original_node: cst.AugAssign, updated_node: cst.AugAssign) -> cst.AugAssign:
        if isinstance(updated_node.operator, cst.MultiplyAssign):
            den = self._sub(updated_node.value)
            if den is not None:
                self.record(original_node, f"*= {code(updated_node.value)} -> /= {code(den)}")
                return updated_node.with_changes(operator=cst.DivideAssign(), value=den)
        return updated_node


class _DropAssigns(cst.CSTTransformer):
    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.names = names

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        if len(updated_node.body) == 1 and m.matches(updated_node.body[0], m.Assign(
                targets=[m.AssignTarget(target=m.Name())])):
            a = updated_node.body[0]
            if a.targets[0].target.value in self.names:  # type: ignore[union-attr]
                return cst.RemoveFromParent()
        return updated_node


FAST_DIVS = ("tl.fdiv", "tl.math.fdiv", "tl.math.fast_dividef", "libdevice.fast_dividef", "tl.math.div_rz")


@transform("exact_division")
class ExactDivision(Ablation):
    """Approximate division -> IEEE division: ``tl.fdiv(a, b, ieee_rounding=False)``, ``fast_dividef(a, b)``
    become ``a / b``."""

    def nothing(self) -> str:
        return "no tl.fdiv / fast_dividef"

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        name = dotted(updated_node.func)
        pos = [a for a in updated_node.args if a.keyword is None]
        if name in FAST_DIVS and len(pos) == 2 and self.in_scope():
            self.record(original_node, f"{name}(a, b) -> a / b")
            return cst.BinaryOperation(left=_wrap(pos[0].value), operator=cst.Divide(), right=_wrap(pos[1].value),
                                       lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return updated_node


@transform("strip_upcasts")
class StripUpcasts(Ablation):
    """Keep loaded values in their storage dtype: ``tl.load(...).to(tl.float32)`` (also through a name bound to
    a load in the same function) becomes the load itself, so the arithmetic runs in bf16/fp16 (``dtype``: the
    upcast to remove)."""

    def __init__(self, context: CodemodContext, *, dtype: str = "tl.float32", functions: list[str] | None = None) -> None:
        super().__init__(context, functions=functions)
        self.dtype = dtype
        self.loaded: list[set[str]] = []

    def nothing(self) -> str:
        return f"no loaded value cast with .to({self.dtype})"

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        super().visit_FunctionDef(node)
        self.loaded.append({a.targets[0].target.value for a in _assigns(node)  # type: ignore[union-attr]
                            if isinstance(a.value, cst.Call) and (dotted(a.value.func) or "").endswith(".load")})
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        self.loaded.pop()
        return super().leave_FunctionDef(original_node, updated_node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        f = updated_node.func
        if not (self.in_jit and self.in_scope() and isinstance(f, cst.Attribute) and f.attr.value == "to"
                and len(updated_node.args) >= 1 and dotted(updated_node.args[0].value) == self.dtype):
            return updated_node
        recv = f.value
        is_load = isinstance(recv, cst.Call) and (dotted(recv.func) or "").endswith(".load")
        if is_load or (isinstance(recv, cst.Name) and self.loaded and recv.value in self.loaded[-1]):
            self.record(original_node, f".to({self.dtype}) removed")
            return recv.with_changes(lpar=[*updated_node.lpar, *recv.lpar], rpar=[*recv.rpar, *updated_node.rpar])
        return updated_node

