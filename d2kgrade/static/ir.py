"""The language-neutral facts that checks read: expressions, loops, assignments, calls, functions, launches.

Both front ends (:mod:`~d2kgrade.static.pyfacts` for Triton/Python, :mod:`~d2kgrade.static.cudafacts` for CUDA
C++) lower their syntax trees to these records, so a data-flow check such as "a running max rescales a running
sum" is written once and holds for both languages. Records are plain slotted dataclasses, not pydantic models:
a 200-line kernel yields thousands of them and grading must stay above 100 files per second.

Canonical call names: Triton calls are spelled ``tl.<name>`` whatever the import alias (``tl.math.exp2`` and
``triton.language.exp2`` are both ``tl.exp2``), libdevice calls ``libdevice.<name>``, host calls with their
dotted path (``torch.empty``, ``triton.next_power_of_2``), method calls ``.<name>`` with the receiver in
:attr:`Expr.recv`. In CUDA, reads of a pointer parameter (``x[i]``, ``*(x + i)``) become calls named ``load``
and writes through one (``y[i] = v``) become calls named ``store`` with ``(pointer, value)`` arguments.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

ExprKind = Literal["name", "const", "call", "bin", "unary", "cmp", "attr", "sub", "tuple", "ternary", "cast",
                   "other"]


@dataclass(slots=True, eq=False)
class Expr:
    """One expression node."""

    kind: str
    """One of :data:`ExprKind`."""
    op: str = ""
    """call: canonical callee; bin/unary/cmp: operator; name: identifier (dotted for module paths); const: the
    literal's text; attr: attribute name; cast: target dtype (``fp32``, ``bf16``...)."""
    args: tuple[Expr, ...] = ()
    """Sub-expressions: call arguments, operands, (value, index...) of a subscript, (cond, a, b) of a ternary."""
    kwargs: dict[str, Expr] | None = None
    """Keyword arguments of a call."""
    recv: Expr | None = None
    """Receiver of a method call or attribute access."""
    value: object = None
    """Python value of a constant (int, float, str, bool, None) where known."""
    line: int = 0
    """First line (1-based, in the graded file)."""
    end_line: int = 0
    """Last line."""
    _flat: tuple[Expr, ...] | None = field(default=None, repr=False)
    """Cache of :meth:`nodes` (expressions are not mutated after lowering)."""

    def nodes(self) -> tuple[Expr, ...]:
        """This node and every node below it, pre-order (receiver, then arguments, then keyword arguments),
        computed once: data-flow queries walk the same definitions many times, and iterating a tuple is ~4x
        cheaper than resuming a generator per node."""
        flat = self._flat
        if flat is None:
            out = []
            stack = [self]
            while stack:
                e = stack.pop()
                out.append(e)
                if e.kwargs:
                    stack.extend(e.kwargs.values())
                if e.args:
                    stack.extend(reversed(e.args))
                if e.recv is not None:
                    stack.append(e.recv)
            flat = self._flat = tuple(out)
        return flat

    def walk(self) -> Iterator[Expr]:
        """This node and every node below it, pre-order."""
        return iter(self.nodes())

    def names(self) -> set[str]:
        """Identifiers this expression reads."""
        return {e.op for e in self.nodes() if e.kind == "name"}

    def kw(self, name: str, pos: int | None = None) -> Expr | None:
        """A call's argument by keyword, or by position when ``pos`` is given and the keyword is absent."""
        if self.kwargs and name in self.kwargs:
            return self.kwargs[name]
        if pos is not None and pos < len(self.args):
            return self.args[pos]
        return None


@dataclass(slots=True, eq=False)
class Loop:
    """A ``for`` or ``while`` loop."""

    id: int
    """Unique within the file."""
    func: str
    """Key of the enclosing function."""
    kind: str
    """``range``, ``tl.range``, ``tl.static_range``, ``for`` (other iterables, C for), ``while``."""
    var: str | None
    """Loop variable (Python target or the C for's declared/assigned variable)."""
    start: Expr | None
    """Start of the range (C: the initialiser)."""
    stop: Expr | None
    """Stop of the range (C: the condition)."""
    step: Expr | None
    """Step (C: the increment expression)."""
    options: dict[str, Expr]
    """Keyword options of ``tl.range`` (``num_stages``, ``flatten``, ``warp_specialize``...)."""
    line: int
    """First line."""
    end_line: int
    """Last line."""
    parent: int | None
    """Id of the enclosing loop, if any."""
    unroll: bool = False
    """CUDA: preceded by ``#pragma unroll``; Triton: ``tl.static_range``."""
    guards: tuple[Expr, ...] = ()
    """Conditions of the enclosing ``if`` statements."""
    order: float = 0.0
    """Position in execution order (0: use ``line``); inlined helper code gets positions at its call site."""
    end_order: float = 0.0
    """Position of the loop's end in execution order (0: use ``end_line``)."""


@dataclass(slots=True, eq=False)
class Assign:
    """An assignment (``v = e``, ``v += e``, C declarations with an initialiser) to one or more names."""

    targets: tuple[str, ...]
    """Assigned names (a plain name target only; stores through pointers are :class:`Call` ``store``)."""
    value: Expr
    """Assigned value; for ``v op= e`` the equivalent ``v op e``."""
    line: int
    """First line."""
    end_line: int
    """Last line."""
    loops: tuple[int, ...]
    """Ids of the enclosing loops, outermost first."""
    guards: tuple[Expr, ...] = ()
    """Conditions of the enclosing ``if`` statements (negated ones wrapped in ``unary not``)."""
    index: int | None = None
    """For ``a, b = f(...)``: which element of the value this target takes."""
    aug: str = ""
    """Operator of an augmented assignment (``+``), else empty."""
    order: float = 0.0
    """Position in execution order (0: use ``line``)."""


@dataclass(slots=True, eq=False)
class Call:
    """A call site (including ones nested inside expressions)."""

    name: str
    """Canonical callee name (see the module docstring)."""
    expr: Expr
    """The call expression."""
    loops: tuple[int, ...]
    """Ids of the enclosing loops, outermost first."""
    guards: tuple[Expr, ...] = ()
    """Conditions of the enclosing ``if`` statements."""
    order: float = 0.0
    """Position in execution order (0: use ``line``)."""

    @property
    def line(self) -> int:
        return self.expr.line

    @property
    def end_line(self) -> int:
        return self.expr.end_line


def pos(x: Assign | Call | Loop) -> float:
    """Where a statement sits in execution order (its line, unless inlining placed it elsewhere)."""
    return x.order or float(x.line)


def end_pos(loop: Loop) -> float:
    """Where a loop ends in execution order."""
    return loop.end_order or float(loop.end_line)


@dataclass(slots=True, eq=False)
class Launch:
    """A kernel launch: ``k[grid](...)`` in Python, ``k<<<grid, block>>>(...)`` in CUDA."""

    kernel: str
    """Key of the launched function."""
    grid: Expr | None
    """The grid expression (tuple, lambda body, name)."""
    args: tuple[Expr, ...]
    """Positional arguments."""
    kwargs: dict[str, Expr]
    """Keyword arguments (constexprs, ``num_warps``, ``num_stages``...)."""
    caller: str
    """Key of the launching function."""
    line: int
    """Line of the launch."""
    end_line: int
    """Last line of the launch."""
    block: Expr | None = None
    """CUDA: the block-size expression."""
    template: str = ""
    """CUDA: the template arguments of the launched kernel as written (``128, 256, 64``)."""
    target: Expr | None = None
    """Python: the launched expression (``k`` of ``k[grid](...)``; ``KERNELS[mode]``), for resolving it."""


LAUNCH_ALIAS = "launch@fn"
"""The key and call name of a function the source itself names ``launch`` (a common name for a host helper):
``launch`` is the name of kernel-launch calls, so the function is renamed to keep the two apart."""

COMPUTED = "computed"
"""An autotune config field set from a variable (``num_stages=s`` in a generating loop): present, value unknown."""


@dataclass(slots=True, eq=False)
class AutotuneConfig:
    """One ``triton.Config``."""

    kwargs: dict[str, object]
    """Meta-parameters (block sizes...), with Python values where they are literals, else None."""
    num_warps: object = None
    """``num_warps`` literal, :data:`COMPUTED` when set from a variable, None when absent."""
    num_stages: object = None
    """``num_stages`` literal, :data:`COMPUTED` when set from a variable, None when absent."""
    line: int = 0
    """Line of the config."""


@dataclass(slots=True, eq=False)
class Autotune:
    """A ``@triton.autotune`` decorator."""

    configs: list[AutotuneConfig]
    """The configs found (list literals, comprehensions over literal lists, or module-level lists)."""
    key: list[str]
    """The ``key=[...]`` argument names."""
    generated: bool
    """True when configs come from a comprehension or function (their number is then a lower bound)."""
    line: int
    """Line of the decorator."""
    end_line: int
    """Last line of the decorator."""


@dataclass(slots=True, eq=False)
class Function:
    """A function of either language, with everything the checks read from its body."""

    key: str
    """Unique key: the Python qualified name, or ``cu:<name>`` for CUDA."""
    name: str
    """Plain name."""
    lang: Literal["py", "cuda"]
    """Front end that produced it."""
    kind: Literal["jit", "host", "global", "device", "cpp"]
    """Triton ``@jit`` function, Python host function, CUDA ``__global__``/``__device__``/host C++ function."""
    params: list[str]
    """Parameter names, in order."""
    line: int
    """First line (decorators included)."""
    end_line: int
    """Last line."""
    constexprs: set[str] = field(default_factory=set)
    """Triton ``tl.constexpr`` parameters; CUDA template parameters."""
    pointer_params: set[str] = field(default_factory=set)
    """CUDA parameters declared as pointers."""
    vector_params: set[str] = field(default_factory=set)
    """CUDA pointer parameters and locals whose element type is a vector type (``const uint4*``, or an alias of one
    such as ``Vec<T>``, ``vec_t``)."""
    defaults: dict[str, Expr] = field(default_factory=dict)
    """Parameter defaults."""
    ref_params: set[str] = field(default_factory=set)
    """CUDA parameters passed by reference (``float& m``): writes to them are writes to the caller's variable."""
    inlined: bool = False
    """A kernel whose device helper calls have been inlined (see :mod:`d2kgrade.static.inline`)."""
    assigns: list[Assign] = field(default_factory=list)
    """Assignments, in source order."""
    calls: list[Call] = field(default_factory=list)
    """Call sites, in source order."""
    loops: list[Loop] = field(default_factory=list)
    """Loops, in source order."""
    returns: list[Expr] = field(default_factory=list)
    """Returned expressions."""
    return_guards: list[tuple[Expr, ...]] = field(default_factory=list)
    """Python: the ``if`` conditions each return of :attr:`returns` sits under (same order)."""
    launches: list[Launch] = field(default_factory=list)
    """Kernel launches made by this (host) function, in source order."""
    autotune: Autotune | None = None
    """The autotune decorator, if any."""
    heuristics: dict[str, Expr] = field(default_factory=dict)
    """``@triton.heuristics({...})`` values by meta-parameter."""
    do_not_specialize: list[str] = field(default_factory=list)
    """``@triton.jit(do_not_specialize=[...])`` names."""
    launch_bounds: Expr | None = None
    """CUDA ``__launch_bounds__`` first argument."""
    source: int = 0
    """Index of the source it comes from (0 = the graded file, k = the k-th ``load_inline`` string)."""
    vararg: str = ""
    """Python: the ``*args`` parameter's name, if any."""
    kwarg: str = ""
    """Python: the ``**kwargs`` parameter's name, if any."""
    _defs: dict[str, list[Assign]] | None = None

    def defs(self) -> dict[str, list[Assign]]:
        """Assignments by target name (computed once)."""
        if self._defs is None:
            d: dict[str, list[Assign]] = {}
            for a in self.assigns:
                for t in a.targets:
                    d.setdefault(t, []).append(a)
            self._defs = d
        return self._defs

    def loop(self, loop_id: int) -> Loop | None:
        """A loop of this function by id."""
        for lp in self.loops:
            if lp.id == loop_id:
                return lp
        return None

    @property
    def is_device(self) -> bool:
        """Code that runs on the GPU (Triton jit, CUDA global/device)."""
        return self.kind in ("jit", "global", "device")


@dataclass(slots=True, eq=False)
class SharedBuffer:
    """A CUDA ``__shared__`` declaration."""

    name: str
    """Variable name."""
    type: str
    """Element type as written."""
    dims: list[str]
    """Array extents as written (empty string for ``extern __shared__ T x[]``)."""
    func: str
    """Key of the enclosing function, or '' at file scope."""
    line: int
    """Line."""


@dataclass(slots=True, eq=False)
class Token:
    """A CUDA construct recognised by kind: pragma, include, asm, vector type use, cast, cooperative group."""

    kind: str
    """``pragma``, ``include``, ``asm``, ``type``, ``reinterpret``, ``cg``, ``cutlass``."""
    text: str
    """Its text (pragma/asm body, include path, type name)."""
    func: str
    """Key of the enclosing function, or '' at file scope."""
    line: int
    """First line."""
    end_line: int
    """Last line."""


@dataclass(slots=True, eq=False)
class InlineSource:
    """A CUDA/C++ source string handed to ``load_inline``."""

    text: str
    """The source."""
    line: int
    """Line of the graded file where the string's text starts."""
    kind: str
    """``cuda_sources`` or ``cpp_sources``."""
    functions: list[str] = field(default_factory=list)
    """Names listed in ``functions=[...]`` of its ``load_inline`` call."""
