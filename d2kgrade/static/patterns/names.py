"""Call-name sets and dtype families that several checks share."""

from __future__ import annotations

from d2kgrade.static.checkutil import matches
from d2kgrade.static.dataflow import Flow
from d2kgrade.static.ir import Expr, Function

SCANS = ("tl.cumsum", "tl.associative_scan")


LOW_PRECISION_SET = {"bf16", "fp16", "fp8"}


def low_precision_cast(fl: Flow, n: Expr, fn: Function) -> bool:
    """A conversion to a 16-bit (or 8-bit) float: ``x.to(tl.bfloat16)``, ``x.to(y.dtype.element_ty)``,
    ``__float2bfloat16``."""
    if n.kind == "cast":
        return n.op in LOW_PRECISION_SET
    if n.kind == "call" and n.op == ".to" and n.args:
        from d2kgrade.static.lower import dtype_of

        dt = dtype_of(n.args[0])
        return dt in LOW_PRECISION_SET or (dt is None and n.args[0].kind in ("attr", "name")
                                       and "int" not in expr_key(n.args[0]))
    return n.kind == "call" and matches(n.op, ["__float2bfloat16*", "__float2half*", "__float22bfloat162*"])


SIXTEEN_BIT = {"bf16", "fp16"}


LOG2E = 1.4426950408889634


def init_dtype(v: Expr) -> str | None:
    from d2kgrade.static.lower import dtype_of

    if v.kind == "call" and v.op in ("tl.zeros", "tl.full", "tl.zeros_like", "tl.full_like"):
        return dtype_of(v.kw("dtype", 1 if v.op == "tl.zeros" else 2))
    if v.kind == "cast":
        return v.op
    if v.kind == "const" and isinstance(v.value, float):
        return "fp32"
    if v.kind == "other" and v.op == "item-write" and len(v.args) == 2:
        return init_dtype(v.args[1])
    return None


EXP2_CALLS = {"tl.exp2", "libdevice.exp2", "exp2f", "exp2", "__exp2f", "fast_exp2", "tl.math.exp2"}


LIBRARY_LOG2E = ("M_LOG2E", "M_LOG2Ef", "M_LOG2E_F", "CUDART_L2E_F", "CUDART_L2E")
"""log2(e) as the C math library and CUDA's math constants name it (``A * M_LOG2E``, as mamba writes it)."""


def log2e_product(fl: Flow, e: Expr, fn: Function) -> bool:
    """Is ``e`` (this node only, names not followed) a product with log2(e) or a division by ln 2?"""
    import math

    for n in e.walk():
        if n.kind == "bin" and len(n.args) == 2:
            vals = [fl.fold(a, fn) for a in n.args]
            if n.op == "*" and any(isinstance(v, (int, float)) and abs(abs(v) - LOG2E) < 1e-3 for v in vals):
                return True
            if n.op == "*" and any(a.kind == "name" and a.op in LIBRARY_LOG2E for a in n.args):
                return True
            if n.op == "/" and isinstance(vals[1], (int, float)) and abs(abs(vals[1]) - math.log(2.0)) < 1e-3:
                return True
    return False


def expr_key(e: Expr, depth: int = 0) -> str:
    if depth > 5:
        return "..."
    if e.kind in ("name", "const"):
        return e.op
    return f"{e.kind}:{e.op}(" + ",".join(expr_key(a, depth + 1) for a in e.args) + ")" + (
        "." + expr_key(e.recv, depth + 1) if e.recv is not None else "")


SM_SOURCES = ["multi_processor_count", "multiprocessor_count", "multiProcessorCount", "cudaDevAttrMultiProcessorCount",
              "get_device_properties"]


ATOMIC_READS = ("tl.atomic_*", "atomic*", "__atomic_*", "cuda::atomic*")


ATOMICS = ("tl.atomic_add", "tl.atomic_xchg", "tl.atomic_cas", "atomicAdd", "atomicInc", "atomicCAS", "atomicExch")


ATOMIC_ADDS = ("tl.atomic_add", "atomicAdd", "atomicAdd_block", "atomicAdd_system")


VIEW_METHODS = {".contiguous", ".view", ".reshape", ".to", ".float", ".flatten", ".t", ".transpose", ".permute",
         ".squeeze", ".unsqueeze", ".clone", ".type", ".half", ".bfloat16", ".int", ".long", ".cuda", ".detach",
         ".data_ptr", ".view_as", ".reshape_as"}


VIEW_CALLS = {".contiguous", ".view", ".reshape", ".permute", ".transpose", ".t", ".flatten", ".to", ".float", ".half",
          ".bfloat16", ".data_ptr", ".detach", ".expand", ".unsqueeze", ".squeeze", ".view_as", ".as_strided",
          "reinterpret_cast", "static_cast", "const_cast", "cast", ".narrow", ".select"}


TENSOR_METHODS = {".contiguous", ".t", ".transpose", ".permute", ".view", ".reshape", ".data_ptr", ".to", ".float",
                  ".half", ".bfloat16", ".flatten", ".clone", ".expand", ".cuda", ".detach", ".view_as",
                  ".expand_as", ".unsqueeze", ".squeeze", ".narrow", ".mT", ".T"}


DOTS = {"tl.dot", "tl.dot_scaled"}


CUDA_MMA = ["wmma::mma_sync", "nvcuda::wmma::mma_sync", "mma_sync", "cute::gemm", "__hmma*", "cutlass::gemm::*"]


MMA_ASM = ("mma.sync", "wgmma.mma_async", "wmma.mma", "mma.sp")


CUDA_MMA_CALLS = ["wmma::mma_sync", "nvcuda::wmma::mma_sync", "cute::gemm", "mma_sync", "__hmma*",
                  "cutlass::gemm::*", "cute::SM80_*", "cute::SM90_*", "warpgroup_arrive", "cute::warpgroup_*"]


CUDA_MMA_ASM = ["mma.sync", "wgmma.mma_async", "wmma.mma", "mma.sp"]


CP_ASYNC = {"cp.async": (["__pipeline_memcpy_async", "cuda::memcpy_async", "memcpy_async", "cp_async*",
                          "cute::SM80_CP_ASYNC*", "cuda::pipeline*"], ["cp.async.ca", "cp.async.cg", "cp.async.commit"]),
            "tma": (["cuTensorMapEncodeTiled", "cuTensorMapEncodeIm2col", "cute::SM90_TMA_*", "cute::make_tma_copy",
                     "cp_async_bulk_tensor*", "cuda::device::experimental::cp_async_bulk_tensor*"],
                    ["cp.async.bulk.tensor", "cp.async.bulk"])}


DIVISIONS = {"__fdividef", "fdividef", "tl.fdiv", "tl.div_rn", "libdevice.div_rn", "__fdiv_rn", "__hdiv"}
