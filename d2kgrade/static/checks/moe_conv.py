"""Checks for segmented work (MoE expert GEMMs, expert permutations) and implicit-GEMM convolutions.

Segmented kernels: which segment (expert) a program works on is looked up from loaded data rather than being
the program id (``segment_lookup``), destinations are looked up per loaded key (``keyed_destination``), experts
are counted on chip (``onchip_histogram``), configurations follow the rows per segment (``host_config_choice``,
``gather_tile_sizes``). Convolutions: the operand gathered from the input feeds the MMA (``dot_operand_from``),
its channels are the contiguous inner index (``gather_inner_contiguous``), the tile's pixels are decomposed once
before the reduction loop (``tile_index_decomposition``), and that loop does no run-time division
(``loop_index_math_free``).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from d2kgrade.static.checks.memory import _unit_arange, vector_access
from d2kgrade.static.checks.values import branch_on_loaded
from d2kgrade.static.checkutil import code, span
from d2kgrade.static.dataflow import LOADS, REDUCTIONS, Flow, flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function, Launch, Loop
from d2kgrade.static.registry import CheckResult, Span, check, found, missing

DOTS = {"tl.dot", "tl.dot_scaled"}
MMAS = {"wmma::mma_sync", "mma_sync", "nvcuda::wmma::mma_sync"}
ATOMICS = {"tl.atomic_add", "tl.atomic_cas", "tl.atomic_xchg", "tl.atomic_max", "tl.atomic_min", "tl.atomic_or",
           "tl.atomic_and", "tl.atomic_xor", "atomicAdd", "atomicInc", "atomicCAS", "atomicExch", "atomicMax",
           "atomicMin", "atomicOr", "atomicAnd", "atomicSub", "atomicAdd_block", "atomicAdd_system"}
_ORDER = {"<", "<=", ">", ">="}


# ------------------------------------------------------------------------------------------------ helpers


def _address(c: Call) -> Expr | None:
    """The address of a load/store: the pointer, or a descriptor access's coordinates."""
    if c.name.startswith("."):
        return c.expr.args[0] if c.expr.args else None
    return c.expr.kw("pointer", 0)


def _is_load(n: Expr, fn: Function) -> bool:
    return n.kind == "call" and ((n.op in LOADS and n.op != "tl.atomic_add")
                                 or (n.op in (".load", ".gather") and fn.kind == "jit"))


def _loads_in(fl: Flow, e: Expr, fn: Function, depth: int = 5) -> list[Expr]:
    """Load calls of ``fn`` that ``e`` (expanded through definitions) reads."""
    return [n for n, f, _ in fl.walk(e, fn, depth=depth) if f is fn and _is_load(n, fn)]


def _guard_loaded(fl: Flow, fn: Function, name: str) -> bool:
    """Is some definition of ``name`` made under an ``if`` that compares a loaded value (a binary search step:
    ``if (starts[mid] <= tile) lo = mid;``)?"""
    for d in fn.defs().get(name, []):
        for g in d.guards:
            cond = g.args[0] if g.kind == "unary" and g.op == "not" and g.args else g
            if any(n.kind == "cmp" for n in cond.walk()) and _loads_in(fl, cond, fn, depth=3):
                return True
    return False


def _data_dependent(fl: Flow, e: Expr, fn: Function) -> Expr | None:
    """A load that ``e`` depends on, by value or through the guard of a definition it reads, if any."""
    for n, f, _ in fl.walk(e, fn, depth=6):
        if f is not fn:
            continue
        if _is_load(n, fn):
            return n
        if n.kind == "name" and _guard_loaded(fl, fn, n.op):
            return n
    return None


def _gathers(fl: Flow, fn: Function) -> dict[int, Call]:
    """Loads whose address depends on loaded data (``offsets[ids[i]]``), by id of their call expression."""
    return fl.facts.memo("moe:gathers:" + fn.key, lambda: _compute_gathers(fl, fn))


def _compute_gathers(fl: Flow, fn: Function) -> dict[int, Call]:
    out: dict[int, Call] = {}
    for kind, c, _ in fl.memory_ops(fn):
        addr = _address(c) if kind == "load" else None
        if addr is None:
            continue
        if any(n is not c.expr for n in _loads_in(fl, addr, fn, depth=4)):
            out[id(c.expr)] = c
    return out


_VIEWS = {".contiguous", ".view", ".reshape", ".permute", ".transpose", ".t", ".flatten", ".to", ".float", ".half",
          ".bfloat16", ".data_ptr", ".detach", ".expand", ".unsqueeze", ".squeeze", ".view_as", ".as_strided",
          "reinterpret_cast", "static_cast", "const_cast", "cast", ".narrow", ".select"}


def _is_input(fl: Flow, e: Expr, fn: Function, target: str, depth: int = 0) -> bool:
    """Is ``e`` (in ``fn``) input ``target`` of ``kernel(...)`` itself or a view of it (``x.contiguous()``,
    ``w.reshape(K, -1)``, ``reinterpret_cast<const T*>(x.data_ptr())``, a slice), followed through local
    definitions and up through the parameters of host helpers to the entry point? A new tensor that only takes the
    input's dtype or device (``torch.empty(..., dtype=x.dtype)``) is not the input."""
    if depth > 10:
        return False
    k = e.kind
    if k == "name":
        if fn.key == "kernel":
            if e.op == target:
                return True
        if e.op in fn.params:
            return any(_is_input(fl, src, caller, target, depth + 1) for src, caller in fl.param_sources(fn, e.op))
        return any(_is_input(fl, d.value, fn, target, depth + 1) for d in fl.defs(e.op, fn)
                   if d.index is None and not (d.value.kind == "other"))
    if k == "call" and (e.op in _VIEWS or (e.op.startswith(".data_ptr"))):
        base = e.recv if e.recv is not None else (e.args[-1] if e.args else None)
        return base is not None and _is_input(fl, base, fn, target, depth + 1)
    if k in ("sub", "cast") and e.args:
        return _is_input(fl, e.args[0], fn, target, depth + 1)
    return False


def _entry_params(fl: Flow, facts: Facts, fn: Function, input_index: int) -> set[str]:
    """Parameters of kernel ``fn`` that receive input number ``input_index`` of ``kernel(...)`` or a view of it
    (followed from the launches through host helpers, and through a ``load_inline`` module's C++ host function)."""
    entry = facts.functions.get("kernel")
    if entry is None or input_index >= len(entry.params):
        return set()
    target = entry.params[input_index]
    return {p for p in fn.params if (fn.lang != "cuda" or p in fn.pointer_params)
            and any(_is_input(fl, src, caller, target) for src, caller in fl.param_sources(fn, p))}


def _pid_loop_vars(fl: Flow, fn: Function) -> set[str]:
    return {lp.var for lp in fn.loops if lp.var and lp.start is not None and fl.pid_derived(lp.start, fn)}


def _reduction_loops(fl: Flow, fn: Function) -> list[Loop]:
    """The outermost loops holding a tl.dot / MMA, else the outermost loops carrying an accumulator."""
    ids: set[int] = set()
    for c in fn.calls:
        if (c.name in DOTS or c.name in MMAS or c.name.endswith("mma_sync")) and c.loops:
            ids.add(c.loops[0])
    if not ids:
        for lid, by_var in fl.carried(fn).items():
            if any(u.aug == "+" or (u.value.kind == "bin" and u.value.op == "+") for ups in by_var.values()
                   for u in ups):
                lp = fn.loop(lid)
                while lp is not None and lp.parent is not None:
                    lp = fn.loop(lp.parent)
                if lp is not None:
                    ids.add(lp.id)
    return [lp for lp in fn.loops if lp.id in ids]


def _runtime_divs(fl: Flow, e: Expr, fn: Function, cuda_slash: bool) -> list[Expr]:
    """``//``/``%`` (and C ``/``) nodes of ``e`` whose divisor is a run-time value."""
    ops = ("//", "%", "/") if cuda_slash else ("//", "%")
    return [n for n in e.walk() if n.kind == "bin" and n.op in ops and len(n.args) == 2
            and fl.fold(n.args[1], fn) is None and not fl.is_constexpr(n.args[1], fn)
            and n.args[1].kind in ("name", "bin", "call", "cast")]


def _has_arange(fl: Flow, e: Expr, fn: Function) -> bool:
    return any(n.kind == "call" and n.op == "tl.arange" for n, f, _ in fl.walk(e, fn, depth=6) if f is fn)


def _has_thread(fl: Flow, e: Expr, fn: Function) -> bool:
    return any(n.kind == "name" and n.op.startswith("threadIdx") for n, f, _ in fl.walk(e, fn, depth=6) if f is fn)


# ------------------------------------------------------------------------------------------------ host values


def _local_host(fl: Flow, e: Expr, fn: Function) -> Function | None:
    if e.kind != "call" or e.recv is not None:
        return None
    g = fl.callee(e.op, fn)
    return g if g is not None and not g.is_device and g is not fn else None


def _host_values(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> set[Any]:
    """Constant values a host expression may take: literals, constants, every definition of a name, both arms
    of a conditional expression, every return of a local function (a tuple element for ``a, b = f()``)."""
    if depth > 6:
        return set()
    v = fl.fold(e, fn)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return {v}
    if e.kind == "ternary" and len(e.args) == 3:
        return _host_values(fl, e.args[1], fn, depth + 1) | _host_values(fl, e.args[2], fn, depth + 1)
    if e.kind == "other" and e.op == "returns":  # a host helper's several returns, inlined
        return set().union(*(_host_values(fl, r, fn, depth + 1) for r in e.args))
    if e.kind == "name":
        out: set[Any] = set()
        for d in fl.defs(e.op, fn):
            g = _local_host(fl, d.value, fn)
            if d.index is not None and g is not None:
                for r in g.returns:
                    if r.kind == "tuple" and r.op != "dict" and d.index < len(r.args):
                        out |= _host_values(fl, r.args[d.index], g, depth + 1)
            else:
                out |= _host_values(fl, d.value, fn, depth + 1)
        return out
    g = _local_host(fl, e, fn)
    if g is not None:
        out = set()
        for r in g.returns:
            out |= _host_values(fl, r, g, depth + 1)
        return out
    return set()


def _dict_returns(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> list[tuple[Expr, Function]]:
    """The dict literals (``dict(...)``, ``{...}``) a ``**name`` argument may stand for, through local functions."""
    if depth > 4:
        return []
    if (e.kind == "call" and e.op == "dict") or (e.kind == "tuple" and e.op == "dict"):
        return [(e, fn)]
    if e.kind == "ternary" and len(e.args) == 3:  # a host helper's if-chain of returns, inlined
        return _dict_returns(fl, e.args[1], fn, depth + 1) + _dict_returns(fl, e.args[2], fn, depth + 1)
    if e.kind == "name":
        out = []
        for d in fl.defs(e.op, fn):
            out += _dict_returns(fl, d.value, fn, depth + 1)
        return out
    g = _local_host(fl, e, fn)
    if g is not None:
        out = []
        for r in g.returns:
            out += _dict_returns(fl, r, g, depth + 1)
        return out
    return []


def _launch_param(fl: Flow, la: Launch, fn: Function, p: str) -> list[tuple[Expr, Function, Expr]]:
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
            for d, g in _dict_returns(fl, v, caller):
                if d.kwargs and p in d.kwargs:
                    out.append((d.kwargs[p], g, v))
    return out


def _quotient(fl: Flow, e: Expr, fn: Function, depth: int = 0, seen: set[int] | None = None) -> Expr | None:
    """A quotient of two run-time values (``T // E``, ``T / E``) that host expression ``e`` depends on, through
    definitions and the local functions it calls (whose bodies decide what they return)."""
    seen = seen if seen is not None else set()
    if depth > 6 or id(e) in seen:
        return None
    seen.add(id(e))
    for n in e.walk():
        if n.kind == "bin" and n.op in ("//", "/") and len(n.args) == 2 and all(
                fl.fold(x, fn) is None and x.kind != "const" for x in n.args):
            return n
        if n.kind == "name":
            for d in fl.defs(n.op, fn):
                hit = _quotient(fl, d.value, fn, depth + 1, seen)
                if hit is not None:
                    return hit
        g = _local_host(fl, n, fn)
        if g is not None:
            for x in [a.value for a in g.assigns] + list(g.returns):
                hit = _quotient(fl, x, g, depth + 1, seen)
                if hit is not None:
                    return hit
    return None


def _launch_guards(facts: Facts, la: Launch) -> tuple[Expr, ...]:
    caller = facts.functions.get(la.caller)
    for c in (caller.calls if caller is not None else []):
        if c.name == "launch" and c.line == la.line:
            return c.guards
    return ()


# ------------------------------------------------------------------------------------------------ autotune configs


_CONFIG_CALLS = {"Config", "triton.Config"}


class _Eval:
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


def _configs(facts: Facts, fn: Function) -> list[dict[str, Any]]:
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
    evald = facts.memo("moe:configs", lambda: _eval_configs(facts))
    return evald.get(fn.name, []) or lit


def _eval_configs(facts: Facts) -> dict[str, list[dict[str, Any]]]:
    try:
        tree = ast.parse(facts.text)
    except (SyntaxError, ValueError):
        return {}
    ev = _Eval(tree)
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


def _template_values(facts: Facts, fn: Function) -> dict[int, set[Any]]:
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


def _param_values(fl: Flow, facts: Facts, fn: Function, p: str) -> set[Any]:
    """Values a Triton meta-parameter takes: autotune configs, heuristics aside, and host choices at launches."""
    vals = {c[p] for c in _configs(facts, fn) if p in c}
    for la in fl.launches_of(fn):
        for e, g, _ in _launch_param(fl, la, fn, p):
            vals |= _host_values(fl, e, g)
    return vals


# ------------------------------------------------------------------------------------------------ segments


@check("segment_lookup")
def segment_lookup(facts: Facts, lang: str, *, input_index: int = 1) -> CheckResult:
    """The segment (expert) whose data a program reads from input ``input_index`` of ``kernel(...)`` is found
    through loaded data: the address of that input's loads depends on a search of loaded boundaries (``e =
    tl.sum(tile_end <= t)``, a binary search ``if (starts[mid] <= tile) lo = mid``) or on a loaded tile table
    (``e = tl.load(tile_expert + pid)``), not on the program id alone: a flattened (segment, tile) schedule in
    which empty segments own no tiles."""
    fl = flow(facts)
    for fn in code(facts, lang):
        targets = _entry_params(fl, facts, fn, input_index)
        if not targets:
            continue
        for kind, c, bases in fl.memory_ops(fn):
            if kind != "load" or not (bases & targets):
                continue
            addr = _address(c)
            if addr is None:
                continue
            src = _data_dependent(fl, addr, fn)
            if src is not None:
                return found(f"{fn.name} reads {'/'.join(sorted(bases & targets))} at a segment found from loaded "
                             f"data", [span(c, "segment-indexed load"), span(src, "loaded boundaries / table")], 0.8)
    return missing(f"no load of input {input_index} addressed by a segment looked up from loaded data "
                   "(the segment is the program id, or comes from the host)", confidence=0.75)


@check("skips_empty_segments")
def skips_empty_segments(facts: Facts, lang: str, *, input_index: int = 1) -> CheckResult:
    """Programs do no work for empty segments: segments are looked up through loaded boundaries (empty ones own
    no tiles, ``segment_lookup``) or a kernel branches on loaded segment bounds (``if rows_e > 0:``)."""
    r = segment_lookup(facts, lang, input_index=input_index)
    if r.passed:
        return found("empty segments own no tiles: " + r.reason, r.evidence, 0.75)
    b = branch_on_loaded(facts, lang)
    if b.passed:
        return found("a kernel branches on loaded bounds: " + b.reason, b.evidence, 0.7)
    return missing("segments are neither looked up from loaded bounds nor skipped by a branch on them",
                   confidence=0.7)


@check("gather_tile_sizes")
def gather_tile_sizes(facts: Facts, lang: str, *, small: int | None = None) -> CheckResult:
    """The tile of a data-dependent gather (rows addressed from loaded offsets: ``rows = o_e + m*BM +
    tl.arange(0, BM)``) is sized per problem: its ``tl.arange`` size parameter takes at least two values across
    autotune configs, host choices and launches (CUDA: a template argument of the gathering kernel). With
    ``small``, one of the values is at most ``small`` rows (a decode tile) and another is larger."""
    fl = flow(facts)

    def ok(vals: set[Any]) -> bool:
        nums = {v for v in vals if isinstance(v, int)}
        if small is None:
            return len(vals) >= 2
        return bool(nums) and min(nums) <= small < max(nums)

    want = f"a value <= {small} and a larger one" if small is not None else "several values"
    for fn in code(facts, lang):
        gathers = _gathers(fl, fn)
        if not gathers:
            continue
        if fn.lang == "cuda":
            for pos, vals in _template_values(facts, fn).items():
                if ok(vals):
                    return found(f"{fn.name}: template argument {pos + 1} takes {sorted(vals, key=str)}",
                                 span(next(iter(gathers.values())), "gather"), 0.7)
            continue
        params: set[str] = set()
        for c in gathers.values():  # rows = o_e + m*BM + tl.arange(0, BM): the arange added to loaded offsets
            addr = _address(c)
            for n, f, _ in fl.walk(addr, fn, depth=6) if addr is not None else ():
                if f is not fn or n.kind != "bin" or n.op != "+" or len(n.args) != 2:
                    continue
                for a, b in (n.args, n.args[::-1]):
                    if _broadcast(a) or fl.bases(b, fn):
                        continue  # a column index of a 2-D tile, or an offset added to a pointer
                    ar = _unit_arange(fl, a, fn)
                    if ar is None or len(ar.args) != 2 or _data_dependent(fl, b, fn) is None:
                        continue
                    r = fl.root(ar.args[1], fn)
                    if r.kind == "name" and r.op in fn.constexprs:
                        params.add(r.op)
        for p in sorted(params):
            vals = _param_values(fl, facts, fn, p)
            if ok(vals):
                return found(f"{fn.name}: gathered tile {p} takes {sorted(vals, key=str)}",
                             span(next(iter(gathers.values())), "gathered rows"), 0.75)
    return missing(f"no gathered tile whose size takes {want}", confidence=0.7)


@check("host_config_choice")
def host_config_choice(facts: Facts, lang: str, *, min_params: int = 2, ratio: bool = False) -> CheckResult:
    """Launch meta-parameters (block sizes, ``num_warps``, ``num_stages``, CUDA template arguments) are chosen per
    problem: at least ``min_params`` of them take different values under host choices (a config function, an
    if/else, a conditional expression, template instantiations in branches), or in autotune configs keyed on
    the problem. ``ratio``: the choice depends on a quotient of two run-time sizes (``T // E``, rows per expert;
    an autotune key computed from one), not on one size alone."""
    fl = flow(facts)
    best = 0
    for key in facts.launched():
        fn = facts.functions[key]
        if lang != "any" and (fn.lang == "py") != (lang == "triton"):
            continue
        if fn.lang == "cuda":
            tv = _template_values(facts, fn)
            varying = [p for p, v in tv.items() if len(v) >= 2]
            best = max(best, len(varying))
            if len(varying) >= min_params:
                las = [la for la in fl.launches_of(fn) if la.template]
                q = None
                for la in las:
                    for g in _launch_guards(facts, la):
                        caller = facts.functions.get(la.caller)
                        q = q or (_quotient(fl, g, caller) if caller is not None else None)
                if not ratio or q is not None:
                    return found(f"{fn.name} instantiated with {len(varying)} varying template arguments"
                                 + (" under a branch on a size ratio" if ratio else ""),
                                 [span(la, f"<{la.template}>") for la in las[:3]], 0.75)
            continue
        at = fn.autotune
        cfgs = _configs(facts, fn)
        if at is not None and at.key and cfgs:
            fields = {k for c in cfgs for k in c}
            varying = [k for k in fields if len({str(c.get(k)) for c in cfgs}) >= 2]
            best = max(best, len(varying))
            if len(varying) >= min_params:
                if not ratio:
                    return found(f"{fn.name} autotuned over {sorted(varying)} keyed on {at.key}",
                                 Span(at.line, at.end_line, "configs"), 0.8)
                for la in fl.launches_of(fn):
                    for k in at.key:
                        for e, g, site in _launch_param(fl, la, fn, k):
                            q = _quotient(fl, site, facts.functions[la.caller]) or _quotient(fl, e, g)
                            if q is not None:
                                return found(f"{fn.name} autotuned over {sorted(varying)} keyed on {k}, a size "
                                             "ratio", [Span(at.line, at.end_line, "configs"), span(q, "ratio")], 0.8)
        params = sorted(fn.constexprs) + ["num_warps", "num_stages"]
        varying_p: list[str] = []
        quot: Expr | None = None
        for p in params:
            vals: set[Any] = set()
            sites = []
            for la in fl.launches_of(fn):
                for e, g, site in _launch_param(fl, la, fn, p):
                    vals |= _host_values(fl, e, g)
                    sites.append((la, site))
            if len(vals) >= 2:
                varying_p.append(p)
                for la, site in sites:
                    caller = facts.functions.get(la.caller)
                    if caller is None:
                        continue
                    quot = quot or _quotient(fl, site, caller)
                    for g in _launch_guards(facts, la):
                        quot = quot or _quotient(fl, g, caller)
        best = max(best, len(varying_p))
        if len(varying_p) >= min_params and (not ratio or quot is not None):
            las = fl.launches_of(fn)
            return found(f"{fn.name}: {', '.join(varying_p)} chosen on the host"
                         + (" from a size ratio" if ratio else ""),
                         [span(la, "launch") for la in las[:2]] + ([span(quot, "ratio")] if quot is not None else []),
                         0.75)
    return missing(f"fewer than {min_params} launch parameters chosen per problem"
                   + (" from a size ratio" if ratio else "") + f" (best: {best})", confidence=0.7)


# ------------------------------------------------------------------------------------------------ permutations


@check("keyed_destination")
def keyed_destination(facts: Facts, lang: str) -> CheckResult:
    """A store's address, or a stored index, is computed from a value gathered by a loaded key (``dest =
    offsets[e] + base[block, e] + rank`` with ``e = ids[i]``): each item's destination is looked up per key, as
    in a counting sort's scatter, instead of coming from the program id or a sort. A stored value that is itself
    a gathered load (a row copied through an index) does not count."""
    fl = flow(facts)
    for fn in code(facts, lang):
        gathers = _gathers(fl, fn)
        if not gathers:
            continue
        for kind, c, _ in fl.memory_ops(fn):
            if kind != "store":
                continue
            addr = _address(c)
            hit = None
            if addr is not None:
                hit = next((n for n, f, _ in fl.walk(addr, fn, depth=5) if f is fn and id(n) in gathers), None)
            val = fl.stored_value(c)
            if hit is None and val is not None and _bare_load(fl, val, fn) is None:
                hit = next((n for n, f, _ in fl.walk(val, fn, depth=5) if f is fn and id(n) in gathers), None)
            if hit is not None:
                return found(f"{fn.name} stores at (or stores) a destination looked up by a loaded key",
                             [span(c, "keyed store"), span(hit, "offset of the key")], 0.8)
    return missing("no store whose destination is looked up by a loaded key", confidence=0.75)


def _bare_load(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> Expr | None:
    """The load whose value ``e`` passes on unchanged (casts, broadcasts, reshapes and names aside), if any."""
    if depth > 4:
        return None
    if _is_load(e, fn):
        return e
    if e.kind == "cast" and e.args:
        return _bare_load(fl, e.args[0], fn, depth + 1)
    if e.kind == "call" and e.op in (".to", "tl.broadcast_to", "tl.reshape", "tl.cast", "tl.expand_dims") and (
            e.recv is not None or e.args):
        return _bare_load(fl, e.recv if e.recv is not None else e.args[0], fn, depth + 1)
    if e.kind == "sub" and e.args:
        return _bare_load(fl, e.args[0], fn, depth + 1)
    if e.kind == "name":
        defs = fl.defs(e.op, fn)
        got = [_bare_load(fl, d.value, fn, depth + 1) for d in defs]
        return got[0] if got and all(g is not None for g in got) else None
    return None


def _broadcast(e: Expr) -> bool:
    return any((n.kind == "call" and n.op in ("tl.broadcast_to", "tl.expand_dims")) or
               (n.kind == "sub" and any(x.kind == "const" and x.value is None for x in n.args[1:])) for n in e.walk())


@check("row_copy")
def row_copy(facts: Facts, lang: str, *, input_index: int = 1) -> CheckResult:
    """Rows of input ``input_index`` are copied in contiguous chunks (a unit-stride ``tl.arange`` innermost) and
    read once: by programs that own destination rows and gather their source row through a loaded index, or by
    programs that own source rows, load a chunk once and store it to several loaded destinations (stores in a
    loop inside the load's, or one broadcast ``[k, BLOCK]`` tile). A program per (row, copy) that re-reads its
    row, an element-wise copy with per-element index math, or a copy made in PyTorch does not count."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        targets = _entry_params(fl, facts, fn, input_index)
        if not targets:
            continue
        gathers = _gathers(fl, fn)
        mem = fl.memory_ops(fn)
        rows = {id(c.expr): c for kind, c, b in mem if kind == "load" and b & targets
                and c.expr.kw("pointer", 0) is not None and _unit_arange(fl, c.expr.kw("pointer", 0), fn) is not None}
        if not rows:
            continue
        for kind, c, _ in mem:
            if kind != "store":
                continue
            val = fl.stored_value(c)
            src = _bare_load(fl, val, fn) if val is not None else None
            ld = rows.get(id(src)) if src is not None else None
            if ld is None:
                continue
            if id(ld.expr) in gathers:
                return found(f"{fn.name} gathers each destination row's source through a loaded index",
                             [span(ld, "gathered row"), span(c, "row store")], 0.75)
            addr = _address(c)
            if addr is None or _data_dependent(fl, addr, fn) is None:
                continue
            inner = len(c.loops) > len(ld.loops) and c.loops[:len(ld.loops)] == ld.loops
            if inner or _broadcast(val):
                return found(f"{fn.name} loads each row chunk once and stores it to its destinations",
                             [span(ld, "row chunk loaded once"), span(c, "stored to each destination")], 0.75)
    return missing(f"no contiguous copy of input {input_index} rows that reads each row once", confidence=0.7)


@check("global_atomic")
def global_atomic(facts: Facts, lang: str) -> CheckResult:
    """An atomic read-modify-write on global memory (``tl.atomic_*``, ``atomicAdd`` on a pointer parameter);
    atomics on ``__shared__`` buffers do not count. Usually negated: counts and ranks taken without contention."""
    fl = flow(facts)
    for fn in code(facts, lang):
        for c in fn.calls:
            if c.name not in ATOMICS:
                continue
            if fn.lang == "cuda":
                ptr = c.expr.args[0] if c.expr.args else None
                if ptr is None or not fl.bases(ptr, fn):
                    continue
            return found(f"global atomic {c.name} in {fn.name}", span(c, "global atomic"), 0.85)
    return missing("no atomic on global memory", confidence=0.85)


def _onehot(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> Expr | None:
    """The ``==`` of loaded keys with an ``arange`` that ``e`` is, up to casts, masks and products."""
    if depth > 6:
        return None
    k = e.kind
    if k == "cmp" and e.op == "==" and len(e.args) == 2:
        a, b = e.args
        for x, y in ((a, b), (b, a)):
            if _has_arange(fl, x, fn) and _loads_in(fl, y, fn, depth=6):
                return e
        return None
    if k == "cast" and e.args:
        return _onehot(fl, e.args[0], fn, depth + 1)
    if k == "call" and e.op in (".to", "tl.cast") and (e.recv is not None or e.args):
        return _onehot(fl, e.recv if e.recv is not None else e.args[0], fn, depth + 1)
    if k == "sub" and e.args:
        return _onehot(fl, e.args[0], fn, depth + 1)
    if k == "bin" and e.op in ("&", "*") and len(e.args) == 2:
        return _onehot(fl, e.args[0], fn, depth + 1) or _onehot(fl, e.args[1], fn, depth + 1)
    if k == "name":
        for d in fl.defs(e.op, fn):
            hit = _onehot(fl, d.value, fn, depth + 1)
            if hit is not None:
                return hit
    return None


@check("onchip_histogram")
def onchip_histogram(facts: Facts, lang: str) -> CheckResult:
    """Keys are counted on chip and the counts stored: a ``tl.histogram`` of the block's keys, or a ``tl.sum`` of
    a one-hot comparison of loaded keys with an ``arange`` of bins; in CUDA a counter carried by a loop over a
    ``__shared__`` buffer, or ``__shared__`` bins updated by atomics, written to global memory."""
    fl = flow(facts)
    for fn in code(facts, lang):
        shared = {b.name for b in facts.shared if b.func == fn.key}
        for kind, c, _ in fl.memory_ops(fn):
            if kind != "store":
                continue
            val = fl.stored_value(c)
            if val is None:
                continue
            for n, f, _ in fl.walk(val, fn, depth=5):
                if f is not fn:
                    continue
                if n.kind == "call" and n.op == "tl.histogram":
                    return found(f"{fn.name} stores a tl.histogram of its keys", [span(c, "counts"), span(n, "bins")],
                                 0.85)
                if n.kind == "call" and n.op == "tl.sum" and n.args and _onehot(fl, n.args[0], fn) is not None:
                    return found(f"{fn.name} stores one-hot counts of its keys", [span(c, "counts"),
                                                                                   span(n, "one-hot sum")], 0.8)
                if fn.lang == "cuda" and n.kind == "name" and shared and _shared_count(fl, fn, n.op, shared):
                    return found(f"{fn.name} stores a count taken over shared memory", span(c, "counts"), 0.7)
        if fn.lang == "cuda" and shared:
            for c in fn.calls:
                if c.name in ATOMICS and c.expr.args and not fl.bases(c.expr.args[0], fn) and \
                        c.expr.args[0].names() & shared:
                    return found(f"{fn.name} counts with shared-memory atomics", span(c, "shared atomic"), 0.75)
    return missing("no on-chip count of keys stored (tl.histogram, one-hot sum, shared-memory counting)",
                   confidence=0.75)


def _shared_count(fl: Flow, fn: Function, name: str, shared: set[str]) -> bool:
    """Is ``name`` a counter incremented in a loop whose test or body reads a ``__shared__`` buffer?"""
    for lid, by_var in fl.carried(fn).items():
        for u in by_var.get(name, []):
            reads = set(u.value.names())
            for g in u.guards:
                reads |= g.names()
            if reads & shared:
                return True
    return False


@check("register_topk")
def register_topk(facts: Facts, lang: str) -> CheckResult:
    """Top-k selected in registers: k rounds of an arg-max in which, inside a loop, a carried tile is reduced to
    its maximum (or arg-max) and the winner is masked out of it for the next round (``x = tl.where(cols == idx,
    -inf, x)`` with ``idx`` from ``tl.argmax(x)``, or from ``tl.max`` then the smallest matching index), or
    ``tl.topk`` (on packed value/index keys). A general sort (``tl.sort``) does not count."""
    fl = flow(facts)
    for fn in code(facts, "triton" if lang == "any" else lang):
        for c in fn.calls:
            if c.name == "tl.topk":
                return found(f"tl.topk in {fn.name}", span(c, "register top-k"), 0.75)
        for lid, by_var in fl.carried(fn).items():
            loop = fn.loop(lid)
            for var, ups in by_var.items():
                for u in ups:
                    v = u.value
                    if not (v.kind == "call" and v.op == "tl.where" and len(v.args) == 3):
                        continue
                    for n, f, _ in fl.walk(v.args[0], fn, within=loop, depth=5):
                        if f is fn and n.kind == "call" and n.op in ("tl.argmax", "tl.max", "tl.argmin", "tl.min") \
                                and n.args and fl.refs(n.args[0], fn, var, within=loop):
                            return found(f"{fn.name}: {var} reduced by {n.op} and its winner masked each round",
                                         [span(u.value, "mask the winner"), span(n, "arg-max")], 0.8)
    return missing("no loop that takes an arg-max of a carried tile and masks the winner", confidence=0.75)


# ------------------------------------------------------------------------------------------------ convolutions


@check("dot_operand_from")
def dot_operand_from(facts: Facts, lang: str, *, input_index: int = 0) -> CheckResult:
    """An operand of a ``tl.dot`` is loaded, in the same kernel, from input ``input_index`` of ``kernel(...)``:
    the MMA reads tiles gathered from that input itself, not from an intermediate buffer (an im2col matrix, a
    padded copy made by another kernel)."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        targets = _entry_params(fl, facts, fn, input_index)
        if not targets:
            continue
        for c in fn.calls:
            if c.name not in DOTS:
                continue
            for arg in c.expr.args[:2]:
                for n in _loads_in(fl, arg, fn, depth=4):
                    ptr = n.kw("pointer", 0) if not n.op.startswith(".") else n.recv
                    if ptr is not None and fl.bases(ptr, fn) & targets:
                        return found(f"tl.dot in {fn.name} reads tiles loaded from {'/'.join(sorted(targets))}",
                                     [span(c, "MMA"), span(n, "load of the input")], 0.8)
    return missing(f"no tl.dot operand loaded from input {input_index} itself", confidence=0.75)


@check("gather_inner_contiguous")
def gather_inner_contiguous(facts: Facts, lang: str, *, input_index: int = 0) -> CheckResult:
    """Inside a loop, loads of input ``input_index`` have a unit-stride ``tl.arange`` as their innermost index
    (``x + row_base[:, None] + (tap + c0 + tl.arange(0, BK))[None, :]``): the reduction steps through contiguous
    channel chunks, not through a flat index split per element (``c = k % C``)."""
    fl = flow(facts)
    for fn in code(facts, "triton"):
        targets = _entry_params(fl, facts, fn, input_index)
        for kind, c, bases in fl.memory_ops(fn):
            if kind != "load" or not c.loops or not (bases & targets):
                continue
            ptr = c.expr.kw("pointer", 0)
            if ptr is None:
                continue
            ar = _unit_arange(fl, ptr, fn)
            if ar is not None:
                return found(f"{fn.name} loads {'/'.join(sorted(bases & targets))} in contiguous chunks in its loop",
                             [span(c, "contiguous gather"), span(ar, "innermost index")], 0.75)
    return missing(f"no loop load of input {input_index} with a unit-stride innermost index", confidence=0.7)


@check("wide_copy")
def wide_copy(facts: Facts, lang: str) -> CheckResult:
    """Reachable CUDA code moves 16 bytes per access: 128-bit vector types (``uint4``, ``float4``...) or 16-byte
    asynchronous copies (``cp.async ... 16``, ``__pipeline_memcpy_async(dst, src, 16)``), which need 16-byte
    aligned rows (C % 8 == 0 for bf16)."""
    v = vector_access(facts, lang)
    if v.passed:
        return v
    for t in facts.reachable_tokens("asm"):
        if "cp.async" in t.text and re.search(r"\b16\b", t.text):
            return found("16-byte cp.async copies", Span(t.line, t.end_line, "cp.async 16"), 0.8)
    fl = flow(facts)
    for fn in code(facts, "cuda"):
        for c in fn.calls:
            if c.name in ("__pipeline_memcpy_async", "cuda::memcpy_async", "memcpy_async") and c.expr.args and \
                    fl.fold(c.expr.args[-1], fn) == 16:
                return found("16-byte asynchronous copies", span(c, "16-byte copy"), 0.8)
    return missing("no 128-bit vector accesses or 16-byte asynchronous copies", confidence=0.75)


@check("tile_index_decomposition")
def tile_index_decomposition(facts: Facts, lang: str) -> CheckResult:
    """The program's tile of output positions (program id times the block plus an ``arange``; in CUDA a
    ``blockIdx``-derived per-thread index) is split with ``//``/``%`` by run-time sizes (pixel -> (n, p, q))
    before the reduction loop (the loop holding the MMA or the carried accumulator), the results are read inside
    that loop, and the loop does not split such a tile index again."""
    fl = flow(facts)
    for fn in code(facts, lang):
        cuda = fn.lang == "cuda"
        red = _reduction_loops(fl, fn)
        if not red:
            continue
        ids = {lp.id for lp in red}
        inside = [a for a in fn.assigns if ids & set(a.loops)]
        inside_calls = [c for c in fn.calls if ids & set(c.loops)]

        def tile_index(e: Expr) -> bool:
            return fl.pid_derived(e, fn) and (_has_thread(fl, e, fn) if cuda else _has_arange(fl, e, fn))

        redone = [a for a in inside for d in _runtime_divs(fl, a.value, fn, cuda) if tile_index(d.args[0])]
        if redone:
            continue
        for a in fn.assigns:
            if ids & set(a.loops):
                continue
            divs = [d for d in _runtime_divs(fl, a.value, fn, cuda) if tile_index(d.args[0])]
            if not divs:
                continue
            users = [x for x in inside if any(fl.refs(x.value, fn, t) for t in a.targets)]
            users += [c for c in inside_calls if any(fl.refs(c.expr, fn, t) for t in a.targets)]
            if users:
                u = users[0]
                return found(f"{fn.name} splits its tile index into {', '.join(a.targets)} once, before the loop",
                             [Span(a.line, a.end_line, "decomposition"), Span(u.line, u.end_line, "used in the loop")],
                             0.75)
    return missing("no tile index split by run-time sizes once before the reduction loop", confidence=0.7)


@check("loop_index_math_free")
def loop_index_math_free(facts: Facts, lang: str, *, input_index: int = 0) -> CheckResult:
    """The reduction loop (the loop holding the MMA or the carried accumulator) reads input ``input_index`` with
    masked (predicated) loads and computes no ``//``/``%`` by a run-time value on per-element values (Triton:
    values built from an ``arange``; CUDA: any run-time division): coordinates advance incrementally and masks
    come from bases computed before the loop. Scalar counters stepped by comparison are fine."""
    fl = flow(facts)
    reason = "no reduction loop reading the input"
    for fn in code(facts, lang):
        cuda = fn.lang == "cuda"
        red = _reduction_loops(fl, fn)
        ids = {lp.id for lp in red}
        if not ids:
            continue
        if cuda:
            reads = any(ids & set(a.loops) and fl.bases(a.value, fn) for a in fn.assigns) or any(
                ids & set(c.loops) for kind, c, _ in fl.memory_ops(fn) if kind == "load")
        else:
            targets = _entry_params(fl, facts, fn, input_index)
            reads = any(kind == "load" and ids & set(c.loops) and (b & targets) and c.expr.kw("mask") is not None
                        for kind, c, b in fl.memory_ops(fn))
        if not reads:
            continue
        bad = None
        for a in fn.assigns:
            if not ids & set(a.loops):
                continue
            for d in _runtime_divs(fl, a.value, fn, cuda):
                if cuda or _has_arange(fl, d.args[0], fn):
                    bad = (a, d)
                    break
            if bad:
                break
        if bad is None:
            return found(f"the reduction loop of {fn.name} reads the input with predicated loads and no run-time "
                         "division", span(red[0], "division-free loop"), 0.75)
        reason = f"division/modulo by a run-time value inside the reduction loop of {fn.name}"
    return missing(reason, confidence=0.75)
