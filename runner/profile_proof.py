"""Proof that the submission's own kernels did the work.

Two witnesses, both run in the kernel host and both only reporting data; the evaluator judges (:func:`judge`,
pure Python, no torch), where the submission cannot reach:

- :class:`OpRecorder`, on every call: a ``TorchDispatchMode`` that forwards each ATen op unchanged and adds its
  *work* to a table by name (``aten::index_select``, as the dispatcher names it). Ops that run inside a Triton
  interpreter launch (its host copies) go to a second table, ``interp_ops``.
- :func:`profile_call`, on the calls the evaluator picks: torch.profiler for the CUDA kernels that ran and their
  time, the recorder for the ops, and the profiler's top-level ATen ops as a cross-check of the recorder (an op
  the profiler saw that the recorder did not is added with its input size: the recorder was bypassed).

Work is what an op writes (the numel of its outputs), or what it reads when it reads more (a reduction over the
data writes a row of results but computed from all of it); for gathers, the rows gathered times the row size
(13 rows of a 131072 x 16 cos cache are 208 elements, not 2M), and for scatters the elements stored.

A call is rejected when:

- ``profile.forbidden_op``: an ATen op of the task's ``forbidden_ops`` ran (``aten::_softmax`` for softmax);
- ``profile.torch_compute``: an op that computes (not in :data:`MOVEMENT_OPS` nor the task's ``glue_ops``) did
  work of at least a quarter of the largest output (the evaluator sizes it by the outputs, so a large input the
  kernel only samples cannot hide it): PyTorch did the work (a ghost kernel with a torch fallback,
  ``torch.exp(x - x.amax(...))``...). Inside an interpreter launch only movement is exempt;
- ``profile.recorder_tampered``: the recorder was popped off or pushed down the dispatch-mode stack;
- ``profile.no_own_kernel``: none of the submission's own kernels (``@triton.jit`` functions and ``__global__``
  functions it defines) ran; on CPU the interpreter's launches are counted instead;
- ``profile.library_kernel``: a cuBLAS/cuDNN/CUTLASS/flash/softmax library kernel ran that the task's
  ``allowed_library_ops`` does not allow;
- ``profile.foreign_kernels``: the submission's kernels took under half of the call's GPU time.

Importing this module does not import torch: :class:`OpRecorder` is built on first access.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Iterable
from typing import Any

from d2kgrade.records import Flag

MOVEMENT_OPS = frozenset("""
empty empty_like empty_strided empty_permuted new_empty new_empty_strided zeros zeros_like new_zeros ones
ones_like new_ones full full_like new_full scalar_tensor arange fill_ zero_ resize_ set_ lift lift_fresh
lift_fresh_copy detach detach_ alias _local_scalar_dense item
copy_ clone contiguous to _to_copy type_as
view _unsafe_view reshape _reshape_alias as_strided expand expand_as broadcast_to permute numpy_T mT t transpose
swapaxes swapdims movedim squeeze unsqueeze flatten unflatten slice select narrow split split_with_sizes
unsafe_split tensor_split chunk unbind view_as view_as_real view_as_complex unfold
cat stack constant_pad_nd pad repeat repeat_interleave tile flip
index_select gather take index_put_ index_copy_ scatter_
""".split())
"""ATen ops that allocate, copy, cast, view or rearrange data without computing the task, by the names the
dispatcher and the profiler give them (``numpy_T`` is ``.T``; ``_to_copy`` is ``.to(dtype)``). Advanced indexing
(``aten::index``, ``x[idx]``) is not here: a data-sized gather by indexing is how PyTorch would do a gather task;
small lookups pass by their work, and a task whose semantics make it glue lists it in ``glue_ops``."""

GATHER_OPS = frozenset({"index", "index_select", "gather", "take", "embedding", "_unsafe_index"})
"""Ops whose work is what they write (the rows gathered), never the table they read from."""
SCATTER_OPS = frozenset({"index_put", "index_put_", "_index_put_impl_", "index_copy", "index_copy_", "scatter",
                         "scatter_"})
"""Ops that write a source into a destination: their work is the source, not the whole destination."""

TAMPER_OPS = {"d2k::recorder_removed": "was removed from the dispatch-mode stack during the call",
              "d2k::recorder_displaced": "had another dispatch mode pushed above it when the call returned"}
"""Pseudo-ops :class:`OpRecorder` reports when the submission interfered with it."""

LIBRARY_KERNEL = re.compile(r"gemm|cublas|cudnn|cutlass|nvjet|xmma|flash|fmha|softmax|SoftMax|gemv|splitK|sm90_|"
                            r"sm80_|ampere_|hopper_|cunn_|layer_norm|LayerNorm|rms_norm|scaled_dot|attention|"
                            r"reduce_kernel|conv(?!ert)|winograd|implicit_gemm|dgrad|wgrad|topk|sort|scan|cub::", re.I)
"""Kernel names of library implementations (cuBLAS, cuDNN, ATen's fused ops, CUB)."""

INTERPRETER_RANGE = "d2k::triton_interpreter_launch"
"""Profiler range around each Triton interpreter launch (CPU); ATen ops inside it belong to the interpreter."""

DATA_FRACTION = 0.25
OWN_TIME_FRACTION = 0.5
CONSTANT_FILL = re.compile(r"FillFunctor|^Memset|\[memset\]", re.I)
"""Kernels that write a constant (``zero_``, ``fill_``, memsets): no share of the result's work, so they are left
out of the own-time fraction. Triton's autotuner clears L2 with ``zero_`` before every timed run of every config,
so an autotuned kernel's first call on a new shape spends most of its GPU time in fills; that is the suspected
cause of round 12's rejection of conv2d_implicit_gemm's reference on its hidden workload (121.7 of 340.8 ms in its
own kernels; that message did not name the others, this one does)."""


class _Interp:
    """How many Triton interpreter launches are running (nested device calls count once)."""

    depth = 0
    marked = False


def forbidden_aten_names(forbidden_ops: Iterable[str]) -> set[str]:
    """ATen base names of a task's forbidden ops (``torch.nn.functional.softmax`` -> ``softmax``)."""
    out = set()
    for op in forbidden_ops:
        if op == "@":
            out |= {"matmul", "mm", "bmm"}
            continue
        base = op.rsplit(".", 1)[-1].strip("_")
        if base:
            out.add(base)
            if base in ("matmul", "linear", "Linear", "einsum", "tensordot", "inner"):
                out |= {"mm", "bmm", "addmm", "matmul"}
        out |= {"Softmax": {"softmax"}, "RMSNorm": {"rms_norm"}, "LayerNorm": {"layer_norm"}}.get(base, set())
    return {o.lower() for o in out}


def op_base(name: str) -> str:
    """``aten::index_select.default`` -> ``index_select`` (namespace and overload dropped, underscores kept)."""
    return name.split("::", 1)[-1].split(".")[0]


def is_movement(name: str, glue: Iterable[str] = ()) -> bool:
    """Whether ``name`` (an op as reported) only moves data: in :data:`MOVEMENT_OPS` or ``glue``, or the
    in-place form (trailing ``_``) of one that is."""
    base = op_base(name)
    allowed = MOVEMENT_OPS.union(op_base(g) for g in glue) if glue else MOVEMENT_OPS
    return base in allowed or (base.endswith("_") and base[:-1] in allowed)


def _forbidden(name: str, forbidden: set[str]) -> bool:
    base = op_base(name).strip("_").lower()
    return base in forbidden or any(base.endswith("_" + f) for f in forbidden)


# --------------------------------------------------------------------------------------------- the witnesses


def interpreter_launch_begin() -> None:
    """Mark the start of a Triton interpreter launch (ops until the matching end go to ``interp_ops``)."""
    _Interp.depth += 1


def interpreter_launch_end() -> None:
    _Interp.depth = max(0, _Interp.depth - 1)


def mark_interpreter_launches() -> None:
    """Wrap the Triton interpreter's grid launch so ops inside it are told apart (idempotent; does nothing
    unless ``TRITON_INTERPRET=1``). Inside the profiler each launch is also a :data:`INTERPRETER_RANGE` range."""
    if _Interp.marked or os.environ.get("TRITON_INTERPRET") != "1":
        return
    import torch
    from torch.autograd.profiler import record_function
    from triton.runtime import interpreter

    original = interpreter.GridExecutor.__call__
    profiling = torch.autograd._profiler_enabled

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        interpreter_launch_begin()
        try:
            if profiling():
                with record_function(INTERPRETER_RANGE):
                    return original(self, *args, **kwargs)
            return original(self, *args, **kwargs)
        finally:
            interpreter_launch_end()

    call.__wrapped__ = original  # type: ignore[attr-defined]
    interpreter.GridExecutor.__call__ = call  # type: ignore[method-assign]
    _Interp.marked = True


def __getattr__(name: str) -> Any:
    if name == "OpRecorder":
        cls = _build_recorder()
        globals()["OpRecorder"] = cls
        return cls
    raise AttributeError(name)


def _build_recorder() -> type:
    """The :class:`OpRecorder` class (built on first use, so that importing this module needs no torch)."""
    import torch
    from torch.utils._python_dispatch import (TorchDispatchMode, _get_current_dispatch_mode,
                                              _get_current_dispatch_mode_stack, _pop_mode)

    mark_interpreter_launches()
    tensor = torch.Tensor
    kinds: dict[Any, tuple[str, int]] = {}
    """op overload -> (name, how its work is measured: 0 max(out, in), 1 outputs, 2 largest source, 3 ignored,
    4 outputs of a movement op, whose work decides nothing: its inputs are not scanned)."""

    def kind_of(func: Any) -> tuple[str, int]:
        name = func._schema.name
        base = op_base(name)
        how = (3 if name.startswith("profiler::") else 1 if base in GATHER_OPS else 2 if base in SCATTER_OPS
               else 4 if is_movement(name) else 0)
        kinds[func] = (name, how)
        return name, how

    def numel(obj: Any) -> int:
        if isinstance(obj, tensor):
            return obj.numel()
        if isinstance(obj, (tuple, list)):
            return sum(o.numel() for o in obj if isinstance(o, tensor))
        return 0

    def largest(args: tuple[Any, ...], skip: int) -> int:
        n = 0
        for a in args[skip:]:
            if isinstance(a, tensor):
                n = max(n, a.numel())
            elif isinstance(a, (tuple, list)):
                n = max(n, max((o.numel() for o in a if isinstance(o, tensor)), default=0))
        return n

    class OpRecorder(TorchDispatchMode):
        """Records every ATen op of a call and its work; forwards each op unchanged.

        Use ``with OpRecorder() as rec: out = kernel(...)``, then :meth:`summary` (of that call: entering the same
        recorder again starts a new record). Ops inside a Triton interpreter
        launch are kept apart (``interp_ops``). If the submission pops the recorder off the dispatch-mode stack
        or leaves a mode of its own above it, the summary carries one of :data:`TAMPER_OPS`.
        """

        def __init__(self) -> None:
            super().__init__()
            self.ops: dict[str, int] = {}
            self.interp_ops: dict[str, int] = {}

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                               kwargs: dict[str, Any] | None = None) -> Any:
            out = func(*args, **(kwargs or {}))
            name, how = kinds.get(func) or kind_of(func)
            if how == 3:
                return out
            if how == 0:
                work = max(numel(out), largest(args, 0))
            elif how == 2:
                work = largest(args, 1)
            else:
                work = numel(out)
            table = self.interp_ops if _Interp.depth else self.ops
            table[name] = table.get(name, 0) + work
            return out

        def __enter__(self) -> Any:
            self.ops, self.interp_ops = {}, {}  # one record per call: a recorder entered again starts afresh
            return super().__enter__()

        def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
            if _get_current_dispatch_mode() is self:
                return super().__exit__(exc_type, exc, tb)  # type: ignore[no-any-return]
            stack = _get_current_dispatch_mode_stack()
            if not any(m is self for m in stack):
                self.ops["d2k::recorder_removed"] = 1
                return None  # popping now would pop someone else's mode
            if stack[-1] is not self:
                self.ops["d2k::recorder_displaced"] = 1
                while _get_current_dispatch_mode_stack()[-1] is not self:
                    _pop_mode()
            return super().__exit__(exc_type, exc, tb)  # type: ignore[no-any-return]

        def summary(self) -> dict[str, Any]:
            """``{"ops": {name: work}, "interp_ops": {name: work}}`` (JSON-able)."""
            return {"ops": dict(self.ops), "interp_ops": dict(self.interp_ops)}

    return OpRecorder


def new_recorder() -> Any:
    """A fresh :class:`OpRecorder`."""
    return __getattr__("OpRecorder")()


@functools.lru_cache(maxsize=512)
def is_composite(name: str) -> bool:
    """Whether the dispatcher decomposes ``aten::<name>`` before any mode sees it (``aten::contiguous``): its
    parts are what :class:`OpRecorder` records."""
    import torch

    packet = getattr(torch.ops.aten, op_base(name), None)
    if packet is None:
        return False
    for overload in packet.overloads():
        full = f"aten::{op_base(name)}" + ("" if overload == "default" else f".{overload}")
        try:
            if torch._C._dispatch_has_kernel_for_dispatch_key(full, "CompositeImplicitAutograd"):
                return True
        except RuntimeError:
            continue
    return False


def profile_call(call: Callable[[], Any], device: Any) -> tuple[Any, dict[str, Any]]:
    """Run ``call()`` once under torch.profiler and an :class:`OpRecorder`; return its result and a summary:
    ``{"ops": {name: work}, "interp_ops": {...}, "kernels": {name: {"count", "us"}}}``."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.device(device).type == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    rec = new_recorder()
    with profile(activities=acts, record_shapes=True) as prof:
        with rec:
            out = call()
            if cuda:
                torch.cuda.synchronize()
    summary = rec.summary()
    kernels: dict[str, list[float]] = {}
    seen = set(summary["ops"]) | set(summary["interp_ops"])
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            k = kernels.setdefault(e.name[:300], [0, 0.0])
            k[0] += 1
            k[1] += float(e.time_range.elapsed_us())
        elif (e.name.startswith("aten::") and e.name not in seen and _top_level(e)
              and not _inside(e, INTERPRETER_RANGE) and not is_composite(e.name)):
            # The recorder sees every op it is on the stack for: a top-level op only the profiler saw ran while
            # the submission had it off. Its work is unknown here; its largest input stands in for it.
            numel = max((math.prod(s) for s in e.input_shapes or [] if _is_shape(s)), default=0)
            summary["ops"][e.name] = max(summary["ops"].get(e.name, 0), numel)
    summary["kernels"] = {k: {"count": v[0], "us": v[1]} for k, v in kernels.items()}
    return out, summary


def _is_shape(shape: Any) -> bool:
    return isinstance(shape, (list, tuple)) and bool(shape) and all(isinstance(d, int) for d in shape)


def _top_level(event: Any) -> bool:
    parent = getattr(event, "cpu_parent", None)
    while parent is not None:
        if parent.name.startswith("aten::"):
            return False
        parent = getattr(parent, "cpu_parent", None)
    return True


def _inside(event: Any, range_name: str) -> bool:
    parent = getattr(event, "cpu_parent", None)
    while parent is not None:
        if parent.name == range_name:
            return True
        parent = getattr(parent, "cpu_parent", None)
    return False


# --------------------------------------------------------------------------------------------- the verdict


def _own(name: str, own_names: Iterable[str]) -> bool:
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", name) for n in own_names)


def judge(summary: dict[str, Any], *, own_names: list[str], forbidden_ops: list[str],
          allowed_library_ops: list[str], glue_ops: Iterable[str] = (), data_numel: int, device: str,
          own_launches: int | None = None, workload: str = "") -> list[Flag]:
    """Flags for one call's summary (see the module docstring). ``glue_ops`` is the task's ``glue_ops``."""
    flags: list[Flag] = []
    where = f" on {workload}" if workload else ""
    forbidden = forbidden_aten_names(forbidden_ops)
    glue = list(glue_ops)
    limit = DATA_FRACTION * max(data_numel, 1)
    for op, work in sorted(summary.get("ops", {}).items()):
        if op in TAMPER_OPS:
            flags.append(Flag(code="profile.recorder_tampered", message=f"the evaluator's op recorder "
                              f"{TAMPER_OPS[op]}{where}"))
        elif _forbidden(op, forbidden):
            flags.append(Flag(code="profile.forbidden_op", message=f"{op} ran during the call{where}: the task's own "
                              "PyTorch op did the work"))
        elif not is_movement(op, glue) and work >= limit:
            flags.append(Flag(code="profile.torch_compute", message=f"{op} did the work of {work} elements during "
                              f"the call{where} (the largest output has {data_numel} elements): PyTorch computed the "
                              "result, not the submission's kernels"))
    for op, work in sorted(summary.get("interp_ops", {}).items()):
        if not is_movement(op) and work >= limit:
            flags.append(Flag(code="profile.torch_compute", message=f"{op} did the work of {work} elements inside a "
                              f"Triton interpreter launch{where}: PyTorch computed the result there"))
    if device == "cpu":
        if own_launches is not None and own_launches == 0:
            flags.append(Flag(code="profile.no_own_kernel", message=f"no Triton kernel of the submission ran{where}"))
        return flags
    kernels = summary.get("kernels") or {}
    total = sum(k["us"] for n, k in kernels.items() if not CONSTANT_FILL.search(n))
    own = {n: k for n, k in kernels.items() if _own(n, own_names)}
    own_us = sum(k["us"] for k in own.values())
    if not own:
        flags.append(Flag(code="profile.no_own_kernel", message=f"none of the submission's kernels "
                          f"({', '.join(own_names) or 'none defined'}) ran{where}; the GPU ran: "
                          + ", ".join(sorted(kernels)[:5])))
    for name in sorted(set(kernels) - set(own)):
        if LIBRARY_KERNEL.search(name) and not any(a in name for a in allowed_library_ops):
            flags.append(Flag(code="profile.library_kernel", message=f"library kernel {name[:120]!r} ran{where}"))
    if own and total > 0 and own_us < OWN_TIME_FRACTION * total:
        top = sorted(((k["us"], n) for n, k in kernels.items() if n not in own and not CONSTANT_FILL.search(n)),
                     reverse=True)[:3]
        flags.append(Flag(code="profile.foreign_kernels", message=f"the submission's kernels took {own_us:.0f} of "
                          f"{total:.0f} us of GPU time{where}; other kernels did most of the work: "
                          + ", ".join(f"{n[:100]} ({us:.0f} us)" for us, n in top)))
    return flags
