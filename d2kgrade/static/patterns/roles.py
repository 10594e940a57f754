"""Pointer roles: which kernel parameter carries an input of ``kernel(...)``, an output it returns, or a
workspace the host allocated, and the dtype of a host buffer.

The entry (``facts.functions["kernel"]``, the flattened host entry) is where roles are defined: its parameters
are the task's inputs and its return value holds the outputs. A kernel parameter takes a role when a launch passes
it that host tensor, through copies and views (``x.contiguous()``, ``y.view_as(x)``, ``x2 = x.reshape(-1, N)``).
"""

from __future__ import annotations

from d2kgrade.static.dataflow import Flow
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Call, Expr, Function, Launch
from d2kgrade.static.lower import DTYPES
from d2kgrade.static.patterns.access import element_value, loads_of_fn, strip_view
from d2kgrade.static.patterns.names import TENSOR_METHODS, VIEW_CALLS

VIEWS = {".contiguous", ".view", ".view_as", ".reshape", ".flatten", ".squeeze", ".unsqueeze", ".t", ".T",
         ".transpose", ".permute", ".expand", ".expand_as", ".narrow", ".as_strided", ".detach", ".data_ptr"}
"""Tensor methods whose result shares the receiver's storage (a view), as far as a role goes."""
ALLOCATORS = {"torch.empty", "torch.zeros", "torch.ones", "torch.full", "torch.empty_like", "torch.zeros_like",
              "torch.ones_like", "torch.full_like", "torch.empty_strided", ".new_empty", ".new_zeros", ".new_full"}


def tensor_root(fl: Flow, e: Expr, fn: Function, depth: int = 0) -> Expr:
    """The host expression a tensor expression is a view or copy of: names followed to their single definition,
    view methods to their receiver, subscripts (slices) to their base."""
    if depth > 8:
        return e
    if e.kind == "name":
        defs = fl.defs(e.op, fn)
        if len(defs) == 1 and defs[0].index is None and defs[0].value.kind != "other":
            inner = tensor_root(fl, defs[0].value, fn, depth + 1)
            return inner if inner.kind == "name" else e
        return e
    if e.kind == "call" and e.op in VIEWS and e.recv is not None:
        return tensor_root(fl, e.recv, fn, depth + 1)
    if e.kind == "sub" and e.args:
        return tensor_root(fl, e.args[0], fn, depth + 1)
    return e


def entry(fl: Flow) -> Function | None:
    """The entry ``kernel(...)`` (its flattened host copy), if the file has one."""
    f = fl.facts.functions.get("kernel")
    return f if f is not None and f.lang == "py" and not f.is_device else None


def returned_tensors(fl: Flow) -> set[str]:
    """Host names (roots) of the tensors ``kernel(...)`` returns."""
    fn = entry(fl)
    if fn is None:
        return set()
    out: set[str] = set()
    stack = list(fn.returns)
    seen = 0
    while stack and seen < 64:
        seen += 1
        e = stack.pop()
        if e.kind == "tuple" or (e.kind in ("ternary", "other") and e.op in ("", "returns")):
            stack.extend(e.args[1:] if e.kind == "ternary" else e.args)
            continue
        r = tensor_root(fl, e, fn)
        if r.kind == "name":
            defs = fl.defs(r.op, fn)
            if len(defs) == 1 and defs[0].value.kind in ("tuple", "ternary"):
                stack.append(defs[0].value)
            else:
                out.add(r.op)
    return out


def params_receiving(fl: Flow, kfn: Function, names: set[str]) -> set[str]:
    """Parameters of kernel ``kfn`` that some launch passes one of the host tensors ``names`` (roots)."""
    if not names:
        return set()
    out: set[str] = set()
    for la in fl.launches_of(kfn):
        caller = fl.facts.functions.get(la.caller)
        if caller is None:
            continue
        for p in kfn.params:
            arg = fl.launch_arg(la, kfn, p)
            if arg is not None:
                r = tensor_root(fl, arg, caller)
                if r.kind == "name" and r.op in names:
                    out.add(p)
    return out


def launch_tensors(fl: Flow, la: Launch, params: set[str]) -> dict[str, str]:
    """For each parameter in ``params``, the host tensor (root name) a launch passes for it: two launches that
    pass the same tensor, even through different helpers' parameters, give the same name."""
    k = fl.facts.functions.get(la.kernel)
    caller = fl.facts.functions.get(la.caller)
    out: dict[str, str] = {}
    if k is None:
        return out
    for p in params:
        e = fl.launch_arg(la, k, p)
        n = next((x for x in e.walk() if x.kind == "name"), None) if e is not None else None
        if n is not None:
            root = tensor_root(fl, n, caller) if caller is not None else n
            out[p] = root.op if root.kind == "name" else n.op
    return out


def output_params(fl: Flow, kfn: Function) -> set[str]:
    """Parameters of kernel ``kfn`` that receive a tensor ``kernel(...)`` returns."""
    return params_receiving(fl, kfn, returned_tensors(fl))


def input_params(fl: Flow, kfn: Function) -> set[str]:
    """Parameters of kernel ``kfn`` that receive an input of ``kernel(...)``."""
    fn = entry(fl)
    return params_receiving(fl, kfn, set(fn.params) if fn is not None else set())


def buffer_dtype(fl: Flow, kfn: Function, param: str) -> str | None:
    """The dtype (``fp32``, ``bf16``...) of the host buffer a launch passes for ``param`` when it is allocated in
    the file with an explicit dtype; ``same_as_input`` when allocated with an input's dtype (``dtype=x.dtype``,
    ``torch.empty_like(x)``); None when unknown."""
    for la in fl.launches_of(kfn):
        caller = fl.facts.functions.get(la.caller)
        arg = fl.launch_arg(la, kfn, param) if caller is not None else None
        if arg is None or caller is None:
            continue
        r = tensor_root(fl, arg, caller)
        defs = fl.defs(r.op, caller) if r.kind == "name" else []
        value = defs[0].value if len(defs) == 1 else r
        if value.kind != "call" or value.op not in ALLOCATORS:
            continue
        dt = value.kw("dtype")
        if dt is None:
            if value.op.endswith("_like") and value.args:
                return _dtype_of_tensor(fl, value.args[0], caller)
            return None
        if dt.kind == "name" and dt.op.rsplit(".", 1)[-1] in DTYPES:
            return DTYPES[dt.op.rsplit(".", 1)[-1]]
        if dt.kind == "attr" and dt.op == "dtype" and dt.recv is not None:
            return _dtype_of_tensor(fl, dt.recv, caller)
    return None


def _dtype_of_tensor(fl: Flow, e: Expr, fn: Function) -> str | None:
    r = tensor_root(fl, e, fn)
    ent = entry(fl)
    if r.kind == "name" and ent is not None and fn is ent and r.op in ent.params:
        return "same_as_input"
    return None


def entry_function(facts: Facts) -> Function | None:
    """The function whose parameters are the submission's inputs: ``kernel`` (Python), else the launching C++ host
    function of a ``.cu`` file."""
    k = facts.functions.get("kernel")
    if k is not None:
        return k
    hosts = [f for f in facts.hosts("cuda") if f.launches]
    return hosts[0] if hosts else None


def tensor_roots(fl: Flow, e: Expr, fn: Function, depth: int = 0,
                  seen: set[int] | None = None) -> list[tuple[Function, str, frozenset[str]]]:
    """Host parameters whose tensor ``e`` is (through copies, ``.contiguous()``, casts, descriptors...), with the
    tensor methods applied on the way."""
    seen = seen if seen is not None else set()
    if depth > 12 or id(e) in seen:
        return []
    seen.add(id(e))
    k = e.kind
    out: list[tuple[Function, str, frozenset[str]]] = []
    if k == "name":
        if e.op in fn.params:
            return [(fn, e.op, frozenset())]
        for a in fl.defs(e.op, fn):
            v = a.value
            if a.index is not None and v.kind == "tuple" and a.index < len(v.args):
                v = v.args[a.index]
            out += tensor_roots(fl, v, fn, depth + 1, seen)
        return out
    if k == "call":
        if e.recv is not None and (e.op in TENSOR_METHODS):
            return [(f, p, ms | {e.op}) for f, p, ms in tensor_roots(fl, e.recv, fn, depth + 1, seen)]
        if e.op.endswith("from_tensor") or e.op in ("reinterpret_cast", "static_cast", "torch.as_strided") \
                or e.op.endswith(".contiguous") or e.op.split(".")[-1] == "TensorDescriptor":
            first = e.args[0] if e.args else None
            return tensor_roots(fl, first, fn, depth + 1, seen) if first is not None else []
        return []
    if k == "attr" and e.op in ("T", "mT") and e.recv is not None:
        return [(f, p, ms | {".T"}) for f, p, ms in tensor_roots(fl, e.recv, fn, depth + 1, seen)]
    if k == "cast" and e.args:
        return tensor_roots(fl, e.args[0], fn, depth + 1, seen)
    if k == "ternary" and len(e.args) == 3:
        return tensor_roots(fl, e.args[1], fn, depth + 1, seen) + tensor_roots(fl, e.args[2], fn, depth + 1, seen)
    return out


def input_of(fl: Flow, facts: Facts, f: Function, p: str, depth: int = 0) -> list[tuple[int, frozenset[str]]]:
    """Which input(s) of the entry a host parameter ``p`` of ``f`` carries, with the tensor methods applied."""
    entry = entry_function(facts)
    if entry is None or depth > 4:
        return []
    if f is entry:
        return [(entry.params.index(p), frozenset())] if p in entry.params else []
    out: list[tuple[int, frozenset[str]]] = []
    srcs = [(src, caller) for src, caller in fl.param_sources(f, p)]
    if f.lang == "cuda" and not f.is_device:  # a C++ host function called from Python as ext.name(...)
        for py in facts.hosts("py"):
            for c in py.calls:
                if c.expr.recv is not None and c.name == "." + f.name and p in f.params:
                    i = f.params.index(p)
                    if i < len(c.expr.args):
                        srcs.append((c.expr.args[i], py))
    for src, caller in srcs:
        for g, q, ms in tensor_roots(fl, src, caller):
            out += [(i, ms | m2) for i, m2 in input_of(fl, facts, g, q, depth + 1)]
    return out


def input_params_with_methods(fl: Flow, facts: Facts, fn: Function, index: int) -> dict[str, frozenset[str]]:
    """Parameters of kernel ``fn`` that receive input ``index`` of the submission -> tensor methods applied on the
    host on the way (``{".t", ".contiguous"}`` for a transposed copy)."""
    key = f"gemm-inputs:{fn.key}:{index}"

    def compute() -> dict[str, frozenset[str]]:
        out: dict[str, frozenset[str]] = {}
        for p in fn.params:
            if p in fn.constexprs:
                continue
            for src, caller in fl.param_sources(fn, p):
                for g, q, ms in tensor_roots(fl, src, caller):
                    for i, m2 in input_of(fl, facts, g, q):
                        if i == index:
                            out[p] = out.get(p, frozenset()) | ms | m2
        return out

    return facts.memo(key, compute)


def is_entry_input(fl: Flow, e: Expr, fn: Function, target: str, depth: int = 0) -> bool:
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
            return any(is_entry_input(fl, src, caller, target, depth + 1) for src, caller in fl.param_sources(fn, e.op))
        return any(is_entry_input(fl, d.value, fn, target, depth + 1) for d in fl.defs(e.op, fn)
                   if d.index is None and not (d.value.kind == "other"))
    if k == "call" and (e.op in VIEW_CALLS or (e.op.startswith(".data_ptr"))):
        base = e.recv if e.recv is not None else (e.args[-1] if e.args else None)
        return base is not None and is_entry_input(fl, base, fn, target, depth + 1)
    if k in ("sub", "cast") and e.args:
        return is_entry_input(fl, e.args[0], fn, target, depth + 1)
    return False


def entry_params(fl: Flow, facts: Facts, fn: Function, input_index: int) -> set[str]:
    """Parameters of kernel ``fn`` that receive input number ``input_index`` of ``kernel(...)`` or a view of it
    (followed from the launches through host helpers, and through a ``load_inline`` module's C++ host function)."""
    entry = facts.functions.get("kernel")
    if entry is None or input_index >= len(entry.params):
        return set()
    target = entry.params[input_index]
    return {p for p in fn.params if (fn.lang != "cuda" or p in fn.pointer_params)
            and any(is_entry_input(fl, src, caller, target) for src, caller in fl.param_sources(fn, p))}


def python_callers(fl: Flow, fn: Function) -> list[tuple[Expr, Function]]:
    """Where a C++ host function of a ``load_inline`` source is called from Python (``mod.f(...)``)."""
    out = []
    for h in fl.facts.hosts("py"):
        for c in h.calls:
            if c.expr.recv is not None and c.name == "." + fn.name:
                out.append((c.expr, h))
    return out


def is_input_view(fl: Flow, e: Expr, fn: Function, target: str, seen: set[int], depth: int = 0) -> bool:
    """Is host expression ``e`` (in ``fn``) the entry's input ``target`` or a view of it?"""
    if depth > 8:
        return False
    e = strip_view(e)
    if e.kind == "sub" and e.args and fn.lang == "py":  # x[b], x[:, s:e]: a slice of the input on the host
        return is_input_view(fl, e.args[0], fn, target, seen, depth + 1)
    if e.kind == "call" and len(e.args) == 1 and _view_helper(fl, e.op, fn):  # bf(x): a lambda returning a view
        return is_input_view(fl, e.args[0], fn, target, seen, depth + 1)
    if e.kind != "name":
        return False
    entry = fl.facts.functions.get("kernel")
    defs = fl.defs(e.op, fn) if fn.lang == "py" else fn.defs().get(e.op, [])
    for a in defs:
        if id(a) in seen:
            continue
        seen.add(id(a))
        v = element_value(a)
        if v is None:
            v = a.value if a.index is None else None
        if v is None:
            continue
        inner = strip_view(v)
        if inner.kind == "name" and inner.op == e.op and e.op in fn.params:
            if param_is_input(fl, fn, e.op, target, entry, seen, depth):
                return True
            continue
        if is_input_view(fl, v, fn, target, seen, depth + 1):
            return True
    if e.op in fn.params and not any(strip_view(element_value(a) or a.value).op != e.op for a in defs):
        return param_is_input(fl, fn, e.op, target, entry, seen, depth)
    return False


def _view_helper(fl: Flow, name: str, fn: Function) -> bool:
    """Is ``name`` a one-parameter helper of the file (a C++ lambda such as ``auto bf = [](torch::Tensor t) {
    return reinterpret_cast<const bf16*>(t.data_ptr<at::BFloat16>()); }``) whose every return is a view of that
    parameter?"""
    h = fl.facts.functions.get(("cu:" if fn.lang == "cuda" else "") + name)
    if h is None or len(h.params) != 1 or not h.returns:
        return False
    return all(strip_view(r).kind == "name" and strip_view(r).op == h.params[0] for r in h.returns)


def param_is_input(fl: Flow, fn: Function, param: str, target: str, entry: Function | None, seen: set[int],
                    depth: int) -> bool:
    if fn is entry:
        return param == target
    sites = list(fl.call_sites(fn)) if fn.lang == "py" else python_callers(fl, fn)
    for call, caller in sites:
        arg = fl.bind_arg(call.args, call.kwargs, fn, param, caller)
        if arg is not None and is_input_view(fl, arg, caller, target, seen, depth + 1):
            return True
    return False


def input_params_of(fl: Flow, kfn: Function, inputs: list[int]) -> set[str]:
    """Parameters of kernel ``kfn`` that receive one of the entry's ``inputs`` (by position) at some launch."""
    entry = fl.facts.functions.get("kernel")
    if entry is None:
        return set()
    names = [entry.params[i] for i in inputs if 0 <= i < len(entry.params)]
    key = f"scan_conv.inputs:{kfn.key}:{names}"

    def compute() -> set[str]:
        out: set[str] = set()
        for la in fl.launches_of(kfn):
            caller = fl.facts.functions.get(la.caller)
            if caller is None:
                continue
            for p in kfn.params:
                arg = fl.launch_arg(la, kfn, p)
                if arg is not None and any(is_input_view(fl, arg, caller, t, set()) for t in names):
                    out.add(p)
        return out

    return fl.facts.memo(key, compute)


def input_loads(fl: Flow, fn: Function, inputs: list[int]) -> list[Call]:
    params = input_params_of(fl, fn, inputs)
    return [c for c, b in loads_of_fn(fl, fn) if b & params]
