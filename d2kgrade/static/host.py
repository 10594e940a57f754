"""Host flattening: the entry ``kernel(...)`` with every host helper it runs inlined into one function.

Production launchers rarely launch from ``kernel`` itself: the launch sits in a private helper, a method of a
launcher class (state set in ``__init__``, configuration cached on ``self``), a closure returned by a factory, the
target of ``functools.partial``, or a helper that looks kernels up in a dict and forwards ``*args, **meta``.
Checks that follow a kernel parameter back to the host value it comes from (the grid, ``BLOCK_N =
next_power_of_2(N)``, the SM count) would stop at the first of those boundaries. :func:`flatten_entry` builds one
host function, keyed ``kernel``, in which

- calls of host functions defined in the file are expanded in place: parameters become locals ``p@nameN``
  assigned from the arguments (defaults when none is passed; ``*args`` a tuple, ``**meta`` a ``dict(...)``), their
  locals are renamed alike, and the call's value is the callee's return value;
- a class call inlines ``__init__`` on a fresh instance; ``self.attr = v`` becomes a local ``<instance>.attr``, read
  back wherever the instance's methods read ``self.attr`` (class-level constants are read from the class body);
  calling the instance runs ``__call__`` (``forward``); ``Cls.apply`` runs ``forward``;
- ``functools.partial(f, ...)`` and wrappers such as ``torch.compile(f)`` call ``f`` with the bound arguments;
- a factory's returned nested function runs with the factory's locals (its closure) renamed as in the factory;
- launches keep their grid, arguments and target expression, now in the flattened function's terms, so a kernel
  picked from a dict by a constant key resolves to that one kernel.

Expansion stops at :data:`MAX_DEPTH` levels, never recurses, and stops copying past :data:`MAX_STATEMENTS`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from d2kgrade.static.entry import Binding, callable_of, dotted, entry_def, partial_params
from d2kgrade.static.inline import fresh_loops
from d2kgrade.static.ir import Assign, Call, Expr, Function, Launch, Loop

if TYPE_CHECKING:
    from d2kgrade.static.pyfacts import PyExtractor

MAX_DEPTH = 8
MAX_STATEMENTS = 20_000
INSTANCE = "@instance:"
"""Prefix of the name that stands for an instance created by a class call (``@instance:Cls#3``)."""
PARTIALS = {"functools.partial", "partial"}
WRAPPERS = {"torch.compile", "compile", "torch.jit.script", "torch.no_grad", "torch.inference_mode",
            "functools.lru_cache", "functools.cache"}


@dataclass
class Callee:
    """What a call runs: a host function, with the instance bound to its first parameter and the arguments a
    ``functools.partial`` bound, and the closure renaming of the factory that made it."""

    fn: Function
    self_name: str | None = None
    pre_args: tuple[Expr, ...] = ()
    pre_kwargs: dict[str, Expr] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


class HostInliner:
    """Builds the flattened entry of one Python file."""

    def __init__(self, ex: PyExtractor) -> None:
        self.ex = ex
        self.facts = ex.facts
        self.funcs = ex.facts.functions
        self.counter = 0
        self.statements = 0
        self.values: dict[str, Expr] = {}
        """Last value assigned to each name of the flattened function (for resolving what a name calls)."""
        self.instances: dict[str, str] = {}
        """Instance name -> class."""
        self.module_instances: dict[str, str] = {}
        """Module-level ``obj = Cls(...)`` names -> their instance name, created on first use."""
        self.closures: dict[str, dict[str, str]] = {}
        """Factory key -> the renaming its last expansion used (the closure of its nested functions)."""
        self.loop_ids = ex.loop_ids
        self.expanded: set[str] = set()
        """Keys of the host functions expanded into the entry (reachable, though never called on their own)."""

    # ------------------------------------------------------------------------------------------ entry

    def flatten(self, entry: Function) -> Function:
        """The flattened copy of ``entry`` (a host function), keyed ``kernel``."""
        dst = Function("kernel", "kernel", "py", "host", list(entry.params), entry.line, entry.end_line,
                       defaults=dict(entry.defaults))
        dst.vararg, dst.kwarg = entry.vararg, entry.kwarg
        dst.returns = self.emit(entry, dst, {}, (), (), 0, (entry.key,), None)
        dst.inlined = True
        dst._defs = None
        return dst

    # ------------------------------------------------------------------------------------------ copying

    def emit(self, src: Function, dst: Function, rename: dict[str, str], ctx_loops: tuple[int, ...],
             ctx_guards: tuple[Expr, ...], depth: int, stack: tuple[str, ...], self_name: str | None,
             self_param: str = "self") -> list[Expr]:
        """Copy ``src``'s statements into ``dst`` in source order, expanding host calls; returns ``src``'s
        return expressions (copied)."""
        loop_map, loops_of = fresh_loops(src, self.loop_ids, ctx_loops)

        inlined: dict[int, Expr] = {}
        memo: dict[int, Expr] = {}
        cp = self._copier(rename, memo, inlined, self_name, self_param, src.key)
        launches = {id(la.args): la for la in src.launches}
        events: list[tuple[int, int, int, Assign | Call]] = (
            [(c.expr.end_line, 0, i, c) for i, c in enumerate(src.calls)]
            + [(a.end_line, 1, i, a) for i, a in enumerate(src.assigns)])
        events.sort(key=lambda t: (t[0], t[1], t[2]))
        for lp in src.loops:
            parent = loop_map.get(lp.parent) if lp.parent is not None else (ctx_loops[-1] if ctx_loops else None)
            dst.loops.append(Loop(loop_map[lp.id], dst.key, lp.kind, rename.get(lp.var, lp.var) if lp.var else None,
                                  cp(lp.start), cp(lp.stop), cp(lp.step), {k: cp(v) for k, v in lp.options.items()},
                                  lp.line, lp.end_line, parent, lp.unroll,
                                  ctx_guards + tuple(cp(g) for g in lp.guards)))
        for _, kind, _, st in events:
            self.statements += 1
            if self.statements > MAX_STATEMENTS:
                break
            guards = ctx_guards + tuple(cp(g) for g in st.guards)
            if kind == 0:
                c: Call = st  # type: ignore[assignment]
                if c.name == "launch":
                    self._launch(c, launches.get(id(c.expr.args)), dst, cp, loops_of(c.loops), guards)
                    continue
                got = self._expand(c, src, dst, cp, rename, loops_of(c.loops), guards, depth, stack)
                if got is not None:
                    inlined[id(c.expr)] = got
                    continue
                dst.calls.append(Call(c.name, cp(c.expr), loops_of(c.loops), guards))
            else:
                a: Assign = st  # type: ignore[assignment]
                self._assign(a, dst, cp, rename, inlined, loops_of(a.loops), guards, self_name, self_param)
        return [cp(r) for r in src.returns]

    def _assign(self, a: Assign, dst: Function, cp, rename: dict[str, str], inlined: dict[int, Expr],
                loops: tuple[int, ...], guards: tuple[Expr, ...], self_name: str | None, self_param: str) -> None:
        value, index = a.value, a.index
        if index is not None and id(value) in inlined:
            new_value, index = _element(inlined[id(value)], index)
        elif value.kind == "other" and value.op == "item-write" and len(value.args) == 2:
            target = value.args[0]
            if (self_name is not None and target.kind == "attr" and target.recv is not None
                    and target.recv.kind == "name" and target.recv.op == self_param):
                name = f"{self_name}.{target.op}"  # self.attr = v: a local of the instance
                new = cp(value.args[1])
                self.values[name] = new
                dst.assigns.append(Assign((name,), new, a.line, a.end_line, loops, guards, None, a.aug))
                return
            new_value = cp(value)
            base = new_value.args[0]
            while base.kind == "sub" and base.args:
                base = base.args[0]
            if base.kind == "name":  # cache[key] = v (self._cache[n] = (block, warps)): what reading it returns
                self.values[base.op + "[]"] = new_value.args[1]
                if base.op.startswith(INSTANCE) and a.targets == (self_param,):
                    dst.assigns.append(Assign((base.op,), new_value, a.line, a.end_line, loops, guards, None, a.aug))
                    return
        else:
            new_value = cp(value)
        targets = tuple(rename.get(t, t) for t in a.targets)
        if len(targets) == 1 and index is None:
            self.values[targets[0]] = new_value
        dst.assigns.append(Assign(targets, new_value, a.line, a.end_line, loops, guards, index, a.aug))

    def _launch(self, c: Call, la: Launch | None, dst: Function, cp, loops: tuple[int, ...],
                guards: tuple[Expr, ...]) -> None:
        e = self._splice(cp(c.expr), dst)
        dst.calls.append(Call("launch", e, loops, guards))
        if la is None:
            return
        target = e.recv
        kernel = target.op if target is not None and target.kind == "name" and target.op in self.funcs else ""
        grid = cp(la.grid) if la.grid is not None else None
        if grid is not None and grid.kind == "name":  # def grid(meta): the launch calls it with its meta-parameters
            fn = self.funcs.get(grid.op) if grid.op in self.funcs else None
            callee = Callee(fn) if fn is not None and fn.kind == "host" else self.as_callee(
                self.values.get(grid.op, grid), dst)
            if callee is not None and callee.fn.key != "kernel" and len(callee.fn.params) == 1:
                meta = Expr("call", "dict", (), dict(e.kwargs or {}), line=la.line, end_line=la.end_line)
                grid = self.call(callee, (meta,), {}, dst, loops, guards, 0, ("kernel",), grid)
        dst.launches.append(Launch(kernel or la.kernel, grid, e.args, dict(e.kwargs or {}), dst.key, la.line,
                                   la.end_line, la.block, la.template, target=target))

    def _splice(self, e: Expr, dst: Function) -> Expr:
        """A launch with ``*args`` / ``**meta`` whose tuple or dict is known spliced into plain arguments."""
        args: list[Expr] = []
        changed = False
        for a in e.args:
            seq = self._literal(a.args[0], "tuple", dst) if a.kind == "other" and a.op == "*" and a.args else None
            if seq is not None:
                args.extend(seq.args)
                changed = True
            else:
                args.append(a)
        kwargs: dict[str, Expr] = {}
        for k, v in (e.kwargs or {}).items():
            d = self._literal(v, "dict", dst) if k.startswith("**") else None
            if d is not None:
                kwargs.update({dk: dv for dk, dv in (d.kwargs or {}).items() if not dk.startswith("**")})
                kwargs.update({dk: dv for dk, dv in (d.kwargs or {}).items() if dk.startswith("**")})
                changed = True
            else:
                kwargs[k] = v
        if not changed:
            return e
        return Expr(e.kind, e.op, tuple(args), kwargs, e.recv, e.value, e.line, e.end_line)

    def _literal(self, e: Expr, kind: str, dst: Function) -> Expr | None:
        """The tuple display (``kind='tuple'``) or ``dict(...)``/``{...}`` (``'dict'``) a name stands for; not
        followed through a name assigned twice (``meta = dict(FAST=True)`` in one branch, ``dict(FAST=False)`` in
        the other: splicing the last would make one branch's values the launch's)."""
        for _ in range(8):
            if e.kind == "name" and e.op in self.values and sum(e.op in a.targets for a in dst.assigns) <= 1:
                e = self.values[e.op]
                continue
            break
        if kind == "tuple" and e.kind == "tuple" and e.op != "dict" and not _starred(list(e.args)):
            return e
        if kind == "dict" and e.op == "dict" and e.kind in ("call", "tuple") and not e.args:
            return e
        return None

    def _copier(self, rename: dict[str, str], memo: dict[int, Expr], inlined: dict[int, Expr],
                self_name: str | None, self_param: str, scope: str = ""):
        facts = self.facts
        funcs = self.funcs
        instances = self.instances
        values = self.values

        def cp(e: Expr | None) -> Expr:
            if e is None:
                return None  # type: ignore[return-value]
            hit = memo.get(id(e))
            if hit is not None:
                return hit
            hit = inlined.get(id(e))
            if hit is not None:
                return hit
            if e.kind == "name":
                new = rename.get(e.op)
                if e.op == self_param and self_name is not None:
                    new = self_name
                elif new is None and scope:  # a nested function or a sibling module's, by its full key
                    new = _scoped(funcs, scope, e.op)
                out = e if new is None else Expr("name", new, (), None, None, e.value, e.line, e.end_line)
            elif (e.kind == "attr" and self_name is not None and e.recv is not None and e.recv.kind == "name"
                  and e.recv.op == self_param):
                local = f"{self_name}.{e.op}"
                cls = instances.get(self_name, "")
                const = facts.consts.get(f"{cls}.{e.op}", _NONE)
                if local in values or const is _NONE:
                    out = Expr("name", local, (), None, None, None, e.line, e.end_line)
                else:
                    out = Expr("const", repr(const)[:80], (), None, None, const, e.line, e.end_line)
            else:
                args = tuple(cp(a) for a in e.args) if e.args else e.args
                kwargs = {k: cp(v) for k, v in e.kwargs.items()} if e.kwargs else e.kwargs
                recv = cp(e.recv) if e.recv is not None else None
                if recv is e.recv and all(x is y for x, y in zip(args, e.args)) and (
                        not kwargs or all(kwargs[k] is v for k, v in (e.kwargs or {}).items())):
                    out = e
                else:
                    out = Expr(e.kind, e.op, args, kwargs, recv, e.value, e.line, e.end_line)
            memo[id(e)] = out
            return out

        return cp

    # ------------------------------------------------------------------------------------------ calls

    def _expand(self, c: Call, src: Function, dst: Function, cp, rename: dict[str, str],
                loops: tuple[int, ...], guards: tuple[Expr, ...], depth: int, stack: tuple[str, ...]) -> Expr | None:
        """Inline the host function ``c`` calls (its return value), or None when it calls nothing of the file."""
        if depth >= MAX_DEPTH:
            return None
        e = c.expr
        callee = self.resolve_call(e, src, cp, dst, loops, guards, depth, stack)
        if isinstance(callee, Expr):  # an instance made by a class call
            return callee
        if callee is None or callee.fn.key in stack:
            return None
        return self.call(callee, tuple(cp(a) for a in e.args), {k: cp(v) for k, v in (e.kwargs or {}).items()},
                         dst, loops, guards, depth, stack, e)

    def call(self, callee: Callee, args: tuple[Expr, ...], kwargs: dict[str, Expr], dst: Function,
             loops: tuple[int, ...], guards: tuple[Expr, ...], depth: int, stack: tuple[str, ...],
             at: Expr) -> Expr:
        """Inline ``callee`` called with (already copied) ``args``/``kwargs``; its return value."""
        fn = callee.fn
        self.expanded.add(fn.key)
        self.counter += 1
        tag = f"@{fn.name}{self.counter}"
        params = list(fn.params)
        if callee.self_name is not None and params:
            params = params[1:]
        args = callee.pre_args + args
        kwargs = {**callee.pre_kwargs, **kwargs}
        sub: dict[str, str] = dict(callee.env)
        for p in fn.params:
            sub[p] = p + tag
        self_param = None
        if callee.self_name is not None and fn.params:
            self_param = fn.params[0]
            sub.pop(self_param, None)
        for name in fn.defs():  # a nested function's assignment makes a new local, shadowing its closure
            sub[name] = name + tag
        if fn.vararg:
            sub[fn.vararg] = fn.vararg + tag
        if fn.kwarg:
            sub[fn.kwarg] = fn.kwarg + tag
        self.closures[fn.key] = sub
        positional = [a for a in args]
        starred = [kv for kv in kwargs.items() if kv[0].startswith("**")]
        named = {k: v for k, v in kwargs.items() if not k.startswith("**")}
        for i, p in enumerate(params):
            value = named.pop(p, None)
            if value is None and i < len(positional) and not _starred(positional[:i + 1]):
                value = positional[i]
            if value is None and starred:
                value = Expr("sub", "", (starred[0][1], Expr("const", repr(p), value=p)), line=at.line,
                             end_line=at.end_line)
            if value is None:
                value = fn.defaults.get(p)
            if value is not None:
                self._bind(sub[p], value, dst, loops, guards, at)
        if fn.vararg:
            rest = positional[len(params):] if not _starred(positional[:len(params)]) else positional
            self._bind(sub[fn.vararg], Expr("tuple", "", tuple(rest), line=at.line, end_line=at.end_line), dst,
                       loops, guards, at)
        if fn.kwarg:
            extra = dict(named)
            for i, (k, v) in enumerate(starred):
                extra[f"**{i}"] = v
            self._bind(sub[fn.kwarg], Expr("call", "dict", (), extra, line=at.line, end_line=at.end_line), dst,
                       loops, guards, at)
        rets = self.emit(fn, dst, sub, loops, guards, depth + 1, stack + (fn.key,), callee.self_name,
                         self_param or "self")
        if not rets:
            return Expr("const", "None", value=None, line=at.line, end_line=at.end_line)
        rets = [self._deref(self._function_ref(r, fn)) for r in rets]
        if len(rets) == 1:
            return rets[-1]
        cp = self._copier(sub, {}, {}, callee.self_name, self_param or "self", fn.key)
        conds = [tuple(cp(g) for g in gs) for gs in fn.return_guards] if len(fn.return_guards) == len(rets) else []
        return _choice(rets, conds)

    def _deref(self, r: Expr) -> Expr:
        """``cache[key]`` returned by a memoising helper: the value the helper stored under a key."""
        if r.kind == "sub" and r.args and r.args[0].kind == "name" and r.args[0].op + "[]" in self.values:
            return self.values[r.args[0].op + "[]"]
        return r

    def _function_ref(self, r: Expr, fn: Function) -> Expr:
        """A returned nested function (``return run`` in a factory) as a name that resolves from anywhere."""
        if r.kind == "name" and r.op not in self.instances:
            for key in self.ex.resolve(r.op, fn.key):
                if key.startswith(fn.key + ".") and key in self.funcs:
                    return Expr("name", key, (), None, None, None, r.line, r.end_line)
        return r

    def _bind(self, name: str, value: Expr, dst: Function, loops: tuple[int, ...], guards: tuple[Expr, ...],
              at: Expr) -> None:
        self.values[name] = value
        dst.assigns.append(Assign((name,), value, at.line, at.end_line, loops, guards))

    def resolve_call(self, e: Expr, src: Function, cp, dst: Function, loops: tuple[int, ...],
                     guards: tuple[Expr, ...], depth: int, stack: tuple[str, ...]) -> Callee | Expr | None:
        """What the call ``e`` (in ``src``) runs: a :class:`Callee`, an instance (for a class call), or None."""
        name = e.op
        if name == "<dynamic>" and e.recv is not None:  # f(...)(...): the value of the inner expression
            value = self.value_of(cp(e.recv), src, dst, loops, guards, depth, stack)
            return self.as_callee(value, src)
        if e.recv is None:
            local = cp(Expr("name", name, line=e.line, end_line=e.end_line))
            if local.op != name or name in self.values:  # a local of the flattened function
                return self.as_callee(self.value_of(local, src, dst, loops, guards, depth, stack), src)
            return self.named(name, src, dst, loops, guards, depth, stack)
        if name.startswith("."):
            recv = cp(e.recv)
            inst = self.instance_of(recv, src, dst, loops, guards, depth, stack)
            if inst is not None:
                fn = self._method(self.instances[inst], name[1:])
                return Callee(fn, self_name=inst) if fn is not None else None
            if e.recv.kind == "name" and e.recv.op in self.ex.classes and name == ".apply":
                fn = self._method(e.recv.op, "forward")
                return Callee(fn, self_name="@ctx") if fn is not None else None
        return None

    def named(self, name: str, src: Function, dst: Function, loops: tuple[int, ...], guards: tuple[Expr, ...],
              depth: int, stack: tuple[str, ...]) -> Callee | Expr | None:
        """A call of ``name`` that is not a local: a function, a class, or a module-level instance/partial."""
        if "." in name:
            cls, _, meth = name.rpartition(".")
            if cls in self.ex.classes and meth == "apply":
                fn = self._method(cls, "forward")
                return Callee(fn, self_name="@ctx") if fn is not None else None
        if name in self.ex.classes:
            return self.instantiate(name, (), {}, dst, loops, guards, depth, stack)
        for key in self.ex.resolve(name, src.key):
            fn = self.funcs.get(key)
            if fn is not None and fn.lang == "py" and fn.kind == "host" and key != "<module>":
                return Callee(fn, env=self._closure_env(key))
        module = self.funcs.get("<module>")
        if module is not None and name in module.defs():
            inst = self.module_instance(name, dst, loops, guards, depth, stack)
            if inst is not None:
                return self.as_callee(Expr("name", inst), src)
            value = module.defs()[name][-1].value
            return self.as_callee(self.value_of(value, module, dst, loops, guards, depth, stack), module)
        return None

    def _closure_env(self, key: str) -> dict[str, str]:
        outer = key.rsplit(".", 1)[0] if "." in key else ""
        return dict(self.closures.get(outer, {})) if outer in self.funcs else {}

    def value_of(self, e: Expr, src: Function, dst: Function, loops: tuple[int, ...], guards: tuple[Expr, ...],
                 depth: int, stack: tuple[str, ...], hops: int = 0) -> Expr:
        """The value an expression stands for, following locals of the flattened function (a few hops), and
        evaluating class calls (an instance), factory calls (their return value) and partials (kept as is)."""
        if hops > 6:
            return e
        if e.kind == "name" and e.op in self.values and e.op not in self.instances:
            return self.value_of(self.values[e.op], src, dst, loops, guards, depth, stack, hops + 1)
        if e.kind == "call" and e.recv is None:
            if e.op in PARTIALS or e.op in WRAPPERS:
                return e
            if e.op in self.ex.classes:
                return self.instantiate(e.op, e.args, dict(e.kwargs or {}), dst, loops, guards, depth, stack)
            got = self.named(e.op, src, dst, loops, guards, depth, stack)
            if isinstance(got, Expr):
                return got
            if isinstance(got, Callee) and got.fn.key not in stack and depth < MAX_DEPTH:
                return self.call(got, e.args, dict(e.kwargs or {}), dst, loops, guards, depth, stack, e)
        return e

    def as_callee(self, value: Expr | Callee | None, src: Function) -> Callee | None:
        """The callable a value denotes: a function name, a partial or wrapper of one, an instance."""
        if value is None or isinstance(value, Callee):
            return value
        if value.kind == "name":
            if value.op in self.instances:
                fn = self._method(self.instances.get(value.op, ""), "__call__") or self._method(
                    self.instances.get(value.op, ""), "forward")
                return Callee(fn, self_name=value.op) if fn is not None else None
            for key in self.ex.resolve(value.op, src.key) or self.ex.resolve(value.op, ""):
                fn = self.funcs.get(key)
                if fn is not None and fn.lang == "py" and fn.kind == "host":
                    return Callee(fn, env=self._closure_env(key))
            return None
        if value.kind == "call" and value.args and (value.op in PARTIALS or value.op in WRAPPERS):
            inner = self.as_callee(value.args[0], src)
            if inner is None:
                return None
            if value.op in PARTIALS:
                inner.pre_args = tuple(value.args[1:])
                inner.pre_kwargs = {k: v for k, v in (value.kwargs or {}).items()}
            return inner
        if value.kind == "other" and value.op == "returns" and value.args:
            return self.as_callee(value.args[-1], src)
        return None

    def instance_of(self, e: Expr, src: Function, dst: Function, loops: tuple[int, ...], guards: tuple[Expr, ...],
                    depth: int, stack: tuple[str, ...]) -> str | None:
        if e.kind != "name":
            return None
        if e.op in self.instances:
            return e.op
        value = self.value_of(e, src, dst, loops, guards, depth, stack)
        if value.kind == "name" and value.op in self.instances:
            return value.op
        return self.module_instance(e.op, dst, loops, guards, depth, stack)

    def module_instance(self, name: str, dst: Function, loops: tuple[int, ...], guards: tuple[Expr, ...],
                        depth: int, stack: tuple[str, ...]) -> str | None:
        """The instance a module-level ``name = Cls(...)`` holds (``__init__`` inlined on first use)."""
        if name in self.module_instances:
            return self.module_instances[name]
        module = self.funcs.get("<module>")
        defs = module.defs().get(name, []) if module is not None else []
        if not defs or defs[-1].value.kind != "call" or defs[-1].value.op not in self.ex.classes:
            return None
        v = defs[-1].value
        inst = self.instantiate(v.op, v.args, dict(v.kwargs or {}), dst, (), (), depth, stack)
        self.module_instances[name] = inst.op
        return inst.op

    def instantiate(self, cls: str, args: tuple[Expr, ...], kwargs: dict[str, Expr], dst: Function,
                    loops: tuple[int, ...], guards: tuple[Expr, ...], depth: int, stack: tuple[str, ...]) -> Expr:
        """A new instance of ``cls``: ``__init__`` inlined on it; the instance's name."""
        self.counter += 1
        inst = f"{INSTANCE}{cls}#{self.counter}"
        self.instances[inst] = cls
        init = self._method(cls, "__init__")
        if init is not None and init.key not in stack and depth < MAX_DEPTH:
            self.call(Callee(init, self_name=inst), args, kwargs, dst, loops, guards, depth, stack,
                      Expr("name", inst, line=init.line, end_line=init.line))
        return Expr("name", inst, line=init.line if init else 0, end_line=init.line if init else 0)

    def _method(self, cls: str, meth: str) -> Function | None:
        seen: set[str] = set()
        todo = [cls]
        while todo:  # the class, then its bases defined in the file
            c = todo.pop(0)
            if c in seen:
                continue
            seen.add(c)
            fn = self.funcs.get(f"{c}.{meth}")
            if fn is not None and fn.lang == "py":
                return fn
            todo.extend(self.ex.bases.get(c, []))
        return None


_NONE = object()


def _choice(rets: list[Expr], conds: list[tuple[Expr, ...]]) -> Expr:
    """Several returns as one value: ``r1 if c1 else (r2 if c2 else r3)`` from the conditions each return sits
    under (an early ``return`` in an ``if`` chain), so what decides the value stays visible; without them,
    ``returns(r1, r2, ...)``."""
    if not conds:
        return Expr("other", "returns", tuple(rets), line=rets[-1].line, end_line=rets[-1].end_line)
    out = rets[-1]
    for r, gs in zip(reversed(rets[:-1]), reversed(conds[:-1])):
        if not gs:
            continue
        cond = gs[0] if len(gs) == 1 else Expr("cmp", "and", gs, line=gs[0].line, end_line=gs[-1].end_line)
        out = Expr("ternary", "", (cond, r, out), line=r.line, end_line=r.end_line)
    return out


def _element(ret: Expr, index: int) -> tuple[Expr, int | None]:
    """Element ``index`` of a returned value (``a, b = f()``): of a tuple, or of each of several returns."""
    if ret.kind == "tuple" and ret.op != "dict" and index < len(ret.args):
        return ret.args[index], None
    if ret.kind == "ternary" and len(ret.args) == 3:
        a, ia = _element(ret.args[1], index)
        b, ib = _element(ret.args[2], index)
        if ia is None and ib is None:
            return Expr("ternary", "", (ret.args[0], a, b), line=ret.line, end_line=ret.end_line), None
    if ret.kind == "other" and ret.op == "returns":
        parts = [_element(r, index) for r in ret.args]
        if all(i is None for _, i in parts):
            return Expr("other", "returns", tuple(e for e, _ in parts), line=ret.line, end_line=ret.end_line), None
    return ret, index


def _scoped(funcs: dict[str, Function], scope: str, name: str) -> str | None:
    """The key ``name`` resolves to from inside function ``scope`` when that is not ``name`` itself."""
    parts = scope.split(".")
    while parts:
        cand = ".".join(parts) + "." + name
        if cand in funcs:
            return cand
        parts.pop()
    return None


def _starred(args: list[Expr]) -> bool:
    return any(a.kind == "other" and a.op == "*" for a in args)


def entry_function(ex: PyExtractor, binding: Binding) -> Function | str:
    """The host function that the live binding of ``kernel`` runs (a synthetic one for an assignment), or why
    there is none."""
    from d2kgrade.static.pyfacts import MODULE_KEY

    funcs = ex.facts.functions
    node = binding.node
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        line = min([d.lineno for d in node.decorator_list] + [node.lineno])
        for key in ("kernel", f"kernel@{node.lineno}"):
            f = funcs.get(key)
            if f is not None and f.line == line and f.lang == "py":
                return f
        return "the def of kernel(...) could not be read"
    if binding.value is None:
        return "kernel is imported or is a class; it must be a function of the submission"
    kind, target = callable_of(binding.value)
    params: list[str] = []
    if kind != "lambda":
        assert target is not None
        found = _params_of(ex, kind, target, binding.value)
        if found is None:
            return f"kernel is bound at line {node.lineno} to something that is not a function of this file"
        params = found
    synth = entry_def(binding, params)
    if synth is None:
        return "kernel(...) could not be read"
    before = set(funcs)
    ex._function(synth, "")
    key = next(k for k in funcs if k not in before and "." not in k)
    low = funcs[key]
    if funcs.get(MODULE_KEY) is None:
        return "no module"
    return low


def _params_of(ex: PyExtractor, kind: str, target: ast.expr, value: ast.expr) -> list[str] | None:
    """The parameters of the callable an assignment binding names (without ``self``), or None."""
    funcs = ex.facts.functions
    name = dotted(target)
    if not name:
        return None
    if kind == "call" and name in ex.classes:  # an instance: calling it runs __call__ (or forward)
        for meth in ("__call__", "forward"):
            f = funcs.get(f"{name}.{meth}")
            if f is not None:
                return f.params[1:]
        return None
    if kind == "call":  # a factory: the nested function it returns
        keys = ex.resolve(name, "")
        f = funcs.get(keys[0]) if keys else None
        if f is None or f.kind != "host":
            return None
        for r in f.returns:
            if r.kind == "name":
                for k in ex.resolve(r.op, f.key):
                    if k.startswith(f.key + "."):
                        return list(funcs[k].params)
        return None
    if "." in name:
        obj, _, meth = name.rpartition(".")
        if obj in ex.classes and meth == "apply" and f"{obj}.forward" in funcs:
            return funcs[f"{obj}.forward"].params[1:]
        module = funcs.get("<module>")
        defs = module.defs().get(obj, []) if module is not None else []
        cls = defs[-1].value.op if defs and defs[-1].value.kind == "call" else ""
        if cls in ex.classes and f"{cls}.{meth}" in funcs:
            return funcs[f"{cls}.{meth}"].params[1:]
    keys = ex.resolve(name, "")
    if not keys:
        return None
    f = funcs[keys[0]]
    if kind == "partial" and isinstance(value, ast.Call):
        return partial_params(value, list(f.params))
    return list(f.params)
