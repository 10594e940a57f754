"""Pointer roles: which kernel parameter carries an input of ``kernel(...)``, an output it returns, or a
workspace the host allocated, and the dtype of a host buffer.

The entry (``facts.functions["kernel"]``, the flattened host entry) is where roles are defined: its parameters
are the task's inputs and its return value holds the outputs. A kernel parameter takes a role when a launch passes
it that host tensor, through copies and views (``x.contiguous()``, ``y.view_as(x)``, ``x2 = x.reshape(-1, N)``).
"""

from __future__ import annotations

from d2kgrade.static.dataflow import Flow
from d2kgrade.static.ir import Expr, Function, Launch
from d2kgrade.static.lower import DTYPES

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
