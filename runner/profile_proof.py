"""Proof that the submission's own kernels did the work.

The worker profiles one call per workload (:func:`profile_call`: torch.profiler, CPU and CUDA activities, input
shapes) and ships a summary; the parent judges it (:func:`judge`), so the decision is made where the
submission cannot reach. A call is rejected when:

- ``profile.forbidden_op``: an ATen op of the task's ``forbidden_ops`` ran (``aten::_softmax`` for softmax);
- ``profile.torch_compute``: an ATen op that computes (anything but allocation, copies, views and fills) ran on
  a tensor at least a quarter the size of the largest task tensor: PyTorch did the work (a ghost kernel with a
  torch fallback, ``torch.exp(x - x.amax(...))``...);
- ``profile.no_own_kernel``: none of the submission's own kernels (``@triton.jit`` functions and ``__global__``
  functions it defines) ran; on CPU the interpreter's launches are counted instead;
- ``profile.library_kernel``: a cuBLAS/cuDNN/CUTLASS/flash/softmax library kernel ran that the task's
  ``allowed_library_ops`` does not allow;
- ``profile.foreign_kernels``: the submission's kernels took under half of the call's GPU time.

This module imports torch only inside :func:`profile_call`; the parent uses :func:`judge` without it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any

from d2kgrade.records import Flag

MOVEMENT_OPS = frozenset("""
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones ones_like new_ones full
full_like new_full fill_ zero_ copy_ _copy_from _copy_from_and_resize clone contiguous to _to_copy view reshape
_reshape_alias _unsafe_view as_strided expand expand_as permute transpose t squeeze unsqueeze flatten unflatten slice
select narrow split split_with_sizes chunk unbind detach alias set_ resize_ item _local_scalar_dense lift lift_fresh
record_stream cat stack pad constant_pad_nd view_as type_as is_nonzero resolve_conj resolve_neg result_type arange
_has_compatible_shallow_copy_type data_ptr size stride numel dim is_contiguous _unsafe_index empty_like_ contiguous_
lift_fresh_copy _nested_tensor_from_mask_left_aligned scalar_tensor _to_dense to_dense movedim swapaxes
""".split()) | {"copy", "fill", "zero", "set", "resize", "empty_like", "contiguous"}
"""ATen ops that move or allocate data without computing the task (names without leading/trailing ``_``)."""

LIBRARY_KERNEL = re.compile(r"gemm|cublas|cudnn|cutlass|nvjet|xmma|flash|fmha|softmax|SoftMax|gemv|splitK|sm90_|"
                            r"sm80_|ampere_|hopper_|cunn_|layer_norm|LayerNorm|rms_norm|scaled_dot|attention|"
                            r"reduce_kernel|conv(?!ert)|winograd|implicit_gemm|dgrad|wgrad|topk|sort|scan|cub::", re.I)
"""Kernel names of library implementations (cuBLAS, cuDNN, ATen's fused ops, CUB)."""

INTERPRETER_RANGE = "d2k::triton_interpreter_launch"
"""Profiler range around each Triton interpreter launch (CPU); ATen ops inside it belong to the interpreter."""

DATA_FRACTION = 0.25
OWN_TIME_FRACTION = 0.5


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


def _aten_base(name: str) -> str:
    return name.split("::", 1)[-1].split(".")[0].strip("_").lower()


def profile_call(call: Callable[[], Any], device: Any) -> tuple[Any, dict[str, Any]]:
    """Run ``call()`` once under torch.profiler; return its result and a summary of ops and kernels."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.device(device).type == "cuda" else [])
    with profile(activities=acts, record_shapes=True) as prof:
        out = call()
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()
    ops: dict[str, int] = {}
    kernels: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            rec = kernels.setdefault(e.name[:300], [0, 0.0])
            rec[0] += 1
            rec[1] += float(e.time_range.elapsed_us())
        elif e.name.startswith("aten::") and not _inside(e, INTERPRETER_RANGE):
            numel = 0
            for shape in e.input_shapes or []:
                if isinstance(shape, (list, tuple)) and all(isinstance(d, int) for d in shape) and shape:
                    numel = max(numel, math.prod(shape))
            ops[e.name] = max(ops.get(e.name, 0), numel)
    return out, {"ops": ops, "kernels": {k: {"count": v[0], "us": v[1]} for k, v in kernels.items()}}


def _inside(event: Any, range_name: str) -> bool:
    parent = getattr(event, "cpu_parent", None)
    while parent is not None:
        if parent.name == range_name:
            return True
        parent = getattr(parent, "cpu_parent", None)
    return False


def _own(name: str, own_names: Iterable[str]) -> bool:
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", name) for n in own_names)


def judge(summary: dict[str, Any], *, own_names: list[str], forbidden_ops: list[str],
          allowed_library_ops: list[str], data_numel: int, device: str, own_launches: int | None = None,
          workload: str = "") -> list[Flag]:
    """Flags for one profiled call (see the module docstring)."""
    flags: list[Flag] = []
    where = f" on {workload}" if workload else ""
    forbidden = forbidden_aten_names(forbidden_ops)
    for op, numel in sorted(summary.get("ops", {}).items()):
        base = _aten_base(op)
        if base in forbidden or any(base.endswith("_" + f) for f in forbidden):
            flags.append(Flag(code="profile.forbidden_op", message=f"{op} ran during the call{where}: the task's own "
                              "PyTorch op did the work"))
        elif base.rstrip("_") not in MOVEMENT_OPS and numel >= DATA_FRACTION * max(data_numel, 1):
            flags.append(Flag(code="profile.torch_compute", message=f"{op} ran on {numel} elements during the "
                              f"call{where}: PyTorch computed the result, not the submission's kernels"))
    if device == "cpu":
        if own_launches is not None and own_launches == 0:
            flags.append(Flag(code="profile.no_own_kernel", message=f"no Triton kernel of the submission ran{where}"))
        return flags
    kernels = summary.get("kernels", {})
    total = sum(k["us"] for k in kernels.values())
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
        flags.append(Flag(code="profile.foreign_kernels", message=f"the submission's kernels took {own_us:.0f} of "
                          f"{total:.0f} us of GPU time{where}; other kernels did most of the work"))
    return flags
