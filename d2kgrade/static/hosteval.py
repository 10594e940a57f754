"""Host values on one workload: what an expression of the flattened entry evaluates to when ``kernel(...)`` gets
tensors of known shapes and dtypes.

:class:`Evaluator` reads constants, the entry's bound parameters (a :class:`Tensor` per input), ``x.shape``,
``x.shape[-1]``, ``M, N = x.shape``, ``x.size(1)``, ``x.numel()``, ``x.view(-1, N)``, ``x.dtype`` against
``torch.float16`` (:class:`DType`), arithmetic, comparisons, ``and``/``or`` as Python computes them, ternaries,
``triton.next_power_of_2``, ``triton.cdiv``, ``min``/``max``, string-keyed dict displays and a kernel named as a
value (:class:`Fn`). A name holds its last definition that ran before the read (conditions evaluated alike); a
definition inside a loop, a device query or anything else is :data:`UNKNOWN`, never a guess.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from d2kgrade.dtypes import DTYPE_BYTES
from d2kgrade.static.ir import Assign, Expr, Function
from d2kgrade.static.lower import dtype_of

if TYPE_CHECKING:
    from d2kgrade.static.facts import Facts


class _Unknown:
    """A value the analysis cannot decide (a device query, a value set in a loop, an unread tensor attribute)."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()
MAX_DEPTH = 24


@dataclass(frozen=True)
class Tensor:
    """A tensor argument of one workload: its concrete shape and dtype name (``bf16``)."""

    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class Fn:
    """A function of the file named as a value (a kernel picked by a ternary or from a dict)."""

    key: str


@dataclass(frozen=True)
class DType:
    """A dtype named as a value (``torch.float16``, ``x.dtype``)."""

    name: str


@dataclass(frozen=True)
class Truth:
    """A value known only by its truth (``a or b`` with ``a`` unknown and ``b`` true)."""

    value: bool


def _truth(v: Any) -> bool | None:
    if v is UNKNOWN or isinstance(v, Tensor):  # a tensor's truth is its one element's, or an error
        return None
    if isinstance(v, (Fn, Truth)):
        return v.value if isinstance(v, Truth) else True
    try:
        return bool(v)
    except Exception:  # noqa: BLE001 - a value whose truth is not a plain bool
        return None


def _and(vals: list[Any]) -> Any:
    """``a and b and ...`` as Python computes it (the first false operand, else the last); when an unknown
    operand leaves the value open but not the truth, a :class:`Truth`."""
    for i, v in enumerate(vals):
        t = _truth(v)
        if t is None:
            return Truth(False) if any(_truth(w) is False for w in vals[i + 1:]) else UNKNOWN
        if not t or i == len(vals) - 1:
            return v
    return UNKNOWN


def _or(vals: list[Any]) -> Any:
    """``a or b or ...`` as Python computes it (the first true operand, else the last)."""
    for i, v in enumerate(vals):
        t = _truth(v)
        if t is None:
            return Truth(True) if any(_truth(w) is True for w in vals[i + 1:]) else UNKNOWN
        if t or i == len(vals) - 1:
            return v
    return UNKNOWN


_CMPS = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
         "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
         "is": lambda a, b: a == b, "is not": lambda a, b: a != b,
         "in": lambda a, b: a in b, "not in": lambda a, b: a not in b}
_BINS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
         "//": lambda a, b: a // b, "%": lambda a, b: a % b, "<<": lambda a, b: a << b if 0 <= b < 64 else UNKNOWN,
         ">>": lambda a, b: a >> b, "**": lambda a, b: a ** b if abs(b) < 64 else UNKNOWN,
         "&": lambda a, b: a & b, "|": lambda a, b: a | b}
_DTYPE_METHODS = {".float": "fp32", ".half": "fp16", ".bfloat16": "bf16", ".double": "fp64", ".int": "int32",
                  ".long": "int64"}
SCALAR_TYPES = {"kFloat": "fp32", "kFloat32": "fp32", "kDouble": "fp64", "kFloat64": "fp64", "kHalf": "fp16",
                "kFloat16": "fp16", "kBFloat16": "bf16", "kFloat8_e4m3fn": "fp8_e4m3", "kFloat8_e5m2": "fp8_e5m2",
                "kInt": "int32", "kInt32": "int32", "kLong": "int64", "kInt64": "int64", "kShort": "int16",
                "kInt16": "int16", "kChar": "int8", "kInt8": "int8", "kByte": "uint8", "kUInt8": "uint8",
                "kBool": "bool"}
"""ATen scalar types (``torch::kBFloat16``) by the task's dtype names."""
MUTATORS = {".append", ".extend", ".insert", ".update", ".pop", ".popitem", ".clear", ".setdefault", ".remove",
            ".sort", ".reverse", ".__setitem__"}
"""Methods that change a list or dict in place."""
_SAME_TENSOR = {".contiguous", ".clone", ".detach", ".cuda", "torch.empty_like", "torch.zeros_like",
                "torch.ones_like", "torch.full_like"}


class Evaluator:
    """Values of expressions of one function, with some names bound (the entry's parameters on one workload, or
    a kernel's constexpr parameters on one launch)."""

    def __init__(self, facts: Facts, fn: Function, bound: dict[str, Any],
                 opaque: frozenset[str] | set[str] = frozenset()) -> None:
        self.facts = facts
        self.fn = fn
        self.bound = bound
        self.c_lang = fn.lang == "cuda"
        """C++ host code: integer ``/`` and ``%`` truncate toward zero."""
        self.opaque = frozenset(opaque) | {lp.var for lp in fn.loops if lp.var}
        """Names whose value is not known here (a kernel's locals and run-time parameters, loop variables): never
        read from a module-level name of the same spelling."""
        self.memo: dict[tuple[int, int], tuple[Expr, Any]] = {}
        self.module = facts.functions.get("<module>")
        self.limit = 1 << 30
        """Definitions at or after this index of ``fn.assigns`` are not yet run (the value of ``x`` in
        ``x = x.contiguous()`` is the earlier ``x``)."""
        self._pos = {id(a): i for i, a in enumerate(fn.assigns)}
        self._module_ev: Evaluator | None = None
        self._mutated_names: set[str] | None = None

    def truth(self, guards: tuple[Expr, ...]) -> bool | None:
        """Do the ``if`` conditions ``guards`` hold: True, False, or None (cannot tell)."""
        return _truth(_and([self.value(g) for g in guards])) if guards else True

    def value(self, e: Expr, depth: int = 0) -> Any:
        """The value of ``e``, or :data:`UNKNOWN`."""
        key = (id(e), self.limit)
        hit = self.memo.get(key)
        if hit is not None:
            return hit[1]
        if depth > MAX_DEPTH:
            return UNKNOWN
        try:
            out = self._value(e, depth)
        except (ArithmeticError, TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError,
                RecursionError):
            out = UNKNOWN
        self.memo[key] = (e, out)
        return out

    def _value(self, e: Expr, d: int) -> Any:
        k = e.kind
        v = self.value
        if k == "const":
            return e.value if e.op != "f-string" else UNKNOWN
        if k == "name":
            return self._name(e.op, d)
        if k == "unary" and e.args:
            a = v(e.args[0], d + 1)
            if e.op in ("not", "!"):
                t = _truth(a)
                return UNKNOWN if t is None else not t
            if a is UNKNOWN or not isinstance(a, (int, float)):
                return UNKNOWN
            return -a if e.op == "-" else a if e.op == "+" else ~a if e.op == "~" else UNKNOWN
        if k == "bin" and len(e.args) == 2:
            a, b = v(e.args[0], d + 1), v(e.args[1], d + 1)
            op = _BINS.get(e.op)
            if op is None or a is UNKNOWN or b is UNKNOWN or not _plain(a) or not _plain(b):
                return UNKNOWN
            if self.c_lang and e.op in ("/", "%") and isinstance(a, int) and isinstance(b, int):
                if not b:
                    return UNKNOWN
                q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C truncates toward zero
                return q if e.op == "/" else a - q * b
            return _bounded(op, a, b)
        if k == "cmp":
            if e.op in ("and", "&&"):
                return _and([v(a, d + 1) for a in e.args])
            if e.op in ("or", "||"):
                return _or([v(a, d + 1) for a in e.args])
            if len(e.args) != 2 or e.op not in _CMPS:  # a chain a < b < c keeps one operator: not read
                return UNKNOWN
            a, b = v(e.args[0], d + 1), v(e.args[1], d + 1)
            if not _plain(a) or not _plain(b) or isinstance(a, tuple) and e.op not in ("==", "!="):
                return UNKNOWN
            if e.op in ("in", "not in") and not isinstance(b, tuple):
                return UNKNOWN
            if isinstance(a, DType) and e.op in ("==", "!=", "is", "is not", "in", "not in"):
                same = _dtype_in(a, b if isinstance(b, tuple) else (b,))
                return UNKNOWN if same is UNKNOWN else same == (e.op in ("==", "is", "in"))
            return _CMPS[e.op](a, b)
        if k == "cast" and e.args:
            x = v(e.args[0], d + 1)
            if isinstance(x, Tensor):
                return Tensor(x.shape, e.op) if e.op in DTYPE_BYTES else UNKNOWN
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                return UNKNOWN
            if e.op.startswith(("int", "uint")):
                return int(x)
            return float(x) if e.op.startswith(("fp", "bf")) else UNKNOWN
        if k == "ternary" and len(e.args) == 3:
            t = _truth(v(e.args[0], d + 1))
            if t is None:
                a, b = v(e.args[1], d + 1), v(e.args[2], d + 1)
                return a if a == b and a is not UNKNOWN else UNKNOWN
            return v(e.args[1] if t else e.args[2], d + 1)
        if k == "tuple":
            if e.op == "dict":
                return UNKNOWN
            if any(a.kind == "other" and a.op == "*" for a in e.args):
                return UNKNOWN
            return tuple(v(a, d + 1) for a in e.args)
        if k == "attr" and e.recv is not None:
            return self._attr(v(e.recv, d + 1), e.op)
        if k == "sub" and len(e.args) == 2:
            return self._sub(e.args[0], e.args[1], d)
        if k == "call":
            return self._call(e, d)
        return UNKNOWN

    # -------------------------------------------------------------------------------------------- names

    def _name(self, name: str, d: int) -> Any:
        dt = dtype_of(Expr("name", name))
        if dt is not None and "." in name:
            return DType(dt)
        if "::" in name and name.rsplit("::", 1)[-1] in SCALAR_TYPES:  # torch::kBFloat16, at::kHalf
            return DType(SCALAR_TYPES[name.rsplit("::", 1)[-1]])
        if name in ("True", "False", "None") or self.c_lang and name in ("true", "false"):
            return {"True": True, "False": False, "None": None, "true": True, "false": False}[name]
        defs = self.fn.defs().get(name)
        if defs:
            return self._defs(defs, self.fn, d)
        if name in self.bound:
            return self.bound[name]
        if name in self.opaque:
            return UNKNOWN
        if self.module is not None and self.fn is not self.module and not self.c_lang:
            mdefs = self.module.defs().get(name)
            if mdefs and name in self._mutated():
                return UNKNOWN
            if mdefs:
                if self._module_ev is None:
                    self._module_ev = Evaluator(self.facts, self.module, {})
                return self._module_ev.value_of_defs(mdefs, d)
        if name in self.facts.consts:
            c = self.facts.consts[name]
            return c if _plain(c) or c is None else UNKNOWN
        if name in self.facts.functions:
            return Fn(name)
        return UNKNOWN

    def _mutated(self) -> set[str]:
        """Names some host function of the file changes in place (``CONFIGS.append(...)``, ``_CFG.update(...)``)
        or assigns (perhaps under ``global``, which the records do not keep): their module-level value is not
        what a read sees."""
        if self._mutated_names is None:
            hosts = [f for f in self.facts.functions.values() if f.lang == "py" and f.kind == "host"
                     and f is not self.module]
            self._mutated_names = {c.expr.recv.op for f in hosts for c in f.calls if c.name in MUTATORS
                                   and c.expr.recv is not None and c.expr.recv.kind == "name"}
            self._mutated_names |= {t for f in hosts if not f.inlined for a in f.assigns for t in a.targets}
        return self._mutated_names

    def value_of_defs(self, defs: list[Assign], d: int) -> Any:
        return self._defs(defs, self.fn, d)

    def _defs(self, defs: list[Assign], fn: Function, d: int) -> Any:
        """The value a name holds after its definitions ran: the last one whose conditions hold (every later one
        must be known not to run); a definition inside a loop is not read."""
        limit = self.limit
        try:
            for a in reversed(defs):
                at = self._pos.get(id(a), -1)
                if at >= limit:
                    continue
                if a.loops or a.aug:
                    return UNKNOWN
                self.limit = at
                t = self.truth(a.guards)
                if t is False:
                    continue
                if t is None:
                    return UNKNOWN
                val = self.value(a.value, d + 1)
                if a.index is not None:
                    val = _index(val, a.index)
                return val
            # no definition ran before this read: a parameter of the entry, else nothing known
            name = defs[0].targets[0] if defs and defs[0].targets else ""
            return self.bound.get(name, UNKNOWN)
        finally:
            self.limit = limit

    # -------------------------------------------------------------------------------------------- tensors

    @staticmethod
    def _attr(recv: Any, name: str) -> Any:
        if isinstance(recv, Tensor):
            if name == "shape":
                return recv.shape
            if name == "dtype":
                return DType(recv.dtype)
            if name == "ndim":
                return len(recv.shape)
        return UNKNOWN

    def _sub(self, base_e: Expr, key_e: Expr, d: int) -> Any:
        key = self.value(key_e, d + 1)
        if key is UNKNOWN:
            return UNKNOWN
        base_d = self._dict_display(base_e, d)
        if base_d is not None:
            if isinstance(key, str) and base_d.kwargs and key in base_d.kwargs:
                return self.value(base_d.kwargs[key], d + 1)
            return UNKNOWN
        base = self.value(base_e, d + 1)
        if isinstance(base, tuple) and isinstance(key, int) and not isinstance(key, bool):
            return base[key]
        return UNKNOWN

    def _dict_display(self, e: Expr, d: int) -> Expr | None:
        """The ``{...}``/``dict(...)`` display a name (or the expression itself) stands for, with string keys
        only (an int-keyed dict is not read)."""
        for _ in range(6):
            if e.kind == "name":
                defs = self.fn.defs().get(e.op) or (self.module.defs().get(e.op) if self.module else None)
                if not defs or len(defs) != 1 or defs[0].loops or e.op in self._mutated():
                    return None
                e = defs[0].value
                continue
            break
        if e.op == "dict" and (e.kind == "tuple" and not e.args or e.kind == "call" and not e.args):
            return e
        return None

    def _call(self, e: Expr, d: int) -> Any:
        v = self.value
        op = e.op
        args = e.args
        if op in ("triton.next_power_of_2", "next_power_of_2") and len(args) == 1:
            n = v(args[0], d + 1)
            return UNKNOWN if not isinstance(n, int) else 1 if n <= 1 else 1 << (n - 1).bit_length()
        if op in ("triton.cdiv", "cdiv") and len(args) == 2:
            a, b = v(args[0], d + 1), v(args[1], d + 1)
            return -(-a // b) if isinstance(a, int) and isinstance(b, int) and b else UNKNOWN
        if op in ("min", "max") and args and not e.kwargs:
            vals = [v(a, d + 1) for a in args]
            if len(vals) == 1 and isinstance(vals[0], tuple):
                vals = list(vals[0])
            if any(x is UNKNOWN or not _plain(x) for x in vals) or not vals:
                return UNKNOWN
            return min(vals) if op == "min" else max(vals)
        if op in ("int", "float", "bool", "abs", "len") and len(args) == 1:
            x = v(args[0], d + 1)
            if op == "len":
                return len(x) if isinstance(x, tuple) else x.shape[0] if isinstance(x, Tensor) and x.shape else UNKNOWN
            if x is UNKNOWN or not _plain(x):
                return UNKNOWN
            return {"int": int, "float": float, "bool": bool, "abs": abs}[op](x)
        if op in ("math.ceil", "math.floor", "math.log2", "math.sqrt", "math.prod") and len(args) == 1:
            x = v(args[0], d + 1)
            if op == "math.prod":
                return math.prod(x) if isinstance(x, tuple) and all(isinstance(i, int) for i in x) else UNKNOWN
            return getattr(math, op[5:])(x) if _plain(x) and x is not UNKNOWN else UNKNOWN
        if op in _SAME_TENSOR:
            src = e.recv if e.recv is not None else (args[0] if args else None)
            if src is None:
                return UNKNOWN
            t = v(src, d + 1)
            if isinstance(t, Tensor) and op.endswith("_like") and e.kw("dtype") is not None:
                dt = v(e.kwargs["dtype"], d + 1) if e.kwargs else UNKNOWN
                return Tensor(t.shape, dt.name) if isinstance(dt, DType) else UNKNOWN
            return t if isinstance(t, Tensor) else UNKNOWN
        if op == ".get" and e.recv is not None and args:
            disp = self._dict_display(e.recv, d)
            key = v(args[0], d + 1)
            if disp is None or key is UNKNOWN:
                return UNKNOWN
            if isinstance(key, str) and disp.kwargs and key in disp.kwargs:
                return v(disp.kwargs[key], d + 1)
            return UNKNOWN  # a key the display lacks may have been added since
        if e.recv is None:
            return UNKNOWN
        t = v(e.recv, d + 1)
        if not isinstance(t, Tensor):
            return UNKNOWN
        vals = [v(a, d + 1) for a in args]
        if op == ".size":
            if not vals:
                return t.shape
            return t.shape[vals[0]] if isinstance(vals[0], int) else UNKNOWN
        if op == ".numel" and not vals:
            return math.prod(t.shape)
        if op in (".dim", ".ndimension") and not vals:
            return len(t.shape)
        if op == ".scalar_type" and not vals:
            return DType(t.dtype)
        if op == ".element_size" and not vals:
            return DTYPE_BYTES.get(t.dtype, UNKNOWN)
        if op in _DTYPE_METHODS and not vals:
            return Tensor(t.shape, _DTYPE_METHODS[op])
        if op in (".view", ".reshape") and vals:
            dims = list(vals[0]) if len(vals) == 1 and isinstance(vals[0], tuple) else vals
            return _reshape(t, dims)
        if op == ".flatten" and not vals:
            return Tensor((math.prod(t.shape),), t.dtype)
        return UNKNOWN


def _dtype_in(a: DType, options: tuple[Any, ...]) -> Any:
    """Is dtype ``a`` one of ``options``: True, False, or UNKNOWN where a name is ambiguous (``torch.float8_e4m3fn``
    and ``float8_e5m2`` both read as ``fp8``, while a task names ``fp8_e4m3``)."""
    out: Any = False
    for o in options:
        if not isinstance(o, DType):
            return UNKNOWN
        if o.name == a.name:
            return True
        if "fp8" in (o.name, a.name) and o.name.startswith("fp8") and a.name.startswith("fp8"):
            out = UNKNOWN
    return out


MAX_BITS = 256
"""Integers beyond this many bits are no size a launch condition compares with: the operators give unknown
rather than compute them (a submission's ``(9 ** 63) ** 63 ** ...`` or ``"x" * (1 << 40)`` would otherwise hold the
grader for minutes or exhaust its memory)."""


def _bounded(op: Any, a: Any, b: Any) -> Any:
    """``op(a, b)`` for numbers of at most :data:`MAX_BITS` bits whose result stays within them; sequences only
    concatenated (``+``) within that many elements; anything else (and any arithmetic error) unknown."""
    if isinstance(a, (str, tuple)) or isinstance(b, (str, tuple)):
        if op is not _BINS["+"] or type(a) is not type(b) or len(a) + len(b) > MAX_BITS:
            return UNKNOWN
        return op(a, b)
    for x in (a, b):
        if isinstance(x, int) and x.bit_length() > MAX_BITS or isinstance(x, (DType, Fn)) or x is None:
            return UNKNOWN
    if op is _BINS["**"] and isinstance(a, int) and isinstance(b, int) and a.bit_length() * abs(b) > MAX_BITS:
        return UNKNOWN
    try:
        r = op(a, b)
    except (ArithmeticError, TypeError, ValueError):
        return UNKNOWN
    return UNKNOWN if isinstance(r, int) and r.bit_length() > MAX_BITS else r


def _plain(x: Any) -> bool:
    """A value the operators may compute with (not unknown, not a tensor, no unknown element)."""
    if isinstance(x, tuple):
        return all(_plain(i) for i in x)
    return isinstance(x, (int, float, str, bool, DType, Fn)) or x is None


def _index(val: Any, i: int) -> Any:
    if isinstance(val, tuple) and -len(val) <= i < len(val):
        return val[i]
    return UNKNOWN


def _reshape(t: Tensor, dims: list[Any]) -> Any:
    if any(not isinstance(x, int) for x in dims) or sum(1 for x in dims if x == -1) > 1:
        return UNKNOWN
    n = math.prod(t.shape)
    known = math.prod(x for x in dims if x != -1)
    if known <= 0 or n % known:
        return UNKNOWN
    return Tensor(tuple(n // known if x == -1 else x for x in dims), t.dtype)
