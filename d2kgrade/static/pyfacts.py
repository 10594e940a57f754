"""Facts from a Python file: Triton kernels, host code, launches, autotune configs, ``load_inline`` sources.

Reachability starts at ``kernel(...)`` (and module-level code, which runs at import) and follows: calls to
module functions, nested functions and class methods (``Cls.apply`` -> ``Cls.forward``); names passed as
arguments (``torch.compile(f)``); launches ``k[grid](...)`` where ``k`` is a jit function or a local name bound
to one (``k = _a if c else _b``); jit functions called from jit functions; attribute calls ``mod.f(...)`` where
``f`` is a host function of a CUDA source handed to a reachable ``load_inline``; and, inside CUDA, calls and
``<<<...>>>`` launches.
"""

from __future__ import annotations

import ast
import logging
import math
from typing import Any

from d2kgrade.static.entry import _binds_kernel, live_binding
from d2kgrade.static.facts import Facts
from d2kgrade.static.host import HostInliner, entry_function
from d2kgrade.static.ir import (
    COMPUTED,
    LAUNCH_ALIAS,
    Assign,
    Autotune,
    AutotuneConfig,
    Expr,
    Function,
    InlineSource,
    Launch,
)
from d2kgrade.static.lower import Lowerer
from d2kgrade.static.siblings import add_siblings

log = logging.getLogger(__name__)

JIT_DECORATORS = {"triton.jit", "tl.jit", "jit", "triton.runtime.jit.jit"}
AUTOTUNE = {"triton.autotune", "autotune", "triton.runtime.autotuner.autotune"}
HEURISTICS = {"triton.heuristics", "heuristics", "triton.runtime.autotuner.heuristics"}
LOAD_INLINE = {"cpp_extension.load_inline", "load_inline", "torch.utils.cpp_extension.load_inline"}
FOREIGN_DSLS = ("cutlass", "tilelang", "numba", "cupy", "pycuda", "warp", "helion", "thunderkittens", "mojo")
MODULE_KEY = "<module>"
_BLOCKS = {t for t in vars(ast).values() if isinstance(t, type) and issubclass(t, (ast.stmt, ast.excepthandler))
           and any(f in getattr(t, "_fields", ()) for f in ("body", "orelse", "finalbody", "handlers"))}
"""Statement types with nested statement lists (def, class, if, for, while, with, try, except...)."""


def _is_main_guard(st: ast.stmt) -> bool:
    t = getattr(st, "test", None)
    return (isinstance(st, ast.If) and isinstance(t, ast.Compare) and isinstance(t.left, ast.Name)
            and t.left.id == "__name__")


def _fold(e: ast.expr, consts: dict[str, Any]) -> Any:
    """Value of a module-level constant expression (numbers, names of constants, + - * / **, math.*)."""
    if isinstance(e, ast.Constant):
        return e.value
    if isinstance(e, ast.Name):
        if e.id in consts:
            return consts[e.id]
        raise ValueError
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return -_fold(e.operand, consts)
    if isinstance(e, ast.BinOp):
        a, b = _fold(e.left, consts), _fold(e.right, consts)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b, ast.Div: lambda: a / b,
               ast.FloorDiv: lambda: a // b, ast.Pow: lambda: a ** b if abs(b) < 64 else None}
        fn = ops.get(type(e.op))
        if fn is None:
            raise ValueError
        return fn()
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "math":
        if e.attr in ("e", "pi", "inf"):
            return getattr(math, e.attr)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Name):
        mod, fn_name = e.func.value.id, e.func.attr
        args = [_fold(a, consts) for a in e.args]
        if mod == "math" and fn_name in ("log", "log2", "exp", "sqrt", "log10") and len(args) in (1, 2):
            return getattr(math, fn_name)(*args)
        if mod in ("tl", "triton") and fn_name == "constexpr" and len(args) == 1:
            return args[0]
    raise ValueError


def _literal(e: Expr | None) -> object:
    """A config field's literal value; COMPUTED when it is set from a variable (``num_stages=s`` in a loop)."""
    if e is None:
        return None
    return e.value if e.kind == "const" else COMPUTED


class PyExtractor:
    """Builds :class:`Facts` for one Python source."""

    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self.loop_ids = [0]
        self.classes: dict[str, list[str]] = {}
        self.aliases: dict[str, list[str]] = {}
        self.bases: dict[str, list[str]] = {}
        self.sibling_modules: list[str] = []
        """Keys of the module-level code of imported sibling modules (:mod:`d2kgrade.static.siblings`)."""

    # ------------------------------------------------------------------------------------------ module scan

    def run(self, tree: ast.Module, skip: tuple[ast.stmt, ...] = ()) -> None:
        """Scan the module; ``skip``: top-level statements left out of the module's own code (the assignments
        that bind ``kernel``, whose call is the flattened entry's business)."""
        facts = self.facts
        self._imports(tree)
        self._consts(tree)
        module = Function(MODULE_KEY, MODULE_KEY, "py", "host", [], 1, max(len(facts.lines), 1))
        facts.functions[MODULE_KEY] = module
        low = Lowerer(module, facts.imports, facts.consts, self.loop_ids)
        # the module's own code first: decorators read module-level names (autotune config lists built there)
        low.body([st for st in tree.body if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                                 ast.Import, ast.ImportFrom))
                  and not _is_main_guard(st) and not any(st is k for k in skip)])
        for st in tree.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._function(st, "")
            elif isinstance(st, ast.ClassDef):
                self._class(st)
        for nested in low.nested:
            self._function(nested, "")
        add_siblings(self, tree)
        self._module_aliases(module)

    def _imports(self, tree: ast.Module) -> None:
        imports = self.facts.imports
        stack: list[ast.stmt] = list(tree.body)
        nodes: list[ast.stmt] = []
        while stack:  # statements only: imports never hide inside expressions
            st = stack.pop()
            nodes.append(st)
            if type(st) not in _BLOCKS:  # simple statements hold no statements (no getattr on them: 2x faster)
                continue
            for field in ("body", "orelse", "finalbody", "handlers"):
                sub = getattr(st, field, None)
                if sub:  # lists of statements (handlers: of except clauses), as ast.parse builds them
                    stack.extend(sub)
        for node in nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        imports[a.asname] = a.name
                    else:
                        root = a.name.split(".")[0]
                        imports.setdefault(root, root)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    imports[a.asname or a.name] = f"{node.module}.{a.name}"
        for mod in imports.values():
            root = mod.split(".")[0]
            if root in FOREIGN_DSLS and not self.facts.foreign_dsl:
                self.facts.foreign_dsl = root

    def _consts(self, tree: ast.Module) -> None:
        consts = self.facts.consts
        body: list[ast.stmt] = []
        for st in tree.body:  # PRIVATE, GLOBAL = 0, 1: one assignment per name
            t = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else None
            if isinstance(t, ast.Tuple) and isinstance(st.value, ast.Tuple) and len(t.elts) == len(st.value.elts):
                body.extend(ast.Assign([x], v) for x, v in zip(t.elts, st.value.elts))
            else:
                body.append(st)
        for st in body:
            target, value = None, None
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                target, value = st.targets[0].id, st.value
            elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                target, value = st.target.id, st.value
            if target is None or value is None:
                continue
            try:
                v = _fold(value, consts)
            except (ValueError, TypeError, ZeroDivisionError, OverflowError, ArithmeticError):
                consts.pop(target, None)  # reassigned to something non-constant
                continue
            if isinstance(v, (int, float, bool, str)) or v is None:
                if isinstance(v, str) and len(v) > 200:
                    continue
                consts[target] = v

    def _class(self, st: ast.ClassDef) -> None:
        methods = []
        for sub in st.body:
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods.append(sub.name)
                self._function(sub, st.name + ".", method=True)
            elif isinstance(sub, (ast.Assign, ast.AnnAssign)):
                self._class_constant(st.name, sub)
        self.classes[st.name] = methods
        self.bases[st.name] = [b.id for b in st.bases if isinstance(b, ast.Name)]

    def _class_constant(self, cls: str, st: ast.Assign | ast.AnnAssign) -> None:
        """``BM, BN = 128, 256`` or ``TILE: int = 64`` in a class body: constants ``Cls.BM`` read as ``self.BM``."""
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        if st.value is None:
            return
        for t in targets:
            pairs = ([(t, st.value)] if isinstance(t, ast.Name) else
                     list(zip(t.elts, st.value.elts)) if isinstance(t, ast.Tuple) and isinstance(st.value, ast.Tuple)
                     and len(t.elts) == len(st.value.elts) else [])
            for name, value in pairs:
                if not isinstance(name, ast.Name):
                    continue
                try:
                    v = _fold(value, self.facts.consts)
                except (ValueError, TypeError, ZeroDivisionError, OverflowError, ArithmeticError):
                    continue
                if isinstance(v, (int, float, bool, str)) or v is None:
                    self.facts.consts[f"{cls}.{name.id}"] = v

    def _decorator(self, node: ast.expr) -> Expr:
        dummy = Function("<decorator>", "<decorator>", "py", "host", [], 0, 0)
        return Lowerer(dummy, self.facts.imports, self.facts.consts, self.loop_ids).expr(node)

    def _function(self, st: ast.FunctionDef | ast.AsyncFunctionDef, prefix: str, method: bool = False) -> None:
        key = prefix + (LAUNCH_ALIAS if st.name == "launch" and not method else st.name)
        if key in self.facts.functions:  # a second def of one name (in another branch): the first one resolves
            key = f"{key}@{st.lineno}"
        a = st.args
        params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
        line = min([d.lineno for d in st.decorator_list] + [st.lineno])
        f = Function(key, st.name, "py", "host", params, line, st.end_lineno or st.lineno)
        f.vararg = a.vararg.arg if a.vararg is not None else ""
        f.kwarg = a.kwarg.arg if a.kwarg is not None else ""
        all_args = a.posonlyargs + a.args
        for p, d in zip(all_args[len(all_args) - len(a.defaults):], a.defaults):
            f.defaults[p.arg] = self._decorator(d)
        for p in a.posonlyargs + a.args + a.kwonlyargs:
            ann = p.annotation
            if ann is not None:
                if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
                    tail = ann.value.rsplit(".", 1)[-1]
                else:
                    tail = ann.attr if isinstance(ann, ast.Attribute) else ann.id if isinstance(ann, ast.Name) else ""
                if tail == "constexpr":
                    f.constexprs.add(p.arg)
        for dec in st.decorator_list:
            e = self._decorator(dec)
            name = e.op if e.kind in ("name", "call") else ""
            if name in JIT_DECORATORS:
                f.kind = "jit"
                if e.kind == "call":
                    dns = e.kw("do_not_specialize")
                    if dns is not None:
                        f.do_not_specialize = [str(x.value) if x.kind == "const" else x.op for x in dns.args]
            elif name in AUTOTUNE and e.kind == "call":
                f.autotune = self._autotune(e)
            elif name in HEURISTICS and e.kind == "call" and e.args and e.args[0].kwargs:
                f.heuristics = dict(e.args[0].kwargs)
        self.facts.functions[key] = f
        low = Lowerer(f, self.facts.imports, self.facts.consts, self.loop_ids)
        low.body(st.body)
        for nested in low.nested:
            self._function(nested, key + ".")

    def _autotune(self, e: Expr) -> Autotune:
        configs_e = e.kw("configs", 0)
        key_e = e.kw("key", 1)
        key = [str(k.value) for k in (key_e.args if key_e is not None else ()) if k.kind == "const"]
        generated = False
        exprs: list[Expr] = []
        visited: set[int] = set()

        def collect(x: Expr, depth: int) -> None:
            nonlocal generated
            if depth > 4 or id(x) in visited:
                return
            visited.add(id(x))
            for n in x.walk():
                if n.kind == "call" and n.op in ("triton.Config", "Config"):
                    exprs.append(n)
                elif n.kind == "other" and n.op == "comprehension":
                    generated = True
                elif n.kind == "name" and n.op not in self.facts.consts:
                    for v in self._module_values(n.op):
                        collect(v, depth + 1)
                    for v in self._module_appends(n.op):  # CONFIGS.append(triton.Config(...)) in a loop
                        generated = True
                        collect(v, depth + 1)
                elif n.kind == "call" and n.recv is None and n.op in self.facts.functions:
                    generated = True
                    g = self.facts.functions[n.op]
                    # configs returned, assigned, or appended (out.append(triton.Config(...))) in a helper
                    for v in g.returns + [a.value for a in g.assigns] + [c.expr for c in g.calls]:
                        collect(v, depth + 1)

        if configs_e is not None:
            collect(configs_e, 0)
        seen_ids: set[int] = set()
        exprs = [c for c in exprs if not (id(c) in seen_ids or seen_ids.add(id(c)))]  # type: ignore[func-returns-value]
        configs = []
        for c in exprs:
            meta = c.kw("kwargs", 0)
            kw: dict[str, object] = {}
            if meta is not None and meta.kwargs:
                kw = {k: (v.value if v.kind == "const" else None) for k, v in meta.kwargs.items()}
            nw, ns = c.kw("num_warps"), c.kw("num_stages")
            configs.append(AutotuneConfig(kw, _literal(nw), _literal(ns), c.line))
        return Autotune(configs, key, generated, e.line, e.end_line)

    def _module_values(self, name: str) -> list[Expr]:
        for key in [MODULE_KEY, *self.sibling_modules]:
            module = self.facts.functions.get(key)
            if module is not None and module.defs().get(name):
                return [a.value for a in module.defs()[name]]
        return []

    def _module_appends(self, name: str) -> list[Expr]:
        """What module-level code appends to (or extends) a module-level list ``name``."""
        out: list[Expr] = []
        for key in [MODULE_KEY, *self.sibling_modules]:
            module = self.facts.functions.get(key)
            for c in module.calls if module is not None else []:
                r = c.expr.recv
                if c.name in (".append", ".extend", ".insert") and r is not None and r.kind == "name" and r.op == name:
                    out.extend(c.expr.args)
        return out

    def _module_aliases(self, module: Function) -> None:
        """``k = triton.jit(fn)``, ``k = triton.autotune(...)(triton.heuristics(...)(fn))`` and ``kernel = fn`` at
        module level: the decorators apply to ``fn`` and the name becomes an alias of it."""
        funcs = self.facts.functions
        for a in module.assigns:
            if len(a.targets) != 1:
                continue
            v = a.value
            decorators: list[Expr] = []
            while v.kind == "call":
                if v.op == "<dynamic>" and v.recv is not None and v.recv.kind == "call" and v.args:
                    decorators.append(v.recv)  # deco(...)(fn)
                    v = v.args[0]
                elif v.op in JIT_DECORATORS and v.args:
                    decorators.append(v)  # triton.jit(fn)
                    v = v.args[0]
                else:
                    break
            names = [e.op for e in v.walk() if e.kind == "name" and e.op in funcs]
            if not names:
                continue
            self.aliases.setdefault(a.targets[0], []).extend(names)
            # `_tuned = triton.autotune(...)(_k)` never read: its configs and heuristics do not apply to `_k`
            used = not decorators or self._name_read(a.targets[0], a)
            for n in names:
                f = funcs[n]
                for d in decorators:
                    if d.op in JIT_DECORATORS:
                        f.kind = "jit"
                    elif not used:
                        continue
                    elif d.op in AUTOTUNE and f.autotune is None:
                        f.autotune = self._autotune(d)
                    elif d.op in HEURISTICS and d.args and d.args[0].kwargs:
                        f.heuristics.update(d.args[0].kwargs)

    def _name_read(self, name: str, skip: Assign) -> bool:
        """Is ``name`` read anywhere in the file but the module-level assignment ``skip`` that defines it?"""
        for f in self.facts.functions.values():
            exprs = [c.expr for c in f.calls] + list(f.returns) + [g for c in f.calls for g in c.guards]
            exprs += [a.value for a in f.assigns if a is not skip] + [g for a in f.assigns for g in a.guards]
            exprs += [e for lp in f.loops for e in (lp.start, lp.stop, lp.step) if e is not None]
            if any(n.kind == "name" and n.op == name for e in exprs for n in e.walk()):
                return True
        return False

    # ------------------------------------------------------------------------------------------ reachability

    def resolve(self, name: str, scope: str) -> list[str]:
        """Function keys a bare name denotes inside function ``scope``."""
        funcs = self.facts.functions
        parts = scope.split(".") if scope and scope != MODULE_KEY else []
        while parts:
            cand = ".".join(parts) + "." + name
            if cand in funcs:
                return [cand]
            parts.pop()
        if name in funcs:
            return [name]
        if name in self.aliases:
            return [k for k in self.aliases[name] if k in funcs]
        if "." in name:
            cls, _, meth = name.rpartition(".")
            if cls in self.classes:
                if meth == "apply" and "forward" in self.classes[cls]:
                    return [f"{cls}.forward"]
                if meth in self.classes[cls]:
                    return [f"{cls}.{meth}"]
        if name in self.classes:  # instantiating a class runs __init__; calling it later runs __call__
            return [f"{name}.{m}" for m in ("__init__", "__call__", "forward") if m in self.classes[name]]
        return []

    def _targets(self, e: Expr, f: Function, depth: int = 0) -> list[str]:
        """Function keys an expression may denote (following local and module assignments); ``TABLE[key]`` with a
        constant key and a dict literal ``TABLE`` denotes only that entry."""
        picked = self._dict_entry(e, f)
        if picked is not None:
            return self._targets(picked, f, depth + 1) if depth < 4 else []
        out: list[str] = []
        for x in e.walk():
            if x.kind == "name":
                got = self.resolve(x.op, f.key)
                if got:
                    out.extend(got)
                elif depth < 3:
                    for a in f.defs().get(x.op, []) + (self.facts.functions[MODULE_KEY].defs().get(x.op, [])
                                                     if f.key != MODULE_KEY else []):
                        out.extend(self._targets(a.value, f, depth + 1))
            elif x.kind == "attr" and x.recv is not None and x.recv.kind == "name" and x.recv.op == "self":
                cls = f.key.split(".")[0]
                out.extend(self.resolve(f"{cls}.{x.op}", ""))
        return out

    def _dict_entry(self, e: Expr, f: Function) -> Expr | None:
        """The entry of a dict literal that ``TABLE[key]`` selects when the key folds to a string, else None."""
        if e.kind != "sub" or len(e.args) != 2:
            return None
        key = self._const_str(e.args[1], f, 0)
        if key is None:
            return None
        for table in self._values_of(e.args[0], f, 0):
            if table.kind == "tuple" and table.op == "dict" and table.kwargs and key in table.kwargs:
                return table.kwargs[key]
        return None

    def _values_of(self, e: Expr, f: Function, depth: int) -> list[Expr]:
        if e.kind != "name" or depth > 4:
            return [e]
        defs = f.defs().get(e.op) or (self.facts.functions[MODULE_KEY].defs().get(e.op, []) if f.key != MODULE_KEY
                                      else [])
        if len(defs) != 1:
            return [e] if not defs else []
        return self._values_of(defs[0].value, f, depth + 1)

    def _const_str(self, e: Expr, f: Function, depth: int) -> str | None:
        vals = self._values_of(e, f, depth)
        if len(vals) == 1 and vals[0].kind == "const" and isinstance(vals[0].value, str):
            return vals[0].value
        return None

    def edges(self, f: Function, cuda_hosts: dict[str, str]) -> list[str]:
        """Functions that ``f`` can transfer control to (calls, launches, names passed along)."""
        out: list[str] = []
        for c in f.calls:
            e = c.expr
            if c.name == "launch":
                if e.recv is not None:
                    out.extend(self._targets(e.recv, f))
                continue
            if e.recv is None:
                out.extend(self.resolve(c.name, f.key))
            elif e.recv.kind == "name" and e.recv.op == "self":
                out.extend(self.resolve(f"{f.key.split('.')[0]}.{c.name[1:]}", ""))
            elif e.recv.kind == "name" and e.recv.op in self.classes:
                out.extend(self.resolve(e.recv.op + c.name, ""))
            if c.name.startswith(".") and c.name[1:] in cuda_hosts:
                out.append(cuda_hosts[c.name[1:]])
            elif "." in c.name and c.name.rsplit(".", 1)[-1] in cuda_hosts and e.recv is None:
                out.append(cuda_hosts[c.name.rsplit(".", 1)[-1]])
            if f.kind != "jit":
                for arg in list(e.args) + list((e.kwargs or {}).values()):
                    if arg.kind == "name":
                        out.extend(k for k in self.resolve(arg.op, f.key) if self.facts.functions[k].kind != "jit")
        for d in f.heuristics.values():
            out.extend(self._targets(d, f))
        return out

    def reach(self, roots: list[str], cuda_hosts: dict[str, str], cuda_edges: Any) -> set[str]:
        seen: set[str] = set()
        stack = list(roots)
        funcs = self.facts.functions
        while stack:
            k = stack.pop()
            if k in seen or k not in funcs:
                continue
            seen.add(k)
            f = funcs[k]
            stack.extend(self.edges(f, cuda_hosts) if f.lang == "py" else cuda_edges(f))
        return seen

    def load_inline_sources(self, reachable: set[str]) -> list[tuple[InlineSource, str]]:
        """Source strings handed to ``load_inline`` calls in reachable Python code."""
        out: list[tuple[InlineSource, str]] = []
        seen: set[tuple[int, int]] = set()  # a helper's call and its copy in the flattened entry: one source
        funcs = self.facts.functions
        for key in sorted(reachable):
            f = funcs[key]
            if f.lang != "py":
                continue
            for c in f.calls:
                if c.name not in LOAD_INLINE and not c.name.endswith(".load_inline"):
                    continue
                fn_list = c.expr.kw("functions", 3)
                names = [str(x.value) for x in (fn_list.walk() if fn_list is not None else ()) if
                         x.kind == "const" and isinstance(x.value, str)]
                for kind, pos in (("cpp_sources", 1), ("cuda_sources", 2)):
                    src = c.expr.kw(kind, pos)
                    if src is None:
                        continue
                    for text_node in self._string_pieces(src, f, 0):
                        if (text_node.line, id(text_node.value)) in seen:
                            continue
                        seen.add((text_node.line, id(text_node.value)))
                        out.append((InlineSource(str(text_node.value), text_node.line, kind, names), key))
        return out

    def _string_pieces(self, e: Expr, f: Function, depth: int) -> list[Expr]:
        if depth > 6:
            return []
        if e.kind == "const":
            return [e] if isinstance(e.value, str) else []
        if e.kind in ("tuple", "bin"):
            return [p for a in e.args for p in self._string_pieces(a, f, depth + 1)]
        if e.kind == "call":  # textwrap.dedent(s), s.strip(), "".join([...])
            parts = [p for a in e.args for p in self._string_pieces(a, f, depth + 1)]
            if e.recv is not None:
                parts += self._string_pieces(e.recv, f, depth + 1)
            return parts
        if e.kind == "name":
            vals = [a.value for a in f.defs().get(e.op, [])]
            if not vals:
                vals = self._module_values(e.op)
            return [p for v in vals for p in self._string_pieces(v, f, depth + 1)]
        return []

    def launch_order(self, root: str) -> list[Launch]:
        """Launches in execution order: host calls followed in source order, each function once."""
        funcs = self.facts.functions
        out: list[Launch] = []
        visited: set[str] = set()

        def visit(key: str) -> None:
            if key in visited or key not in funcs:
                return
            visited.add(key)
            f = funcs[key]
            if f.is_device:
                return
            if f.inlined:  # the flattened entry: its calls are in execution order already
                by_args = {id(la.args): la for la in f.launches}
                events: list[tuple[int, int, Any]] = [
                    (i, 0, by_args[id(c.expr.args)]) if c.name == "launch" and id(c.expr.args) in by_args
                    else (i, 1, c) for i, c in enumerate(f.calls)]
                events = [ev for ev in events if ev[1] == 0 or ev[2].name != "launch"]
            else:
                events = [(la.line, 0, la) for la in f.launches]
                for c in f.calls:
                    if c.name != "launch":
                        events.append((c.line, 1, c))
                events.sort(key=lambda t: (t[0], t[1]))
            for _, kind, ev in events:
                if kind == 0:
                    targets = [ev.kernel] if ev.kernel in funcs else self._launch_targets(f, ev)
                    for t in targets:
                        out.append(Launch(t, ev.grid, ev.args, ev.kwargs, ev.caller, ev.line, ev.end_line,
                                          ev.block, ev.template, target=ev.target))
                else:
                    for t in self._call_targets(f, ev):
                        visit(t)

        visit(MODULE_KEY)
        visit(root)
        return out

    def _launch_targets(self, f: Function, la: Launch) -> list[str]:
        if f.lang == "cuda":
            return [la.kernel] if la.kernel in self.facts.functions else []
        if la.target is not None:
            return [k for k in self._targets(la.target, f) if self.facts.functions[k].kind == "jit"]
        for c in f.calls:
            if c.name == "launch" and c.line == la.line and c.expr.recv is not None:
                return [k for k in self._targets(c.expr.recv, f) if self.facts.functions[k].kind == "jit"]
        return []

    def _call_targets(self, f: Function, c: Any) -> list[str]:
        if f.lang == "cuda":
            k = "cu:" + c.name
            return [k] if k in self.facts.functions else []
        recv = c.expr.recv
        if recv is None and c.name in self.classes:  # instantiation runs __init__ (a later call of it, __call__)
            out = [f"{c.name}.__init__"] if "__init__" in self.classes[c.name] else []
        elif recv is None:
            out = self.resolve(c.name, f.key)
        elif recv.kind == "name" and recv.op == "self":
            out = self.resolve(f"{f.key.split('.')[0]}.{c.name[1:]}", "")
        elif recv.kind == "name" and recv.op in self.classes:
            out = self.resolve(recv.op + c.name, "")
        else:
            out = []
        if c.name.startswith("."):
            k = "cu:" + c.name[1:]
            if k in self.facts.functions:
                out.append(k)
        return out


def extract_python(facts: Facts) -> None:
    """Fill ``facts`` from its Python text (errors go to ``facts.errors``)."""
    from d2kgrade.static.cudafacts import add_cuda_source, cuda_edges
    from d2kgrade.static.inline import inline_kernels

    try:
        tree = ast.parse(facts.text, filename=facts.path)
    except SyntaxError as exc:
        facts.errors.append(f"Python syntax error at line {exc.lineno}: {exc.msg}")
        return
    except (ValueError, RecursionError, MemoryError) as exc:
        facts.errors.append(f"Python source cannot be parsed: {type(exc).__name__}: {str(exc)[:120]}")
        return
    binding = live_binding(tree)
    skip = tuple(st for st in tree.body if isinstance(st, (ast.Assign, ast.AnnAssign)) and _binds_kernel(st))
    ex = PyExtractor(facts)
    ex.run(tree, skip)
    funcs = facts.functions
    roots = [MODULE_KEY]
    if binding is None:
        facts.errors.append("defines no kernel(...) function, so no code is reachable from the entry point")
        return
    aliased = [k for k in ex.aliases.get("kernel", []) if funcs[k].kind == "jit"]
    expanded: set[str] = set()
    if binding.value is not None and aliased:  # kernel = some_jit_function: the jit function is the root
        roots.extend(aliased)
    else:
        entry = entry_function(ex, binding)
        if isinstance(entry, str):
            facts.errors.append(entry)
            return
        old = funcs.get("kernel")
        if old is not None and old is not entry:  # an earlier def kernel that the live binding replaced
            del funcs["kernel"]
            old.key = f"kernel@{old.line}"
            funcs[old.key] = old
        host = HostInliner(ex)
        flat = host.flatten(entry)
        funcs["kernel"] = flat
        roots.append("kernel")
        expanded = host.expanded - {entry.key}
    roots[1:1] = ex.sibling_modules  # an imported module's code runs at import (the entry stays last)
    facts.roots = roots
    reachable = ex.reach(roots, {}, cuda_edges(facts)) | expanded
    # CUDA sources enter through reachable load_inline calls; then their host functions become callable.
    for src, _caller in ex.load_inline_sources(reachable):
        facts.inline_sources.append(src)
        add_cuda_source(facts, src.text, src.line - 1, len(facts.inline_sources))
    if facts.errors:
        return
    cuda_hosts = {f.name: k for k, f in funcs.items() if f.lang == "cuda" and f.kind == "cpp"}
    facts.reachable = ((ex.reach(roots, cuda_hosts, cuda_edges(facts)) | expanded) if facts.inline_sources
                       else reachable)
    facts.launches = ex.launch_order(roots[-1])
    inline_kernels(facts)
    unresolved = [la.line for f in facts.hosts("py") for la in f.launches
                  if not ex._launch_targets(f, la)]
    if unresolved:
        facts.notes.append(f"launch target not resolved at line(s) {unresolved[:5]}")
