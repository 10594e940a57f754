"""Safe arithmetic over a workload's parameters: cost formulas, derived parameters and symbolic shapes.

Task files hold formulas such as ``"4*B*Hq*S*S*D/(2 if causal else 1)"``. They are parsed with :mod:`ast`
and walked over a small whitelist (numbers, booleans, names, arithmetic, comparisons, ``x if c else y``,
``min``/``max``/``ceil``/``floor``/``log2``/``cdiv``, and ``lens_max``/``lens_min``/``lens_sum``/``lens_count``
of a varlen length-list parameter such as ``ctx: "60 x 509 + 4 x 65519"``); nothing is ever handed to ``eval``,
so a task file cannot run code.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping
from functools import lru_cache

Number = int | float | bool

_BINOPS: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Number, Number], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_FUNCS: dict[str, Callable[..., Number]] = {
    "min": min,
    "max": max,
    "ceil": math.ceil,
    "floor": math.floor,
    "log2": math.log2,
    "sqrt": math.sqrt,
    "abs": abs,
    "cdiv": lambda a, b: -(-a // b),
}
# A huge integer power would hang the evaluator (big integers); no cost model needs more. Float powers are O(1)
# and stay allowed: (1 - 1/E)**T, the chance that an expert gets no row out of T, has T = 32768.
_MAX_POW = 256

# Length lists of variable-length workloads: a parameter such as ctx may be a number (one length) or a string
# "60 x 509 + 4 x 65519" (60 sequences of 509 and 4 of 65519). These functions take such a parameter by name.
_LENGTHS_RE = re.compile(r"^\s*(?:(\d+)\s*x\s*)?(\d+)\s*$")


def lengths(value: object) -> list[int]:
    """The lengths a varlen parameter stands for: ``4096`` -> [4096]; ``"60 x 509 + 4 x 65519"`` -> 60 509s then
    4 65519s, in the order written.

    Raises:
        FormulaError: if the value is neither a non-negative whole number nor such a sum of terms.
    """
    if isinstance(value, bool):
        raise FormulaError(f"{value!r} is not a length list")
    if isinstance(value, (int, float)):
        if float(value) != int(value) or value < 0:
            raise FormulaError(f"{value!r} is not a whole length")
        return [int(value)]
    if not isinstance(value, str):
        raise FormulaError(f"{value!r} is not a length list")
    out: list[int] = []
    for term in value.split("+"):
        m = _LENGTHS_RE.match(term)
        if not m:
            raise FormulaError(f"length list {value!r}: term {term.strip()!r} is not 'COUNT x LENGTH' or 'LENGTH'")
        out += [int(m.group(2))] * int(m.group(1) or 1)
    if not out:
        raise FormulaError(f"length list {value!r} is empty")
    return out


_LIST_FUNCS: dict[str, Callable[[list[int]], Number]] = {
    "lens_max": max,
    "lens_min": min,
    "lens_sum": sum,
    "lens_count": len,
}


class FormulaError(ValueError):
    """A formula is not valid or cannot be evaluated with the given names."""


@lru_cache(maxsize=4096)
def parse(text: str) -> ast.expr:
    """Parse a formula and check that it uses only whitelisted syntax.

    Raises:
        FormulaError: on a syntax error or a construct outside the whitelist.
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"not a valid formula: {text!r} ({exc.msg})") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in {**_FUNCS, **_LIST_FUNCS} \
                    or node.keywords:
                raise FormulaError(
                    f"formula {text!r} makes a call that is not allowed; "
                    f"only {sorted({**_FUNCS, **_LIST_FUNCS})} with positional arguments"
                )
            if node.func.id in _LIST_FUNCS and (len(node.args) != 1 or not isinstance(node.args[0], ast.Name)):
                raise FormulaError(f"formula {text!r}: {node.func.id} takes one parameter name")
        elif not isinstance(
            node,
            (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.IfExp, ast.BoolOp, ast.Name,
             ast.Constant, ast.Load, ast.operator, ast.unaryop, ast.cmpop, ast.boolop),
        ):
            raise FormulaError(f"formula {text!r} uses {type(node).__name__}, which is not allowed")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, bool)):
            raise FormulaError(f"formula {text!r} holds a non-numeric constant {node.value!r}")
        if isinstance(node, ast.BinOp) and type(node.op) not in _BINOPS:
            raise FormulaError(f"formula {text!r} uses an operator that is not allowed")
    return tree.body


def names(text: str) -> set[str]:
    """The free names a formula refers to (function names excluded)."""
    tree = parse(text)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called


def evaluate(text: str, env: Mapping[str, object]) -> Number:
    """Evaluate a formula over ``env`` (a workload's parameters and derived values).

    Raises:
        FormulaError: on an unknown name, a non-numeric value, a division by zero or a too-large power.
    """
    return _eval(parse(text), env, text)


def _eval(node: ast.expr, env: Mapping[str, object], text: str) -> Number:
    if isinstance(node, ast.Constant):
        return node.value  # type: ignore[no-any-return]
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise FormulaError(f"formula {text!r} refers to {node.id!r}, which is not defined")
        value = env[node.id]
        if not isinstance(value, (int, float, bool)):
            raise FormulaError(f"formula {text!r}: {node.id!r} is {value!r}, not a number")
        return value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env, text), _eval(node.right, env, text)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_POW and not isinstance(left, float):
            raise FormulaError(f"formula {text!r}: exponent {right} is too large")
        try:
            return _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError:
            raise FormulaError(f"formula {text!r} divides by zero") from None
        except OverflowError:
            raise FormulaError(f"formula {text!r} overflows") from None
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, env, text))
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env, text)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, env, text)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        branch = node.body if _eval(node.test, env, text) else node.orelse
        return _eval(branch, env, text)
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, env, text) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        if node.func.id in _LIST_FUNCS:
            arg = node.args[0]
            assert isinstance(arg, ast.Name)
            if arg.id not in env:
                raise FormulaError(f"formula {text!r} refers to {arg.id!r}, which is not defined")
            try:
                return _LIST_FUNCS[node.func.id](lengths(env[arg.id]))
            except FormulaError as exc:
                raise FormulaError(f"formula {text!r}: {exc}") from None
        args = [_eval(a, env, text) for a in node.args]
        try:
            return _FUNCS[node.func.id](*args)
        except (TypeError, ValueError, ZeroDivisionError) as exc:
            raise FormulaError(f"formula {text!r}: {node.func.id}{tuple(args)} failed ({exc})") from None
    raise FormulaError(f"formula {text!r}: unsupported node {type(node).__name__}")  # pragma: no cover


_SHAPE_RE = re.compile(r"^\s*\[(.*)\]\s*$")


def shape_dims(shape: str) -> list[str]:
    """Split a symbolic shape such as ``"[M, K/128]"`` into its dimension formulas.

    Raises:
        FormulaError: if the text is not a bracketed, comma-separated list of valid formulas.
    """
    match = _SHAPE_RE.match(shape)
    if not match:
        raise FormulaError(f"shape {shape!r} is not of the form '[D0, D1, ...]'")
    inner = match.group(1).strip()
    dims = [d.strip() for d in inner.split(",")] if inner else []
    for d in dims:
        if not d:
            raise FormulaError(f"shape {shape!r} has an empty dimension")
        parse(d)
    return dims


def eval_shape(shape: str, env: Mapping[str, object]) -> tuple[int, ...]:
    """Evaluate a symbolic shape to concrete integer sizes.

    Raises:
        FormulaError: if a dimension is not a non-negative whole number.
    """
    out = []
    for d in shape_dims(shape):
        v = evaluate(d, env)
        if isinstance(v, bool) or float(v) != int(v) or v < 0:
            raise FormulaError(f"shape {shape!r}: dimension {d!r} evaluates to {v!r}, not a whole number >= 0")
        out.append(int(v))
    return tuple(out)
