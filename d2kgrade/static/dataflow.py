"""Data-flow queries over :class:`~d2kgrade.static.facts.Facts`, shared by the checks of both languages.

The analysis is flow-insensitive inside a function (every assignment of a name is a possible definition) and
follows values across functions one way: into a helper's ``return`` with its parameters bound to the call's
arguments, and from a kernel's parameter to the arguments of its launches (or of calls to a helper). That is
enough to see that ``l_i = l_i * alpha`` with ``alpha = tl.exp2(m_i - m_new)`` rescales a running sum, or that
``BLOCK_N`` reaches the kernel from ``triton.next_power_of_2(N)`` on the host.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Assign, Call, Expr, Function, Launch, Loop, pos

Env = dict[str, tuple[Expr, Function, Any]] | None
Site = tuple[float, tuple[int, ...], tuple[Expr, ...]]
"""Where a value is read: (position in execution order, enclosing loop ids, enclosing if-conditions)."""


@dataclass
class Taint:
    """Tainted definitions (by ``id`` of their :class:`Assign`) and tainted names that have no definition in the
    function (parameters bound to tainted arguments)."""

    defs: set[int] = field(default_factory=set)
    names: set[str] = field(default_factory=set)

    def has(self, fn: Function, name: str) -> bool:
        """Is some definition of ``name`` tainted (anywhere)?"""
        return name in self.names or any(id(d) in self.defs for d in fn.defs().get(name, []))


def site_of(x: Assign | Call) -> Site:
    """The read site of an assignment's value or a call's arguments."""
    return (pos(x), x.loops, x.guards)

REDUCTIONS = {"tl.sum", "tl.max", "tl.min", "tl.reduce", "tl.argmax", "tl.argmin", "tl.xor_sum"}
LOADS = {"tl.load", "load", "__ldg", "__ldcs", "__ldcg", "__ldca", "__ldlu", "__ldcv", "tl.atomic_add"}
STORES = {"tl.store", "store", "__stcs", "__stcg", "__stwt", "__stwb", "__stcv"}
EXPS = {"tl.exp", "tl.exp2", "libdevice.exp", "libdevice.exp2", "libdevice.fast_expf", "expf", "__expf", "exp",
        "exp2f", "exp2", "hexp", "h2exp", "hexp2", "h2exp2", "__exp2f", "fast_exp", "fast_exp2"}
MAXES = {"tl.maximum", "tl.max", "fmaxf", "max", "fmax", "std::max", "__hmax", "__hmax2", "maximum", "tl.where"}
PROGRAM_IDS = {"tl.program_id", "blockIdx.x", "blockIdx.y", "blockIdx.z"}
NUM_PROGRAMS = {"tl.num_programs", "gridDim.x", "gridDim.y", "gridDim.z"}
DESCRIPTOR_MAKERS = {"tl.make_tensor_descriptor", "tl._experimental_make_tensor_descriptor",
                     "tl.experimental_make_tensor_descriptor"}
POINTER_PASSTHROUGH = {"tl.multiple_of", "tl.max_contiguous", "tl.max_constancy", "tl.advance", "tl.make_block_ptr",
                       "reinterpret_cast", "tl.make_tensor_descriptor", "tl._experimental_make_tensor_descriptor",
                       "__ldg", "__ldcs", "__ldcg", "__ldlu", "__ldca", "__ldcv", "tl.pointer_type"}
_WALK_LIMIT = 4000
_INT_OPS = {"*", "//", "%", "<<", ">>"}
_ORDER_CMPS = {"<", "<=", ">", ">="}
_INT_CALLS = {"tl.arange", "range", "tl.range", "tl.static_range", "tl.cdiv", "triton.cdiv"}


def matches(name: str, patterns: str | Iterable[str]) -> bool:
    """``name`` equals a pattern, ends with ``::pattern``, or matches ``prefix*``."""
    key = patterns if isinstance(patterns, (str, tuple)) else tuple(patterns)
    split = _SPLIT.get(key)
    if split is None:  # the patterns as a set of names and a tuple of prefixes, once per pattern list
        pats = (key,) if isinstance(key, str) else key
        if len(_SPLIT) > 4096:
            _SPLIT.clear()
        split = _SPLIT[key] = (frozenset(pats), tuple(p[:-1] for p in pats if p.endswith("*")))
    if "::" not in name:  # (a prefix* pattern that equals the name also matches as a prefix)
        return name in split[0] or (split[1] != () and name.startswith(split[1]))
    return _matches_scoped(name, key)


_SPLIT: dict[str | tuple[str, ...], tuple[frozenset[str], tuple[str, ...]]] = {}


def _matches_scoped(name: str, patterns: str | tuple[str, ...]) -> bool:
    scoped = "::" in name  # only then can a ``::pattern`` suffix match (saves building that string: 1 in 20)
    for p in ((patterns,) if isinstance(patterns, str) else patterns):
        if p.endswith("*"):
            if name.startswith(p[:-1]) or (scoped and ("::" + p[:-1]) in name):
                return True
        elif name == p or (scoped and name.endswith("::" + p)):
            return True
    return False


class Flow:
    """Data-flow queries over one file (create with :func:`flow`, which caches one per file)."""

    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self.funcs = facts.functions
        self._module = facts.functions.get("<module>")
        self._reducers: set[str] | None = None
        self._carried: dict[str, dict[int, dict[str, list[Assign]]]] = {}
        self._call_sites: dict[str, list[tuple[Expr, Function]]] | None = None
        self._memory: dict[str, list[tuple[str, Call, set[str]]]] = {}
        self._reads_cache: dict[int, tuple[Expr, frozenset[str], frozenset[int]]] = {}
        self._index: dict[str, tuple[Function, dict[str, list[Assign]]]] = {}
        self._taints: dict[tuple, Taint] = {}
        self._pid: dict[tuple[int, int], tuple[Expr, bool]] = {}
        self._refs: dict[tuple, tuple[Expr, bool]] = {}
        self._ints: dict[str, tuple[Function, set[str]]] = {}
        self._callees: dict[tuple[str, str, str], str] = {}
        self._callees_n = len(self.funcs)
        self._flat: dict[tuple[int, int], tuple[tuple[Expr, ...], Function | None, tuple[list[Expr], bool]]] = {}
        self._binds: dict[tuple, tuple] = {}
        self._folds: dict[tuple[int, int], tuple[Expr, Function, Any]] = {}
        self._sources: dict[tuple[int, str], tuple[Function, list[tuple[Expr, Function]]]] = {}
        self._launches_of: dict[str, list[Launch]] = {}
        self._outer_defs: dict[tuple[str, int], tuple[Function, list[Assign] | None]] = {}

    # ------------------------------------------------------------------------------------------ resolution

    def callee(self, name: str, fn: Function) -> Function | None:
        """The function a call named ``name`` in ``fn`` runs, if it is defined in the file."""
        ckey = (name, fn.key, fn.lang)
        if len(self.funcs) != self._callees_n:  # functions added or removed since: resolve afresh
            self._callees.clear()
            self._callees_n = len(self.funcs)
        key = self._callees.get(ckey)
        if key is None:  # the key the name resolves to (the lookups below), memoised per (name, scope)
            key = self._callees[ckey] = self._callee_key(name, fn)
        return self.funcs.get(key)

    def _callee_key(self, name: str, fn: Function) -> str:
        if fn.lang == "cuda":
            return "cu:" + name.split("::")[-1]
        parts = fn.key.split(".")
        while parts:
            key = ".".join(parts) + "." + name
            if key in self.funcs:
                return key
            parts.pop()
        return name

    def defs(self, name: str, fn: Function) -> list[Assign]:
        """Assignments of ``name`` visible in ``fn`` (its own, else module-level ones)."""
        d = fn.defs().get(name)
        if d:
            return d
        if fn.lang != "py" or name in fn.params:
            return []
        hit = self._outer_defs.get((name, id(fn)))  # cached: module constants and closures are read often
        if hit is None or hit[0] is not fn:
            hit = self._outer_defs[(name, id(fn))] = (fn, self._outer(name, fn) or None)
        return hit[1] if hit[1] is not None else []

    def _outer(self, name: str, fn: Function) -> list[Assign]:
        parts = fn.key.split(".")[:-1]
        while parts:  # closures: a nested function reads its enclosing function's variables
            outer = self.funcs.get(".".join(parts)) or self.funcs.get(".".join(parts) + ".<module>")
            if outer is not None:
                d = outer.defs().get(name)
                if d:
                    return d
                if name in outer.params:
                    return []
            parts.pop()
        if self._module is not None and fn is not self._module:
            return self._module.defs().get(name, [])
        return []

    def root(self, e: Expr, fn: Function) -> Expr:
        """Follow plain copies (``BLOCK@helper1 = BLOCK``, made by inlining) back to the original name."""
        for _ in range(6):
            if e.kind != "name":
                return e
            defs = fn.defs().get(e.op)
            if not defs or len(defs) != 1 or defs[0].value.kind != "name":
                return e
            e = defs[0].value
        return e

    def is_constexpr(self, e: Expr, fn: Function) -> bool:
        """A compile-time value: a ``tl.constexpr`` parameter (template parameter), a constant, or a copy of one."""
        r = self.root(e, fn)
        if r.kind == "const":
            return True
        return r.kind == "name" and (r.op in fn.constexprs or r.op in self.facts.consts)

    def call_sites(self, fn: Function) -> list[tuple[Expr, Function]]:
        """Where ``fn`` is called or launched from reachable code: (call expression, caller)."""
        if self._call_sites is None:
            sites: dict[str, list[tuple[Expr, Function]]] = {}
            for caller in self.funcs.values():
                if caller.key not in self.facts.reachable:
                    continue
                for c in caller.calls:
                    if c.name == "launch":
                        continue
                    callee = self.callee(c.name, caller) if c.expr.recv is None or caller.lang == "cuda" else None
                    if callee is None and caller.lang == "py" and c.name.startswith("."):
                        # mod.f(...) on a load_inline module: the C++ host function f of its sources
                        callee = self.funcs.get("cu:" + c.name[1:])
                        if callee is not None and callee.kind != "cpp":
                            callee = None
                    if callee is not None and callee is not caller:
                        sites.setdefault(callee.key, []).append((c.expr, caller))
            self._call_sites = sites
        return self._call_sites.get(fn.key, [])

    def producers(self, fn: Function, param: str) -> list[tuple[Function, Call]]:
        """Stores by kernels launched before ``fn`` into the buffer ``fn`` receives as ``param`` (the same host
        variable passed to both launches)."""
        out: list[tuple[Function, Call]] = []
        launches = [la for la in self.facts.launches if la.kernel in self.funcs]
        for i, la in enumerate(launches):
            if la.kernel != fn.key:
                continue
            arg = self.launch_arg(la, fn, param)
            caller = self.funcs.get(la.caller)
            if arg is None or arg.kind != "name":
                continue
            if caller is not None:  # helpers' parameters bound to one host tensor: compare the tensor itself
                arg = self.root(arg, caller)
            for prev in launches[:i]:
                k = self.funcs[prev.kernel]
                if k is fn:
                    continue
                for kind, c, bases in self.memory_ops(k):
                    if kind != "store":
                        continue
                    for b in bases:
                        e = self.launch_arg(prev, k, b)
                        pc = self.funcs.get(prev.caller)
                        if e is not None and e.kind == "name" and pc is not None:
                            e = self.root(e, pc)
                        if e is not None and e.kind == "name" and e.op == arg.op:
                            out.append((k, c))
        return out

    def launches_of(self, fn: Function) -> list[Launch]:
        """Reachable launches of kernel ``fn``."""
        hit = self._launches_of.get(fn.key)
        if hit is None:
            hit = self._launches_of[fn.key] = [la for la in self.facts.launches if la.kernel == fn.key]
        return list(hit)

    def launch_arg(self, la: Launch, kernel: Function, param: str) -> Expr | None:
        """The expression a launch passes for ``param`` (positional or keyword, through ``*args``/``**meta``)."""
        caller = self.funcs.get(la.caller)
        return self.bind_arg(la.args, la.kwargs, kernel, param, caller)

    def _unpack(self, e: Expr, caller: Function | None, depth: int = 0) -> Expr | None:
        """The tuple/list or dict literal (``dict(...)`` call) a starred argument name stands for (with several
        definitions, a literal one: branches build sequences of one length)."""
        if depth > 4:
            return None
        if e.kind == "tuple" or (e.kind == "call" and e.op == "dict"):
            return e
        if e.kind == "other" and e.op == "comprehension" and e.args:
            # [t.contiguous() for t in (u, delta, ...)]: method calls on the loop variable (views) of a literal
            seqs = [x for x in e.args if x.kind == "tuple"]
            body = e.args[0]
            while body.kind == "call" and body.recv is not None and not body.args:
                body = body.recv
            return seqs[-1] if seqs and body.kind == "name" else None
        if e.kind == "name" and caller is not None:
            for d in self.defs(e.op, caller):
                got = self._unpack(d.value, caller, depth + 1)
                if got is not None:
                    return got
        return None

    def _flatten(self, args: tuple[Expr, ...], caller: Function | None, depth: int = 0) -> tuple[list[Expr], bool]:
        """Positional arguments with ``*seq`` spliced in; False when a sequence's length is unknown."""
        if depth:
            return self._flatten_at(args, caller, depth)
        hit = self._flat.get((id(args), id(caller)))  # bind_arg asks once per parameter: splice each tuple once
        if hit is not None and hit[0] is args and hit[1] is caller:
            return hit[2]
        out = self._flatten_at(args, caller, 0)
        self._flat[(id(args), id(caller))] = (args, caller, out)
        return out

    def _flatten_at(self, args: tuple[Expr, ...], caller: Function | None, depth: int) -> tuple[list[Expr], bool]:
        flat: list[Expr] = []
        for a in args:
            if a.kind == "other" and a.op == "*" and a.args:
                t = self._unpack(a.args[0], caller)
                if t is None or t.kind != "tuple" or t.op == "dict" or depth > 3:
                    return flat, False
                inner, ok = self._flatten(t.args, caller, depth + 1)
                flat.extend(inner)
                if not ok:
                    return flat, False
            else:
                flat.append(a)
        return flat, True

    def bind_arg(self, args: tuple[Expr, ...], kwargs: dict[str, Expr] | None, callee: Function, param: str,
                 caller: Function | None) -> Expr | None:
        """The argument a call passes for ``param`` of ``callee`` (cached: checks ask for each launch's
        parameters again and again)."""
        key = (id(args), id(kwargs), id(callee), param, id(caller))
        hit = self._binds.get(key)
        if hit is not None and hit[0] is args and hit[1] is kwargs and hit[2] is callee and hit[3] is caller:
            return hit[4]
        out = self._bind_arg(args, kwargs, callee, param, caller)
        self._binds[key] = (args, kwargs, callee, caller, out)
        return out

    def _bind_arg(self, args: tuple[Expr, ...], kwargs: dict[str, Expr] | None, callee: Function, param: str,
                  caller: Function | None) -> Expr | None:
        kwargs = kwargs or {}
        if param in kwargs:
            return kwargs[param]
        for k, v in kwargs.items():
            if k.startswith("**"):
                d = self._unpack(v, caller)
                if d is not None and d.kwargs and param in d.kwargs:
                    return d.kwargs[param]
        try:
            i = callee.params.index(param)
        except ValueError:
            return None
        flat, _ = self._flatten(args, caller)  # positions after an unknown *args are unknown
        return flat[i] if i < len(flat) else None

    def param_sources(self, fn: Function, param: str) -> list[tuple[Expr, Function]]:
        """Expressions that a parameter of ``fn`` receives at its launches and call sites."""
        hit = self._sources.get((id(fn), param))  # cached (walks with ``params`` ask for each name they meet)
        if hit is None or hit[0] is not fn:
            hit = self._sources[(id(fn), param)] = (fn, self._param_sources(fn, param))
        return list(hit[1])

    def _param_sources(self, fn: Function, param: str) -> list[tuple[Expr, Function]]:
        out: list[tuple[Expr, Function]] = []
        for la in self.launches_of(fn):
            e = self.launch_arg(la, fn, param)
            caller = self.funcs.get(la.caller)
            if e is not None and caller is not None:
                out.append((e, caller))
        if param in fn.params:
            for call, caller in self.call_sites(fn):
                e = self.bind_arg(call.args, call.kwargs, fn, param, caller)
                if e is not None:
                    out.append((e, caller))
        return out

    # ------------------------------------------------------------------------------------------ walking

    def walk(self, e: Expr, fn: Function, env: Env = None, *, within: Loop | None = None, depth: int = 6,
             params: bool = False, calls: bool = True) -> Iterator[tuple[Expr, Function, Env]]:
        """Every node of ``e`` and, through names, of their definitions (inside loop ``within`` only, when given),
        through calls of local functions into their returns, and with ``params`` from a kernel's parameters to
        what its launches pass."""
        stack: list[tuple[Expr, Function, Env, int]] = [(e, fn, env, 0)]
        seen: set[tuple[int, int]] = set()
        budget = _WALK_LIMIT
        while stack and budget > 0:
            x, f, en, d = stack.pop()
            if d >= depth:  # nothing is followed below this depth: just the expression's own nodes
                for node in x.nodes():
                    budget -= 1
                    yield node, f, en
                continue
            for node in x.nodes():
                budget -= 1
                yield node, f, en
                kind = node.kind
                if kind == "name":
                    op = node.op
                    if en and op in en:
                        ex, ef, eenv = en[op]
                        stack.append((ex, ef, eenv, d + 1))
                    fdefs = f._defs if f._defs is not None else f.defs()
                    defs = fdefs.get(op) or self.defs(op, f)  # (own definitions: no call)
                    if within is not None and f.key == within.func:
                        defs = [a for a in defs if within.id in a.loops]
                    for a in defs:
                        k = (id(a), id(en))
                        if k in seen:
                            continue
                        seen.add(k)
                        # def_value, inlined for the usual case (not an element of a tuple-returning call)
                        stack.append((a.value, f, en, d + 1) if a.index is None else self.def_value(a, f, en, d))
                    if defs:
                        continue
                    if calls and op not in f.params:
                        local = self.callee(op, f)  # a function passed by name (a grid callable)
                        if local is not None and local is not f and local.is_device == f.is_device:
                            k = (id(local), 1)
                            if k not in seen:
                                seen.add(k)
                                for r in local.returns:
                                    stack.append((r, local, None, d + 1))
                    if params and op in f.params and within is None:
                        for src, caller in self.param_sources(f, node.op):
                            k = (id(src), 0)
                            if k not in seen:
                                seen.add(k)
                                stack.append((src, caller, None, d + 1))
                elif calls and kind == "call" and node.recv is None:
                    callee = self.callee(node.op, f)
                    if callee is not None and callee is not f and callee.returns and callee.is_device == f.is_device:
                        new_env = self._bind(callee, node, f, en)
                        for r in callee.returns:
                            stack.append((r, callee, new_env, d + 1))

    def def_value(self, a: Assign, f: Function, en: Env, d: int) -> tuple[Expr, Function, Env, int]:
        v = a.value
        if a.index is not None and v.kind == "call" and v.recv is None:
            callee = self.callee(v.op, f)
            if callee is not None and callee.returns:
                r = callee.returns[-1]
                if r.kind == "tuple" and a.index < len(r.args):
                    return r.args[a.index], callee, self._bind(callee, v, f, en), d + 1
        return v, f, en, d + 1

    def _bind(self, callee: Function, call: Expr, caller: Function, env: Env) -> dict[str, tuple[Expr, Function, Any]]:
        out: dict[str, tuple[Expr, Function, Any]] = {}
        for p in callee.params:
            a = self.bind_arg(call.args, call.kwargs, callee, p, caller)
            if a is not None:
                out[p] = (a, caller, env)
        return out

    def refs(self, e: Expr, fn: Function, name: str, owner: Function | None = None, env: Env = None, *,
             within: Loop | None = None) -> bool:
        """Does ``e`` (expanded) read variable ``name`` of function ``owner`` (default ``fn``)?"""
        owner = owner or fn
        key = None
        if env is None:
            key = (id(e), id(fn), name, id(owner), within.id if within is not None else None)
            hit = self._refs.get(key)
            if hit is not None and hit[0] is e:
                return hit[1]
        out = False
        for node, f, _ in self.walk(e, fn, env, within=within):
            if node.kind == "name" and node.op == name and f is owner:
                out = True
                break
        if key is not None:
            self._refs[key] = (e, out)
        return out

    def calls_in(self, e: Expr, fn: Function, names: Iterable[str], env: Env = None, *,
                 within: Loop | None = None, params: bool = False) -> list[tuple[Expr, Function, Env]]:
        """Calls named ``names`` reached from ``e``."""
        names = set(names)
        return [(n, f, en) for n, f, en in self.walk(e, fn, env, within=within, params=params)
                if n.kind == "call" and (n.op in names or matches(n.op, names))]

    # ------------------------------------------------------------------------------------------ constants

    def fold(self, e: Expr, fn: Function, env: Env = None, depth: int = 0) -> Any:
        """Numeric value of ``e`` when it is a compile-time constant (literals, constants, + - * / **), else None."""
        if depth or env is not None:
            return self._fold(e, fn, env, depth)
        hit = self._folds.get((id(e), id(fn)))  # cached: checks fold the same sizes and bounds again and again
        if hit is not None and hit[0] is e and hit[1] is fn:
            return hit[2]
        out = self._fold(e, fn, None, 0)
        self._folds[(id(e), id(fn))] = (e, fn, out)
        return out

    def _fold(self, e: Expr, fn: Function, env: Env, depth: int) -> Any:
        if depth > 8:
            return None
        k = e.kind
        if k == "const":
            return e.value if isinstance(e.value, (int, float)) and not isinstance(e.value, bool) else None
        if k == "name":
            if env and e.op in env:
                ex, ef, eenv = env[e.op]
                return self.fold(ex, ef, eenv, depth + 1)
            if e.op in self.facts.consts and isinstance(self.facts.consts[e.op], (int, float)):
                return self.facts.consts[e.op]
            if e.op in ("math.e", "tl.e"):
                return math.e
            defs = self.defs(e.op, fn)
            if len(defs) == 1 and not defs[0].loops:
                return self.fold(defs[0].value, fn, env, depth + 1)
            return None
        if k == "unary" and e.args:
            v = self.fold(e.args[0], fn, env, depth + 1)
            return -v if v is not None and e.op == "-" else v if e.op == "+" else None
        if k == "cast" and e.args:
            return self.fold(e.args[0], fn, env, depth + 1)
        if k == "bin" and len(e.args) == 2:
            a, b = self.fold(e.args[0], fn, env, depth + 1), self.fold(e.args[1], fn, env, depth + 1)
            if a is None or b is None:
                return None
            op = e.op  # an if-chain, not a dict of lambdas built per node (fold runs on every bound and size)
            try:
                if op == "+":
                    return a + b
                if op == "-":
                    return a - b
                if op == "*":
                    return a * b
                if op == "/":
                    return a / b
                if op == "//":
                    return a // b
                if op == "**":
                    return a ** b if abs(b) < 64 else None
                if op == "<<":
                    return a << b if isinstance(a, int) and isinstance(b, int) and 0 <= b < 64 else None
            except (ArithmeticError, TypeError, ValueError):
                return None
            return None
        if k == "call":
            if e.op in ("tl.constexpr", "float", "int") and e.args:
                return self.fold(e.args[0], fn, env, depth + 1)
            fname = e.op.rsplit(".", 1)[-1]
            if e.op.split(".")[0] in ("math", "tl", "np", "numpy") and fname in ("log", "log2", "exp", "sqrt"):
                args = [self.fold(a, fn, env, depth + 1) for a in e.args]
                if args and all(a is not None for a in args):
                    try:
                        return getattr(math, fname)(*args)
                    except (ValueError, TypeError, ArithmeticError):
                        return None
            if e.op in ("logf", "log2f", "expf", "sqrtf") and e.args:
                v = self.fold(e.args[0], fn, env, depth + 1)
                if v is not None:
                    try:
                        return getattr(math, e.op[:-1])(v)
                    except (ValueError, ArithmeticError):
                        return None
        return None

    # ------------------------------------------------------------------------------------------ derived facts

    def reducers(self) -> set[str]:
        """Device functions that perform a reduction (warp shuffles, ``tl.sum``...), transitively."""
        if self._reducers is None:
            red: set[str] = set()
            changed = True
            while changed:
                changed = False
                for f in self.funcs.values():
                    if f.key in red or not f.is_device:
                        continue
                    for c in f.calls:
                        if self._is_reduction_name(c.name) or (self.callee(c.name, f) is not None
                                                               and self.callee(c.name, f).key in red):  # type: ignore
                            red.add(f.key)
                            changed = True
                            break
            self._reducers = red
        return self._reducers

    @staticmethod
    def _is_reduction_name(name: str) -> bool:
        return (name in REDUCTIONS or name.startswith("__shfl") or name.startswith("__reduce_")
                or matches(name, ("cg::reduce", "cooperative_groups::reduce", "BlockReduce*", ".Sum", ".Reduce")))

    def is_reduction(self, call: Expr, fn: Function) -> bool:
        """A reduction across elements or threads: ``tl.sum``..., warp shuffles, a helper that reduces."""
        if call.kind != "call":
            return False
        if call.op in REDUCTIONS or self._is_reduction_name(call.op):
            return True
        if call.op.startswith(("tl.", ".", "libdevice.")):
            return False
        callee = self.callee(call.op, fn) if call.recv is None else None
        return callee is not None and callee.key in self.reducers()

    @staticmethod
    def reduction_operand(call: Expr) -> Expr | None:
        """The reduced value of a reduction call (``__shfl_xor_sync(mask, v, lane)`` and ``cg::reduce(g, v, op)``
        take it second)."""
        i = 1 if call.op.startswith("__shfl") or call.op.endswith("::reduce") else 0
        return call.args[i] if i < len(call.args) else None

    def carried(self, fn: Function) -> dict[int, dict[str, list[Assign]]]:
        """Loop-carried variables: loop id -> name -> in-loop assignments that read the name's previous value.

        A variable is carried by a loop when it is defined before the loop (or is a parameter) and reassigned
        inside it from an expression that reads it, directly or through values computed in the same loop.
        """
        if fn.key in self._carried:
            return self._carried[fn.key]
        out: dict[int, dict[str, list[Assign]]] = {}
        defs = fn.defs()
        for loop in fn.loops:
            inside = [a for a in fn.assigns if loop.id in a.loops]
            for a in inside:
                for v in a.targets:
                    if v == loop.var:
                        continue
                    before = v in fn.params or any(loop.id not in b.loops and pos(b) < pos(loop)
                                                   for b in defs.get(v, []))
                    if before and self.refs(a.value, fn, v, within=loop):
                        out.setdefault(loop.id, {}).setdefault(v, []).append(a)
        self._carried[fn.key] = out
        return out

    def reduction_derived(self, e: Expr, fn: Function, env: Env = None) -> Expr | None:
        """The reduction (call, or carried accumulator) ``e``'s value comes from, if any."""
        for node, f, en in self.walk(e, fn, env):
            if node.kind == "call" and self.is_reduction(node, f):
                return node
            if node.kind == "name" and f.loops:
                for by_var in self.carried(f).values():
                    ups = by_var.get(node.op)
                    if ups and any(u.aug == "+" or (u.value.kind == "bin" and u.value.op == "+") for u in ups):
                        return node
        return None

    @staticmethod
    def reaches(d: Assign, site: Site, others: list[Assign]) -> bool:
        """May definition ``d`` reach a use at ``site``? Forward when ``d`` comes first and no other definition
        in between certainly overwrites it (one in the use's own loop nest and branch); backwards only around a
        loop that holds both."""
        line, loops, guards = site
        if pos(d) < line:
            for k in others:
                if k is d or not (pos(d) < pos(k) < line):
                    continue
                if loops[:len(k.loops)] == k.loops and all(any(g is h for h in guards) for g in k.guards):
                    return False
            return True
        return bool(set(d.loops) & set(loops))

    def name_tainted(self, fn: Function, name: str, taint: Taint, site: Site | None) -> bool:
        """Is variable ``name`` tainted where it is read (``site``)?"""
        if name in taint.names:
            return True
        ds = fn.defs().get(name)
        if not ds:
            return False
        for d in ds:
            if id(d) in taint.defs and (site is None or self.reaches(d, site, ds)):
                return True
        return False

    def _reads(self, e: Expr, fn: Function) -> tuple[frozenset[str], frozenset[int]]:
        """Names ``e`` reads and ids of its nodes, not looking inside reductions (cached per expression)."""
        key = id(e)
        hit = self._reads_cache.get(key)
        if hit is not None and hit[0] is e:
            return hit[1], hit[2]
        names: set[str] = set()
        nodes: set[int] = set()
        stack = [e]
        while stack:
            x = stack.pop()
            nodes.add(id(x))
            if x.kind == "name":
                names.add(x.op)
            if x.kind == "call" and self.is_reduction(x, fn):
                continue
            if x.kwargs:
                stack.extend(x.kwargs.values())
            stack.extend(x.args)
            if x.recv is not None:
                stack.append(x.recv)
        out = (frozenset(names), frozenset(nodes))
        self._reads_cache[key] = (e, *out)
        return out

    def reads_through(self, e: Expr, fn: Function, taint: Taint, seeds: set[int], site: Site | None = None) -> bool:
        """Does ``e`` (read at ``site``) read a tainted value or contain a seed node, not looking inside
        reductions?"""
        names, nodes = self._reads(e, fn)
        if seeds and not nodes.isdisjoint(seeds):
            return True
        return any(self.name_tainted(fn, n, taint, site) for n in names)

    def _readers(self, fn: Function) -> dict[str, list[Assign]]:
        """Assignments of ``fn`` by the names their values read (outside reductions)."""
        key = "readers:" + fn.key
        hit = self._index.get(key)
        if hit is None or hit[0] is not fn:
            idx: dict[str, list[Assign]] = {}
            for a in fn.assigns:
                for n in self._reads(a.value, fn)[0]:
                    idx.setdefault(n, []).append(a)
            hit = self._index[key] = (fn, idx)
        return hit[1]

    def taint(self, fn: Function, start: Taint | None, seeds: set[int]) -> Taint:
        """Definitions whose values depend element-wise (not through a reduction) on ``start`` or seed nodes.

        A worklist over the def-use index: an assignment is tainted when its value contains a seed node or reads
        a name one of whose tainted definitions reaches it. Results are cached per (function, start, seeds)."""
        ckey = (fn.key, id(fn), frozenset(start.defs) if start else frozenset(),
                frozenset(start.names) if start else frozenset(), frozenset(seeds))
        cached = self._taints.get(ckey)
        if cached is not None:
            return Taint(set(cached.defs), set(cached.names))
        if start is None and len(seeds) == 1:
            batch = self._load_taints(fn)
            (seed,) = seeds
            if seed in batch:
                self._taints[ckey] = Taint(set(batch[seed]), set())
                return Taint(set(batch[seed]), set())
        t = Taint(set(start.defs) if start else set(), set(start.names) if start else set())
        readers = self._readers(fn)
        by_id = {id(a): a for a in fn.assigns}
        work: list[Assign] = []
        if seeds:
            work += [a for a in fn.assigns if not self._reads(a.value, fn)[1].isdisjoint(seeds)]
        for name in t.names:
            work += readers.get(name, [])
        for d in list(t.defs):
            a = by_id.get(d)
            if a is not None:
                for name in a.targets:
                    work += readers.get(name, [])
        while work:
            a = work.pop()
            if id(a) in t.defs:
                continue
            if self.reads_through(a.value, fn, t, seeds, site_of(a)):
                t.defs.add(id(a))
                for name in a.targets:
                    work.extend(r for r in readers.get(name, []) if id(r) not in t.defs)
        self._taints[ckey] = Taint(set(t.defs), set(t.names))
        return t

    def _load_taints(self, fn: Function) -> dict[int, set[int]]:
        """:meth:`taint` of every single load of ``fn`` at once (load expression id -> tainted definition ids).

        The same fixpoint, with one bit per load: an assignment's mask is the loads its value contains (outside
        reductions) or-ed with the masks of the definitions it reads that reach it. Checks such as ``load_feeds``
        ask for the taint of each of a kernel's 10-20 loads; one pass instead of one worklist per load made that
        check 3x faster on the causal_conv1d reference."""
        key = "load-taints:" + fn.key
        hit = self._index.get(key)
        if hit is not None and hit[0] is fn:
            return hit[1]  # type: ignore[return-value]
        loads = [c for kind, c, _ in self.memory_ops(fn) if kind == "load"]
        bit = {id(c.expr): 1 << i for i, c in enumerate(loads)}
        readers = self._readers(fn)
        defs = fn.defs()
        mask: dict[int, int] = {}
        work: list[Assign] = []
        for a in fn.assigns:
            m = 0
            for node_id in self._reads(a.value, fn)[1]:
                m |= bit.get(node_id, 0)
            if m:
                mask[id(a)] = m
                work.append(a)
        while work:
            a = work.pop()
            m = mask[id(a)]
            for name in a.targets:
                others = defs.get(name, [])
                for r in readers.get(name, []):
                    old = mask.get(id(r), 0)
                    if old | m != old and self.reaches(a, site_of(r), others):
                        mask[id(r)] = old | m
                        work.append(r)
        out = {lid: {aid for aid, m in mask.items() if m & b} for lid, b in bit.items()}
        self._index[key] = (fn, out)  # type: ignore[assignment]
        return out

    def bases(self, e: Expr, fn: Function, depth: int = 0, seen: set[int] | None = None) -> set[str]:
        """Pointer parameters an address expression is based on (``x_ptr + row*stride + offs`` -> ``{x_ptr}``)."""
        seen = seen if seen is not None else set()
        if depth > 10 or id(e) in seen:
            return set()
        seen.add(id(e))
        k = e.kind
        if k == "name":
            if e.op in fn.params:
                if e.op in fn.constexprs:
                    return set()
                if fn.lang == "cuda" and e.op not in fn.pointer_params:
                    return set()
                if fn.lang == "py" and e.op in self.int_names(fn):
                    return set()
                return {e.op}
            if fn.lang == "py" and e.op in self.int_names(fn):
                return set()
            out: set[str] = set()
            for a in fn.defs().get(e.op, []):
                v = a.value
                if v.kind == "other" and v.op in ("item-write", "loop-var"):
                    continue
                out |= self.bases(v, fn, depth + 1, seen)
            return out
        if k == "bin":
            if e.op == "+":
                return self.bases(e.args[0], fn, depth + 1, seen) | self.bases(e.args[1], fn, depth + 1, seen)
            if e.op == "-":
                return self.bases(e.args[0], fn, depth + 1, seen)
            return set()
        if k in ("sub", "cast") and e.args:
            return self.bases(e.args[0], fn, depth + 1, seen)
        if k == "ternary" and len(e.args) == 3:
            return self.bases(e.args[1], fn, depth + 1, seen) | self.bases(e.args[2], fn, depth + 1, seen)
        if k == "call":
            if e.op in POINTER_PASSTHROUGH or e.op in ("load",):
                first = e.kw("base", 0)
                return self.bases(first, fn, depth + 1, seen) if first is not None else set()
            if e.op == ".to" and e.recv is not None:
                return self.bases(e.recv, fn, depth + 1, seen)
        if k == "unary" and e.op == "&" and e.args:
            return self.bases(e.args[0], fn, depth + 1, seen)
        return set()

    def int_names(self, fn: Function) -> set[str]:
        """Names of ``fn`` used as integers: an operand of ``*``, ``//``, ``%``, a shift or an ordering comparison,
        or a bound of ``tl.arange``/``range``/``tl.cdiv``. Triton parameters carry no types, and ``x_ptr + half + i``
        adds an int parameter to a pointer: a name used this way is a size or an offset, never a pointer base
        (pointers are only added to)."""
        hit = self._ints.get(fn.key)
        if hit is not None and hit[0] is fn:
            return hit[1]
        out: set[str] = set()
        stack = [a.value for a in fn.assigns] + [c.expr for c in fn.calls] + [g for a in fn.assigns for g in a.guards]
        stack += [e for lp in fn.loops for e in (lp.start, lp.stop, lp.step) if e is not None]
        seen: set[int] = set()
        while stack:  # every node once (calls nested in assignments are also listed in fn.calls)
            n = stack.pop()
            args = n.args
            if not args and n.kwargs is None and n.recv is None:
                continue  # a leaf (most nodes): nothing below it, and its use is judged at its parent
            if id(n) in seen:
                continue
            seen.add(id(n))
            if args:
                stack.extend(args)
                if (n.kind == "bin" and n.op in _INT_OPS or n.kind == "cmp" and n.op in _ORDER_CMPS
                        or n.kind == "call" and n.op in _INT_CALLS):
                    out.update(x.op for x in args if x.kind == "name")
            if n.kwargs:
                stack.extend(n.kwargs.values())
            if n.recv is not None:
                stack.append(n.recv)
        self._ints[fn.key] = (fn, out)
        return out

    def memory_ops(self, fn: Function) -> list[tuple[str, Call, set[str]]]:
        """Loads and stores of global memory in ``fn``: (``load``/``store``, call, base pointers).

        Triton: ``tl.load``/``tl.store``, and ``.load``/``.store`` on tensor descriptors (Triton tensors have no
        such methods, so in a jit function these are descriptor accesses). CUDA: pointer reads/writes, ``__ldg``...
        """
        cached = self._memory.get(fn.key)
        if cached is None:
            cached = self._memory[fn.key] = self._memory_ops(fn)
        return cached

    def _memory_ops(self, fn: Function) -> list[tuple[str, Call, set[str]]]:
        out: list[tuple[str, Call, set[str]]] = []
        for c in fn.calls:
            n = c.name
            if n in LOADS and n != "tl.atomic_add":
                ptr = c.expr.kw("pointer", 0)
                out.append(("load", c, self.bases(ptr, fn) if ptr is not None else set()))
            elif n in STORES:
                ptr = c.expr.kw("pointer", 0)
                out.append(("store", c, self.bases(ptr, fn) if ptr is not None else set()))
            elif fn.kind == "jit" and n in (".load", ".store", ".gather", ".scatter") and c.expr.recv is not None:
                kind = "load" if n in (".load", ".gather") else "store"
                out.append((kind, c, self.bases(c.expr.recv, fn) or {_text(c.expr.recv)}))
        return out

    def stored_value(self, c: Call) -> Expr | None:
        """The value argument of a store call."""
        if c.name in (".store", ".scatter"):
            return c.expr.args[1] if len(c.expr.args) > 1 else c.expr.kw("value")
        return c.expr.kw("value", 1)

    def loop_of(self, fn: Function, loop_id: int) -> Loop | None:
        return fn.loop(loop_id)

    def pid_derived(self, e: Expr, fn: Function) -> bool:
        """Does ``e`` come from the program id (``tl.program_id``, ``blockIdx``)? (Cached per expression.)"""
        key = (id(e), id(fn))
        hit = self._pid.get(key)
        if hit is not None and hit[0] is e:
            return hit[1]
        out = False
        for node, _, _ in self.walk(e, fn, params=True):
            if (node.kind == "call" and node.op == "tl.program_id") or (node.kind == "name"
                                                                         and node.op.startswith("blockIdx")):
                out = True
                break
        self._pid[key] = (e, out)
        return out


def _text(e: Expr) -> str:
    return e.op if e.kind in ("name", "attr") else f"<{e.kind}@{e.line}>"


def flow(facts: Facts) -> Flow:
    """The (cached) :class:`Flow` of a file."""
    return facts.memo("flow", lambda: Flow(facts))
