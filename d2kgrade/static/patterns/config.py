"""Launch configurations: autotune configs, meta-parameter values, host choices, the values a host expression can take."""

from __future__ import annotations

import ast
from typing import Any

from d2kgrade.static.checkutil import matches
from d2kgrade.static.dataflow import Flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Expr, Function, Launch


def int_options(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> list[int | None]:
    """Values a host expression may take: constants, branches of conditionals, tuple elements by index."""
    if depth > 8:
        return [None]
    v = fl.fold(e, fn)
    if isinstance(v, int) and not isinstance(v, bool):
        return [v]
    if e.kind == "ternary" and len(e.args) == 3:
        return int_options(fl, e.args[1], fn, depth + 1) + int_options(fl, e.args[2], fn, depth + 1)
    if e.kind == "name":
        out: list[int | None] = []
        for a in fl.defs(e.op, fn):
            val = a.value
            if val.kind == "other" and val.op == "loop-var" and val.args:
                val = val.args[0]
            if a.index is not None:
                out += tuple_options(fl, val, a.index, fn, depth + 1)
            elif val.kind == "tuple" and val.args and all(x.kind == "tuple" for x in val.args):
                # `for bm, bn in [(64, 128), ...]`: every target gets the sequence; its position is the index
                sibs = [b for b in fn.assigns if b.value is a.value]
                i = sibs.index(a) if len(sibs) > 1 else None
                for x in val.args:
                    out += tuple_options(fl, x, i, fn, depth + 1) if i is not None else [None]
            elif val.kind == "tuple" and val.args:  # `for bm in (64, 128)`
                for x in val.args:
                    out += int_options(fl, x, fn, depth + 1)
            else:
                out += int_options(fl, val, fn, depth + 1)
        return out or [None]
    return [None]


def generated_config_values(fl: Flow, facts: Facts, p: str) -> list[int | None]:
    """Values of meta-parameter ``p`` in ``triton.Config`` s built by host code (loops over literal lists)."""
    out: list[int | None] = []
    for g in facts.functions.values():
        if g.is_device:
            continue
        for c in g.calls:
            if c.name not in ("triton.Config", "Config"):
                continue
            meta = c.expr.kw("kwargs", 0)
            v = (meta.kwargs or {}).get(p) if meta is not None else None
            if v is not None:
                out += int_options(fl, v, g)
    return out


def tuple_options(fl: Flow, e: Expr, i: int, fn: Function, depth: int) -> list[int | None]:
    if e.kind == "tuple" and i < len(e.args):
        return int_options(fl, e.args[i], fn, depth + 1)
    if e.kind == "ternary" and len(e.args) == 3:
        return tuple_options(fl, e.args[1], i, fn, depth + 1) + tuple_options(fl, e.args[2], i, fn, depth + 1)
    return [None]


def conditional(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> bool:
    """Is the host value ``e`` chosen by a condition (a ternary, or definitions in different branches)?"""
    if depth > 6:
        return False
    if e.kind == "ternary":
        return True
    if e.kind == "name":
        defs = fl.defs(e.op, fn)
        if len(defs) > 1 and any(d.guards for d in defs):
            return True
        return any(conditional(fl, d.value, fn, depth + 1) for d in defs)
    return False


def tile_param_values(fl: Flow, facts: Facts, fn: Function, p: str) -> tuple[list[int | None], bool]:
    """Values of a kernel's tile parameter over its autotune configs and launches, and whether they are chosen
    per problem shape (autotuned with a key, or picked by a host condition)."""
    vals: list[int | None] = []
    per_shape = False
    if fn.autotune is not None:
        vs = [c.kwargs.get(p) for c in fn.autotune.configs if p in c.kwargs]
        if fn.autotune.generated and any(v is None for v in vs):
            vs = [v for v in vs if v is not None] + generated_config_values(fl, facts, p)
        vals += [v if isinstance(v, int) else None for v in vs]
        per_shape = per_shape or (bool(fn.autotune.key) and len({str(v) for v in vs}) >= 2)
    for la in fl.launches_of(fn):
        caller = facts.functions.get(la.caller)
        arg = fl.launch_arg(la, fn, p)
        if caller is None or arg is None:
            continue
        opts = int_options(fl, arg, caller)
        vals += opts
        if len({o for o in opts if o is not None}) >= 2 and conditional(fl, arg, caller):
            per_shape = True
    return vals, per_shape


def local_host(fl: Flow, e: Expr, fn: Function) -> Function | None:
    if e.kind != "call" or e.recv is not None:
        return None
    g = fl.callee(e.op, fn)
    return g if g is not None and not g.is_device and g is not fn else None


def host_values(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> set[Any]:
    """Constant values a host expression may take: literals, constants, every definition of a name, both arms
    of a conditional expression, every return of a local function (a tuple element for ``a, b = f()``)."""
    if depth > 6:
        return set()
    v = fl.fold(e, fn)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return {v}
    if e.kind == "ternary" and len(e.args) == 3:
        return host_values(fl, e.args[1], fn, depth + 1) | host_values(fl, e.args[2], fn, depth + 1)
    if e.kind == "other" and e.op == "returns":  # a host helper's several returns, inlined
        return set().union(*(host_values(fl, r, fn, depth + 1) for r in e.args))
    if e.kind == "name":
        out: set[Any] = set()
        for d in fl.defs(e.op, fn):
            g = local_host(fl, d.value, fn)
            if d.index is not None and g is not None:
                for r in g.returns:
                    if r.kind == "tuple" and r.op != "dict" and d.index < len(r.args):
                        out |= host_values(fl, r.args[d.index], g, depth + 1)
            elif d.index is not None:  # bm, bn = (64, 128) if small else (128, 256)
                out |= _element_values(fl, d.value, d.index, fn, depth + 1)
            else:
                out |= host_values(fl, d.value, fn, depth + 1)
        return out
    g = local_host(fl, e, fn)
    if g is not None:
        out = set()
        for r in g.returns:
            out |= host_values(fl, r, g, depth + 1)
        return out
    return set()


def _element_values(fl: Flow, e: Expr, i: int, fn: Function, depth: int) -> set[Any]:
    """Values element ``i`` of a host tuple expression may take (a tuple literal, both arms of a conditional)."""
    if e.kind == "tuple" and e.op != "dict" and i < len(e.args):
        return host_values(fl, e.args[i], fn, depth + 1)
    if e.kind == "ternary" and len(e.args) == 3:
        return _element_values(fl, e.args[1], i, fn, depth + 1) | _element_values(fl, e.args[2], i, fn, depth + 1)
    return set()


def dict_returns(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> list[tuple[Expr, Function]]:
    """The dict literals (``dict(...)``, ``{...}``) a ``**name`` argument may stand for, through local functions."""
    if depth > 4:
        return []
    if (e.kind == "call" and e.op == "dict") or (e.kind == "tuple" and e.op == "dict"):
        return [(e, fn)]
    if e.kind == "ternary" and len(e.args) == 3:  # a host helper's if-chain of returns, inlined
        return dict_returns(fl, e.args[1], fn, depth + 1) + dict_returns(fl, e.args[2], fn, depth + 1)
    if e.kind == "name":
        out = []
        for d in fl.defs(e.op, fn):
            out += dict_returns(fl, d.value, fn, depth + 1)
        return out
    g = local_host(fl, e, fn)
    if g is not None:
        out = []
        for r in g.returns:
            out += dict_returns(fl, r, g, depth + 1)
        return out
    return []


def launch_param(fl: Flow, la: Launch, fn: Function, p: str) -> list[tuple[Expr, Function, Expr]]:
    """What a launch passes for ``p``: (value expression, its function, the launch-site expression)."""
    caller = fl.facts.functions.get(la.caller)
    if caller is None:
        return []
    e = fl.launch_arg(la, fn, p) if p not in ("num_warps", "num_stages") else la.kwargs.get(p)
    if e is not None:
        return [(e, caller, e)]
    out = []
    for k, v in la.kwargs.items():
        if k.startswith("**"):
            for d, g in dict_returns(fl, v, caller):
                if d.kwargs and p in d.kwargs:
                    out.append((d.kwargs[p], g, v))
    return out


class Eval:
    """Evaluates module-level literal tables and the comprehensions that turn them into ``triton.Config`` lists
    (``[triton.Config({"BM": bm}, num_warps=w) for bm, w in TABLE]``); anything else is unknown."""

    def __init__(self, tree: ast.Module) -> None:
        self.env: dict[str, ast.expr] = {}
        for st in tree.body:
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                self.env[st.targets[0].id] = st.value
            elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                self.env[st.target.id] = st.value

    def ev(self, node: ast.expr, scope: dict[str, Any], depth: int = 0) -> Any:
        if depth > 12:
            raise ValueError
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in scope:
                return scope[node.id]
            if node.id in self.env:
                return self.ev(self.env[node.id], {}, depth + 1)
            raise ValueError
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out = []
            for x in node.elts:
                if isinstance(x, ast.Starred):
                    out.extend(self.ev(x.value, scope, depth + 1))
                else:
                    out.append(self.ev(x, scope, depth + 1))
            return out
        if isinstance(node, ast.Dict):
            return {self.ev(k, scope, depth + 1): self.ev(v, scope, depth + 1)
                    for k, v in zip(node.keys, node.values) if k is not None}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.ev(node.left, scope, depth + 1) + self.ev(node.right, scope, depth + 1)
        if isinstance(node, ast.Subscript):
            return self.ev(node.value, scope, depth + 1)[self.ev(node.slice, scope, depth + 1)]
        if isinstance(node, ast.ListComp):
            return self.comp(node.elt, node.generators, scope, depth)
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name == "Config":
                meta = self.ev(node.args[0], scope, depth + 1) if node.args else {}
                cfg = dict(meta) if isinstance(meta, dict) else {}
                for kw in node.keywords:
                    if kw.arg in ("num_warps", "num_stages"):
                        cfg[kw.arg] = self.ev(kw.value, scope, depth + 1)
                return cfg
            if name == "items" and isinstance(f, ast.Attribute):
                return list(self.ev(f.value, scope, depth + 1).items())
            if name in ("range", "list", "tuple") and isinstance(f, ast.Name):
                args = [self.ev(a, scope, depth + 1) for a in node.args]
                return list(range(*args)) if name == "range" else list(args[0])
        raise ValueError

    def comp(self, elt: ast.expr, gens: list[ast.comprehension], scope: dict[str, Any], depth: int) -> list[Any]:
        if not gens:
            return [self.ev(elt, scope, depth + 1)]
        g = gens[0]
        out = []
        for item in self.ev(g.iter, scope, depth + 1):
            s = dict(scope)
            self.bind(g.target, item, s)
            if all(self.ev(c, s, depth + 1) for c in g.ifs):
                out.extend(self.comp(elt, gens[1:], s, depth + 1))
            if len(out) > 512:
                raise ValueError
        return out

    def bind(self, target: ast.expr, value: Any, scope: dict[str, Any]) -> None:
        if isinstance(target, ast.Name):
            scope[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            vals = list(value)
            if len(vals) != len(target.elts):
                raise ValueError
            for t, v in zip(target.elts, vals):
                self.bind(t, v, scope)
        else:
            raise ValueError


def config_dicts(facts: Facts, fn: Function) -> list[dict[str, Any]]:
    """The autotune configs of ``fn`` as dicts (meta-parameters, ``num_warps``, ``num_stages``). When the facts
    hold values that are not literals (configs built by a comprehension over a table), the configs are evaluated
    from the source's module-level literals instead."""
    at = fn.autotune
    if at is None:
        return []
    lit: list[dict[str, Any]] = []
    complete = bool(at.configs) and not at.generated
    for c in at.configs:
        d = {k: v for k, v in c.kwargs.items() if v is not None}
        complete = complete and len(d) == len(c.kwargs)
        for k in ("num_warps", "num_stages"):
            v = getattr(c, k)
            if isinstance(v, int):
                d[k] = v
            elif v is not None:
                complete = False
        lit.append(d)
    if complete or fn.lang != "py":
        return lit
    evald = facts.memo("moe:configs", lambda: eval_configs(facts))
    return evald.get(fn.name, []) or lit


def eval_configs(facts: Facts) -> dict[str, list[dict[str, Any]]]:
    try:
        tree = ast.parse(facts.text)
    except (SyntaxError, ValueError):
        return {}
    ev = Eval(tree)
    out: dict[str, list[dict[str, Any]]] = {}

    def configs_of(call: ast.Call) -> list[dict[str, Any]] | None:
        node = next((k.value for k in call.keywords if k.arg == "configs"), call.args[0] if call.args else None)
        if node is None:
            return None
        try:
            got = ev.ev(node, {})
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return None
        return [c for c in got if isinstance(c, dict)] if isinstance(got, list) else None

    def is_autotune(call: ast.AST) -> bool:
        return isinstance(call, ast.Call) and (
            (isinstance(call.func, ast.Attribute) and call.func.attr == "autotune")
            or (isinstance(call.func, ast.Name) and call.func.id == "autotune"))

    for st in tree.body:
        if isinstance(st, ast.FunctionDef):
            for d in st.decorator_list:
                if is_autotune(d):
                    got = configs_of(d)  # type: ignore[arg-type]
                    if got:
                        out.setdefault(st.name, got)
        elif isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            v = st.value
            if isinstance(v, ast.Call) and is_autotune(v.func):
                got = configs_of(v.func)  # type: ignore[arg-type]
                inner = [n.id for n in ast.walk(v) if isinstance(n, ast.Name) and n is not v.func]
                for n in inner:
                    if got:
                        out.setdefault(n, got)
    return out


def template_values(facts: Facts, fn: Function) -> dict[int, set[Any]]:
    """CUDA: template argument position -> the values its launches pass."""
    out: dict[int, set[Any]] = {}
    for la in facts.launches:
        if la.kernel != fn.key or not la.template:
            continue
        for i, t in enumerate(x.strip() for x in la.template.split(",")):
            try:
                out.setdefault(i, set()).add(int(t))
            except ValueError:
                out.setdefault(i, set()).add(t)
    return out


def launch_values(fl: Flow, fn: Function) -> list[dict[str, object]]:
    """Bindings of ``fn``'s compile-time parameters and ``num_warps`` at each launch (one per autotune config when
    the kernel is autotuned): parameter -> int, or None when not a compile-time constant there."""
    out: list[dict[str, object]] = []
    launches = fl.launches_of(fn)
    configs = fn.autotune.configs if fn.autotune else [None]
    for la in launches:
        caller = fl.facts.functions.get(la.caller)
        for cfg in configs:
            b: dict[str, object] = {}
            for p in fn.params:
                if cfg is not None and p in cfg.kwargs:
                    b[p] = cfg.kwargs[p] if isinstance(cfg.kwargs[p], int) else None
                    continue
                e = fl.launch_arg(la, fn, p)
                v = fl.fold(e, caller) if e is not None and caller is not None else None
                b[p] = v if isinstance(v, int) and not isinstance(v, bool) else None
            if cfg is not None and cfg.num_warps is not None:
                nw = cfg.num_warps
            elif "num_warps" in la.kwargs:
                nw = fl.fold(la.kwargs["num_warps"], caller) if caller is not None else None
            else:
                nw = 4  # Triton's default
            b["num_warps"] = nw if isinstance(nw, int) else None
            out.append(b)
    return out


def host_calls(fl: Flow, e: Expr, fn: Function, names: list[str]) -> Expr | None:
    for node, _, _ in fl.walk(e, fn, depth=6):
        if node.kind in ("call", "name", "attr") and (matches(node.op, names) or node.op.rsplit(".", 1)[-1] in names):
            return node
        if node.kind == "const" and isinstance(node.value, str) and node.value in names:
            return node
    return None


def arange_dims(fl: Flow, e: Expr, fn: Function) -> int:
    """Rank of the broadcast tile an address expression builds from ``tl.arange`` (``a[:, None] + b[None, :]`` ->
    2); 1 for a plain ``tl.arange``; 0 when there is none."""
    rank = 0
    for n, f, _ in fl.walk(e, fn, depth=4):
        if n.kind == "sub" and n.args:
            idx = n.args[1:]
            if len(idx) >= 2 and any(i.kind == "const" and i.value is None for i in idx):
                inner = n.args[0]
                if any(x.kind == "call" and x.op == "tl.arange" for x, _, _ in fl.walk(inner, f, depth=3)):
                    rank = max(rank, len(idx))
        elif n.kind == "call" and n.op == "tl.arange":
            rank = max(rank, 1)
        elif n.kind == "call" and n.op in ("tl.make_block_ptr", "tl.make_tensor_descriptor"):
            shape = n.kw("block_shape")
            if shape is not None and shape.kind == "tuple":
                rank = max(rank, len(shape.args))
    return rank


def param_values(fl: Flow, fn: Function, e: Expr) -> list[int | None]:
    """Compile-time values an arange size takes: folded, from launch arguments, autotune configs or heuristics."""
    e = fl.root(e, fn)
    v = fl.fold(e, fn)
    if isinstance(v, int):
        return [v]
    if e.kind != "name" or e.op not in fn.params:
        return [None]
    out: list[int | None] = []
    if fn.autotune:
        out += [c.kwargs.get(e.op) if isinstance(c.kwargs.get(e.op), int) else None for c in fn.autotune.configs
                if e.op in c.kwargs]
    for src, caller in fl.param_sources(fn, e.op):
        sv = fl.fold(src, caller)
        out.append(sv if isinstance(sv, int) else None)
    return out or [None]
