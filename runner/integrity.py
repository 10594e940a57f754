"""Snapshot what the harness relies on before the submission is imported; find what changed after it ran.

The worker compares outputs and reads timers in the same process as the submission, so a submission could rebind
``torch.isfinite``, ``torch.cuda.Event.elapsed_time``, ``time.perf_counter``, a comparison function of
``runner.compare`` or the reference itself. Before importing it, :class:`Guard` records the identity of every
attribute of those modules and classes (and the code object, defaults and closure of each Python function); the
worker verifies the snapshot right before each comparison and after each timing phase, so a patch is found
before anything patched is used. It also checks ``sys.modules``, builtins, torch's function/dispatch mode stacks,
trace/profile hooks and the Python thread count. A change is the ``harness_patched`` (or ``thread_started``)
flag, and the evaluation stops as ``rejected``.

Attributes *added* to a module are ignored (torch inserts lazily imported submodules); changed or deleted ones
are not, and neither is a dunder or inherited name added to a class (it shadows the base's: ``Tensor.__le__``).
Under the Triton interpreter, ``triton.language`` is rewritten by the interpreter itself on every launch, so it is
left out there.
"""

from __future__ import annotations

import builtins
import sys
import threading
import types
from collections.abc import Iterable
from typing import Any

Fingerprint = tuple[int, ...]


def _fingerprint(value: Any) -> Fingerprint:
    if isinstance(value, types.FunctionType):
        return (id(value), id(value.__code__), id(value.__defaults__), id(value.__kwdefaults__),
                id(value.__closure__), id(value.__globals__))
    if isinstance(value, (staticmethod, classmethod)):
        return (id(value), *_fingerprint(value.__func__))
    if isinstance(value, property):
        return (id(value), id(value.fget), id(value.fset))
    return (id(value),)


_DATA = (bool, int, float, complex, str, bytes, type(None), dict, list, tuple, set, frozenset)


def _members(obj: Any, *, data: bool = True) -> dict[str, Fingerprint]:
    """Fingerprints of an object's attributes. ``data=False`` skips plain data values: third-party modules flip
    state flags (``torch.cuda._initialized``) as they run, and what a harness could be fooled by is code."""
    try:
        items = list(vars(obj).items())
    except TypeError:
        return {}
    return {k: _fingerprint(v) for k, v in items if data or not isinstance(v, _DATA)}


def _is_harness(name: str) -> bool:
    return name.split(".")[0] in ("runner", "d2kgrade") or name.startswith("d2k_")


class Guard:
    """Identity snapshot of modules and classes the harness uses."""

    def __init__(self, watched: Iterable[Any], *, thread_count: bool = True) -> None:
        self._objects: list[tuple[str, Any]] = []
        seen: set[int] = set()
        for obj in watched:
            if obj is None or id(obj) in seen:
                continue
            seen.add(id(obj))
            self._objects.append((getattr(obj, "__name__", repr(obj)), obj))
            # Classes and functions defined by a watched harness module are watched too.
            if isinstance(obj, types.ModuleType) and _is_harness(obj.__name__):
                for v in list(vars(obj).values()):
                    if isinstance(v, type) and getattr(v, "__module__", None) == obj.__name__ and id(v) not in seen:
                        seen.add(id(v))
                        self._objects.append((f"{obj.__name__}.{v.__name__}", v))
        self._snap = {name: _members(obj, data=_is_harness(name)) for name, obj in self._objects}
        self._modules = {name: mod for name, mod in self._objects if isinstance(mod, types.ModuleType)}
        self._builtins = _members(builtins)
        self._threads = threading.active_count() if thread_count else None
        self._hooks = (sys.gettrace(), sys.getprofile(), threading.gettrace() if hasattr(threading, "gettrace")
                       else None, tuple(sys.meta_path), tuple(sys.path_hooks))
        self._modes = _mode_depths()

    def violations(self) -> list[str]:
        """What changed since the snapshot, one line each (empty: nothing)."""
        out: list[str] = []
        for name, obj in self._objects:
            before, now = self._snap[name], _members(obj, data=_is_harness(name))
            for key, fp in before.items():
                if key not in now:
                    out.append(f"{name}.{key} was deleted")
                elif now[key] != fp:
                    out.append(f"{name}.{key} was replaced")
                if len(out) > 20:
                    return out
            if isinstance(obj, type):  # on a class, a new attribute can shadow an inherited one (Tensor.__le__)
                out += [f"{name}.{key} was added" for key in sorted(now.keys() - before.keys())
                        if key.startswith("__") or any(key in vars(base) for base in obj.__mro__[1:])]
        for name, mod in self._modules.items():
            if sys.modules.get(name) is not mod:
                out.append(f"sys.modules[{name!r}] was replaced")
        now_b = _members(builtins)
        out += [f"builtins.{k} was replaced" for k, fp in self._builtins.items() if now_b.get(k) != fp]
        hooks = (sys.gettrace(), sys.getprofile(), threading.gettrace() if hasattr(threading, "gettrace") else None,
                 tuple(sys.meta_path), tuple(sys.path_hooks))
        if hooks[:3] != self._hooks[:3]:
            out.append("a trace or profile hook was installed")
        if hooks[3] != self._hooks[3] or hooks[4] != self._hooks[4]:
            out.append("the import system was changed (sys.meta_path / sys.path_hooks)")
        if _mode_depths() != self._modes:
            out.append("a torch function or dispatch mode was pushed")
        return out

    def new_threads(self) -> int:
        """Python threads started since the snapshot and still alive."""
        if self._threads is None:
            return 0
        return max(0, threading.active_count() - self._threads)


def _mode_depths() -> tuple[int, ...]:
    torch = sys.modules.get("torch")
    if torch is None:
        return ()
    out = []
    for fn in ("_len_torch_function_stack", "_len_torch_dispatch_stack"):
        f = getattr(torch._C, fn, None)
        try:
            out.append(int(f()) if f else -1)
        except Exception:  # noqa: BLE001 - a missing private API means "unknown", not a violation
            out.append(-1)
    return tuple(out)


def harness_objects(ref_module: Any, interpreter: bool) -> list[Any]:
    """Modules and classes the worker relies on (torch must already be imported)."""
    import time

    import torch

    objs: list[Any] = [torch, torch.Tensor, torch._C.TensorBase, torch.nn.functional, torch.cuda, torch.cuda.Event,
                       torch.Generator, torch.profiler, torch.autograd.profiler, torch.linalg, torch.special, time,
                       sys.modules.get("math"), ref_module]
    for name in ("runner.compare", "runner.direct", "runner.inputs", "runner.loading", "runner.integrity",
                 "runner.timing", "runner.profile_proof", "runner.worker", "runner.sandbox", "runner.trials",
                 "runner.checks", "runner.huge_inputs",
                 "d2kgrade.schema", "d2kgrade.records", "json", "hmac", "hashlib", "os", "struct"):
        objs.append(sys.modules.get(name))
    triton = sys.modules.get("triton")
    if triton is not None:
        objs += [triton, sys.modules.get("triton.runtime.jit")]
        jit = sys.modules.get("triton.runtime.jit")
        if jit is not None:
            objs += [getattr(jit, "JITFunction", None)]
        if interpreter:
            interp = sys.modules.get("triton.runtime.interpreter")
            if interp is not None:
                objs += [interp, getattr(interp, "InterpretedFunction", None), getattr(interp, "GridExecutor", None)]
        else:
            objs += [sys.modules.get("triton.language"), sys.modules.get("triton.language.core")]
    if "torch.cuda" in sys.modules:
        objs += [getattr(torch.cuda, "Stream", None)]
    return [o for o in objs if o is not None]
