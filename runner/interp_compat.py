"""Production Triton patterns under the Triton 3.6 interpreter (``TRITON_INTERPRET=1``, CPU), where the
interpreter, not the kernel, is at fault.

:func:`install` is called once in the kernel host, before the submission is imported. Each patch makes the
interpreter do what the GPU does, and nothing a correct kernel computes changes:

- ``@triton.autotune`` over several configs: the interpreter has no driver to benchmark with ("0 active
  drivers"). The autotuner takes the **first config, in the configs list's order after any
  ``prune_configs_by``, that launches without a compile-time assertion** (a ``tl.static_assert`` failure skips a
  config, as a compile failure does on the GPU). Only that config's trial launch runs, with the autotuner's own
  ``reset_to_zero``/``restore_value``/pre-hooks, and the choice is cached per key as on the GPU.
- Float scalar arguments are fp32 scalars, as on the GPU, so ``eps.to(tl.float32)`` works (the interpreter
  passes a Python float).
- ``libdevice``: ``triton.language.extra.libdevice`` (which the GPU compiler maps by name to the CUDA backend's)
  and ``triton.language.extra.cuda.libdevice`` work inside kernels, imported by name or as a module: the real
  dispatch runs (same argument types accepted, same result types) and the elementwise function is computed with
  numpy. Functions with no numpy equivalent here (directed rounding, bit tricks) raise
  :class:`InterpreterLimitation`. ``gdc_wait``/``gdc_launch_dependents`` are no-ops (one program runs at a time).
- bf16: the interpreter keeps bf16 as raw ``uint16`` bits and does arithmetic on the bits (a multiply is off by
  ~1e36, add and subtract give NaN, comparisons of negatives are wrong, ``fp32 -> bf16`` truncates). Here
  arithmetic, comparisons, ``tl.dot``, reductions and scans on bf16 decode to fp32, compute, and round to nearest
  even after every operation (a reduction rounds at each level of a pairwise tree, a scan at each step), as the
  GPU's bf16 instructions do; casts to bf16 round to nearest even. bf16 atomics raise
  :class:`InterpreterLimitation` instead of computing garbage.
- Launches of the submission's own kernels are counted (:class:`LaunchCounter`), and every interpreter launch is
  marked so :class:`runner.profile_proof.OpRecorder` files the ops inside it (the interpreter's host copies) under
  ``interp_ops``.

:func:`limitation` tells an exception that a known interpreter limitation raised from a kernel's own fault;
the evaluator then reports ``unsupported_on_cpu``, never ``incorrect`` or ``rejected``.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

_MISSING = object()


class InterpreterLimitation(NotImplementedError):
    """Raised by this module where the interpreter would otherwise compute a wrong result."""


@dataclass
class LaunchCounter:
    """Interpreter launches of Triton kernels whose code lives in one of ``files``."""

    files: frozenset[str] = frozenset()
    count: int = 0


@dataclass
class _State:
    counter: LaunchCounter | None = None
    patches: list[tuple[Any, str, Any]] = field(default_factory=list)


_STATE = _State()


def _patch(obj: Any, name: str, value: Any) -> None:
    _STATE.patches.append((obj, name, obj.__dict__.get(name, _MISSING) if isinstance(obj, type) else
                           getattr(obj, name, _MISSING)))
    setattr(obj, name, value)


def install(source_file: str | Sequence[str]) -> LaunchCounter:
    """Patch the Triton interpreter for production patterns (see the module docstring) and count launches of the
    kernels defined in ``source_file`` (a path, or the paths of a multi-file submission). A second call only
    changes which files are counted.

    Raises:
        RuntimeError: when ``TRITON_INTERPRET`` is not ``1`` (the patches are for the interpreter only).
    """
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("runner.interp_compat.install is for the Triton interpreter (TRITON_INTERPRET=1)")
    files = [source_file] if isinstance(source_file, str) else list(source_file)
    wanted = frozenset(os.path.realpath(f) for f in files)
    if _STATE.counter is not None:
        _STATE.counter.files, _STATE.counter.count = wanted, 0
        return _STATE.counter
    from runner import profile_proof

    _STATE.counter = LaunchCounter(wanted)
    _count_launches(_STATE.counter)
    profile_proof.mark_interpreter_launches()
    _patch_autotune()
    _patch_driver()
    _patch_float_scalars()
    _patch_libdevice()
    _patch_bf16()
    _patch_fp8()
    return _STATE.counter


def uninstall() -> None:
    """Undo :func:`install` (for tests; the kernel host never calls it)."""
    while _STATE.patches:
        obj, name, old = _STATE.patches.pop()
        if old is _MISSING:
            delattr(obj, name)
        else:
            setattr(obj, name, old)
    _STATE.counter = None


# --------------------------------------------------------------------------------------------- launches


def _count_launches(counter: LaunchCounter) -> None:
    from triton.runtime.interpreter import InterpretedFunction

    original = InterpretedFunction.run
    codes: dict[Any, bool] = {}

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        code = getattr(getattr(self, "fn", None), "__code__", None)
        own = codes.get(code)
        if own is None:
            own = codes[code] = code is not None and os.path.realpath(code.co_filename) in counter.files
        out = original(self, *args, **kwargs)
        if own and not kwargs.get("warmup"):
            counter.count += 1  # a launch that completed (a failed compile-time assertion launched nothing)
        return out

    _patch(InterpretedFunction, "run", run)


# --------------------------------------------------------------------------------------------- autotune


def _patch_autotune() -> None:
    from triton.runtime.autotuner import Autotuner

    original_run = Autotuner.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._d2k_chosen = False  # a new key benchmarks again; a cached key never calls do_bench
        return original_run(self, *args, **kwargs)

    def do_bench(self: Any) -> Callable[..., Any]:
        def bench(kernel_call: Callable[[], Any], quantiles: Sequence[float] | None = None, **_: Any) -> Any:
            n = len(quantiles) if quantiles else 1
            if getattr(self, "_d2k_chosen", False):
                return [math.inf] * n if quantiles else math.inf  # a config before this one was taken
            try:
                kernel_call()
            except Exception as exc:
                if _static_assert_failed(exc):
                    return [math.inf] * n if quantiles else math.inf
                raise
            self._d2k_chosen = True
            return [0.0] * n if quantiles else 0.0

        return bench

    _patch(Autotuner, "run", run)
    _patch(Autotuner, "do_bench", property(do_bench))


def _static_assert_failed(exc: BaseException) -> bool:
    """A ``tl.static_assert`` failure inside an interpreter launch (a compile-time assertion on the GPU)."""
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    tb = cause.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "_new_static_assert":
            return isinstance(cause, AssertionError)
        tb = tb.tb_next
    return False


# --------------------------------------------------------------------------------------------- driver queries

NOMINAL_DEVICE = {"multiprocessor_count": 132, "max_shared_mem": 232448, "max_num_regs": 65536, "warpSize": 32,
                  "sm_clock_rate": 1980000, "mem_clock_rate": 2619000, "mem_bus_width": 6144}
"""What ``driver.active.utils.get_device_properties`` answers under the interpreter: an H100/H200-class device.
Host code sizes grids and tiles from it; the interpreter runs any tile, so no result depends on it."""


class _InterpreterDriver:
    """The read-only queries host code makes of ``triton.runtime.driver.active`` (the tutorials size persistent
    grids from the SM count), answered on CPU, where the interpreter has no driver at all."""

    class utils:  # the attribute name host code uses
        @staticmethod
        def get_device_properties(device: Any = None) -> dict[str, int]:
            return dict(NOMINAL_DEVICE)

    def is_active(self) -> bool:
        return True

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: Any) -> None:
        return None

    def get_current_stream(self, device: Any = None) -> int:
        return 0

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)

    def get_benchmarker(self) -> Callable[..., Any]:
        def bench(kernel_call: Callable[[], Any], quantiles: Sequence[float] | None = None, **_: Any) -> Any:
            kernel_call()
            return [0.0] * len(quantiles) if quantiles else 0.0

        return bench


def _patch_driver() -> None:
    import importlib

    config = importlib.import_module("triton.runtime.driver").driver
    try:
        config.active  # noqa: B018 - a real driver (there is none under the interpreter on a CPU host)
    except RuntimeError:
        _patch(config, "_active", _InterpreterDriver())

# --------------------------------------------------------------------------------------------- float scalars


def _patch_float_scalars() -> None:
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    original = interpreter._implicit_cvt

    def implicit_cvt(arg: Any) -> Any:
        if type(arg) is float:  # a runtime float argument is an fp32 scalar on the GPU
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return original(arg)

    _patch(interpreter, "_implicit_cvt", implicit_cvt)


# --------------------------------------------------------------------------------------------- libdevice


class _Lib:
    current: str | None = None
    """The libdevice function being dispatched (the builder only sees its CUDA symbol)."""


def _erf(x: Any) -> Any:
    import numpy as np

    return np.vectorize(math.erf, otypes=[x.dtype])(x)


def _libdevice_numpy() -> dict[str, Callable[..., Any]]:
    """libdevice functions (by their Python name) that numpy computes to within the GPU's own error bounds."""
    import numpy as np

    def vec(f: Callable[..., float]) -> Callable[..., Any]:
        return lambda *a: np.vectorize(f, otypes=[a[0].dtype])(*a)

    def rnd(x: Any) -> Any:  # C round(): halves away from zero
        return np.sign(x) * np.floor(np.abs(x) + 0.5)

    unary = {
        "abs": np.abs, "fabs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": rnd,
        "rint": np.rint, "nearbyint": np.rint, "sqrt": np.sqrt, "sqrt_rn": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
        "rsqrt_rn": lambda x: 1 / np.sqrt(x), "rcp_rn": lambda x: 1 / x, "cbrt": np.cbrt, "exp": np.exp,
        "exp2": np.exp2, "exp10": lambda x: np.power(x.dtype.type(10), x), "expm1": np.expm1, "fast_expf": np.exp,
        "fast_exp10f": lambda x: np.power(x.dtype.type(10), x), "log": np.log, "log2": np.log2, "log10": np.log10,
        "log1p": np.log1p, "fast_logf": np.log, "fast_log2f": np.log2, "fast_log10f": np.log10, "sin": np.sin,
        "cos": np.cos, "tan": np.tan, "fast_sinf": np.sin, "fast_cosf": np.cos, "fast_tanf": np.tan, "asin": np.arcsin,
        "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh,
        "acosh": np.arccosh, "atanh": np.arctanh, "erf": _erf, "erfc": vec(math.erfc), "lgamma": vec(math.lgamma),
        "tgamma": vec(math.gamma), "saturatef": lambda x: np.clip(x, 0, 1), "isnan": np.isnan, "isinf": np.isinf,
        "isfinited": np.isfinite, "signbit": np.signbit,
    }
    binary = {
        "pow": np.power, "fast_powf": np.power, "fmod": np.fmod, "remainder": np.remainder, "fmax": np.fmax,
        "fmin": np.fmin, "fdim": lambda a, b: np.maximum(a - b, 0), "atan2": np.arctan2, "hypot": np.hypot,
        "copysign": np.copysign, "nextafter": np.nextafter, "div_rn": np.divide, "fast_dividef": np.divide,
        "add_rn": np.add, "sub_rn": np.subtract, "mul_rn": np.multiply, "ldexp": np.ldexp, "scalbn": np.ldexp,
        "powi": lambda a, b: np.power(a, b.astype(a.dtype)),
    }
    ternary = {"fma": lambda a, b, c: a * b + c, "fma_rn": lambda a, b, c: a * b + c}
    return {**unary, **binary, **ternary}


def _patch_libdevice() -> None:
    import importlib

    from triton.language import core
    from triton.runtime import interpreter

    table = _libdevice_numpy()
    semantic = interpreter.interpreter_semantic

    def create_extern_elementwise(self: Any, lib_name: str, lib_path: str, symbol: str, args: list[Any],
                                  ret_type: Any, is_pure: bool) -> Any:
        import numpy as np

        name = _Lib.current
        fn = table.get(name or "")
        if fn is None:
            raise InterpreterLimitation(f"libdevice.{name or symbol} ({symbol}) has no CPU emulation under the "
                                        "Triton interpreter")
        with np.errstate(all="ignore"):
            out = fn(*[np.asarray(a.data) for a in args])
        dtype = interpreter._get_np_dtype(ret_type)
        return interpreter.TensorHandle(np.asarray(out).astype(dtype), ret_type.scalar)

    def dispatching(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            kwargs.pop("_semantic", None)
            previous, _Lib.current = _Lib.current, name
            try:
                return fn(*args, _semantic=semantic, **kwargs)
            finally:
                _Lib.current = previous

        call.__name__ = call.__qualname__ = name
        return call

    _patch(interpreter.InterpreterBuilder, "create_extern_elementwise", create_extern_elementwise)
    cuda = importlib.import_module("triton.language.extra.cuda.libdevice")
    generic = importlib.import_module("triton.language.extra.libdevice")
    for name, fn in list(vars(cuda).items()):
        if callable(fn) and core.is_builtin(fn):
            wrapped = dispatching(name, fn)
            _patch(cuda, name, wrapped)
            if hasattr(generic, name):
                _patch(generic, name, wrapped)
    for module in ("triton.language.extra.cuda.gdc", "triton.language.extra.cuda"):
        mod = importlib.import_module(module)
        for name in ("gdc_wait", "gdc_launch_dependents"):
            if hasattr(mod, name):
                _patch(mod, name, lambda *a, **k: None)


# --------------------------------------------------------------------------------------------- bf16


def _bf16_codec() -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """(decode: uint16 bits -> float32, encode: float32 -> uint16 bits rounded to nearest even)."""
    import numpy as np

    def decode(bits: Any) -> Any:
        return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)

    def encode(values: Any) -> Any:
        f = np.ascontiguousarray(values, dtype=np.float32)
        u = f.view(np.uint32)
        out = ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        nan = np.isnan(f)
        if nan.any():
            out = np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), out)
        return out

    return decode, encode


def _patch_bf16() -> None:
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    decode, encode = _bf16_codec()
    handle, builder = interpreter.TensorHandle, interpreter.InterpreterBuilder
    bf16 = tl.bfloat16
    bitwise = {np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.left_shift, np.right_shift}

    def is_bf16(h: Any) -> bool:
        return getattr(h.dtype, "scalar", h.dtype) == bf16

    def rounded(values: Any) -> Any:
        return decode(encode(values))

    orig_binary = builder.binary_op

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if not (is_bf16(lhs) and op not in bitwise):
            return orig_binary(self, lhs, rhs, op)
        with np.errstate(all="ignore"):
            out = op(decode(lhs.data), decode(rhs.data))
        return handle(out if out.dtype == np.bool_ else encode(out), lhs.dtype.scalar)

    orig_unary = builder.unary_op

    def unary_op(self: Any, arg: Any, op: Any) -> Any:
        if not is_bf16(arg):
            return orig_unary(self, arg, op)
        with np.errstate(all="ignore"):
            return handle(encode(op(decode(arg.data))), bf16)

    def through_fp32(name: str) -> Callable[..., Any]:
        orig = getattr(builder, name)

        def method(self: Any, *args: Any) -> Any:
            if not any(isinstance(a, handle) and is_bf16(a) for a in args):
                return orig(self, *args)
            conv = [handle(decode(a.data), tl.float32) if isinstance(a, handle) and is_bf16(a) else a for a in args]
            out = orig(self, *conv)
            return handle(encode(out.data), bf16) if out.dtype.scalar == tl.float32 else out

        return method

    orig_cast = builder.cast_impl

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        src_bf, dst_bf = is_bf16(src), dst_type.scalar == bf16
        if not (src_bf or dst_bf) or (src_bf and dst_bf):
            return orig_cast(self, src, dst_type)
        values = decode(src.data) if src_bf else src.data
        if dst_bf:
            return handle(encode(values.astype(np.float32)), bf16)
        return handle(values.astype(interpreter._get_np_dtype(dst_type)), dst_type.scalar)

    orig_fp_to_fp = builder.create_fp_to_fp

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        if dst_type.scalar == bf16 and src.dtype.scalar in (tl.float32, tl.float16, tl.float64):
            f = src.data.astype(np.float32)
            if rounding_mode == interpreter._ir.ROUNDING_MODE.RTZ:
                return handle((np.ascontiguousarray(f).view(np.uint32) >> 16).astype(np.uint16), bf16)
            return handle(encode(f), bf16)
        if is_bf16(src):
            src = handle(decode(src.data), tl.float32)
        return orig_fp_to_fp(self, src, dst_type, rounding_mode)

    orig_dot = builder.create_dot

    def create_dot(self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any) -> Any:
        if not (is_bf16(a) or is_bf16(b) or is_bf16(d)):
            return orig_dot(self, a, b, d, input_precision, max_num_imprecise_acc)
        fa, fb = (decode(x.data) if is_bf16(x) else x.data.astype(np.float32) for x in (a, b))
        acc = decode(d.data) if is_bf16(d) else d.data
        out = np.matmul(fa, fb, dtype=np.float32) + acc
        return handle(encode(out) if is_bf16(d) else out.astype(d.data.dtype), d.dtype.scalar)

    orig_rmw = builder.create_atomic_rmw

    def create_atomic_rmw(self: Any, rmw_op: Any, ptr: Any, val: Any, mask: Any, sem: Any, scope: Any) -> Any:
        if is_bf16(val):
            raise InterpreterLimitation("bf16 atomics are not emulated under the Triton interpreter (it would "
                                        "operate on the raw bits)")
        return orig_rmw(self, rmw_op, ptr, val, mask, sem, scope)

    def get_bf16(self: Any, value: float) -> Any:
        return handle(encode(np.array([value], dtype=np.float32)), bf16)

    _patch(builder, "binary_op", binary_op)
    _patch(builder, "unary_op", unary_op)
    for name in ("create_fma", "create_clampf", "create_erf", "create_rsqrt"):
        _patch(builder, name, through_fp32(name))
    _patch(builder, "cast_impl", cast_impl)
    _patch(builder, "create_fp_to_fp", create_fp_to_fp)
    _patch(builder, "create_dot", create_dot)
    _patch(builder, "create_atomic_rmw", create_atomic_rmw)
    _patch(builder, "get_bf16", get_bf16)
    _patch_bf16_reductions(decode, encode, rounded)


def _patch_bf16_reductions(decode: Callable[[Any], Any], encode: Callable[[Any], Any],
                           rounded: Callable[[Any], Any]) -> None:
    """tl.sum / tl.max / tl.argmax / tl.cumsum on bf16 (the interpreter's fast paths call numpy on the bits)."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    bf16 = tl.bfloat16
    reduce_ops, scan_ops = interpreter.ReduceOps, interpreter.ScanOps

    def tree_sum(values: Any, axis: int | None, keep_dims: bool) -> Any:
        a = values.reshape(-1) if axis is None else np.moveaxis(values, axis, -1)
        while a.shape[-1] > 1:  # pairwise, rounded to bf16 at every level
            if a.shape[-1] % 2:
                a = np.concatenate([a, np.zeros_like(a[..., :1])], axis=-1)
            a = rounded(a[..., 0::2] + a[..., 1::2])
        out = a[..., 0]
        if keep_dims:
            out = out.reshape((1,) * values.ndim) if axis is None else np.expand_dims(out, axis)
        return out

    orig_sum, orig_min_max = reduce_ops.sum, reduce_ops.min_max

    def reduce_sum(self: Any, input: Any) -> Any:
        if input.dtype.scalar != bf16:
            return orig_sum(self, input)
        return self.to_tensor(encode(tree_sum(decode(input.handle.data), self.axis, self.keep_dims)), input.dtype)

    def min_max(self: Any, input: Any, val_reduce_op: Any, idx_reduce_op: Any = None) -> Any:
        value = input[0] if isinstance(input, tuple) else input
        if value.dtype.scalar != bf16:
            return orig_min_max(self, input, val_reduce_op, idx_reduce_op)
        data = decode(value.handle.data)
        val = idx = None
        if val_reduce_op:
            val = self.to_tensor(encode(val_reduce_op(data, axis=self.axis, keepdims=self.keep_dims)), value.dtype)
        if idx_reduce_op:
            idx = self.to_tensor(idx_reduce_op(data, axis=self.axis, keepdims=self.keep_dims), tl.int32)
        return (val, idx) if val is not None and idx is not None else val if val is not None else idx

    def scan(op: Callable[[Any, Any], Any], orig: Callable[..., Any]) -> Callable[..., Any]:
        def method(self: Any, input: Any) -> Any:
            if input.dtype.scalar != bf16:
                return orig(self, input)
            a = np.moveaxis(decode(input.handle.data), self.axis, 0)
            out = np.empty_like(a)
            acc = a[0]
            out[0] = acc
            for i in range(1, a.shape[0]):  # rounded at every step
                acc = rounded(op(acc, a[i]))
                out[i] = acc
            return [self.to_tensor(encode(np.moveaxis(out, 0, self.axis)), input.dtype)]

        return method

    _patch(reduce_ops, "sum", reduce_sum)
    _patch(reduce_ops, "min_max", min_max)
    _patch(scan_ops, "cumsum", scan(np.add, scan_ops.cumsum))
    _patch(scan_ops, "cumprod", scan(np.multiply, scan_ops.cumprod))


# --------------------------------------------------------------------------------------------- fp8


def _fp8_values(dtype: Any) -> Any:
    """float64 value of each of the 256 codes of a Triton fp8 dtype (NaN and inf codes included): torch's
    decoding where torch has the format, else the interpreter's."""
    import numpy as np
    import torch
    import triton.language as tl
    from triton.runtime import interpreter

    names = {tl.float8e4nv: "float8_e4m3fn", tl.float8e5: "float8_e5m2", tl.float8e4b8: "float8_e4m3fnuz",
             tl.float8e5b16: "float8_e5m2fnuz"}
    codes = np.arange(256, dtype=np.uint8)
    if dtype in names and hasattr(torch, names[dtype]):
        return torch.from_numpy(codes).view(getattr(torch, names[dtype])).double().numpy()
    return interpreter._convert_float(codes, dtype, tl.float32, None).view(np.float32).astype(np.float64)


def fp8_rounder(dtype: Any) -> Callable[[Any], Any]:
    """float32 values -> codes of the fp8 ``dtype``, rounded to nearest even and saturated to the largest finite
    value (the GPU's ``cvt.rn.satfinite``); NaN stays NaN. Built from the 256 codes' values, so it is exact."""
    import numpy as np

    values = _fp8_values(dtype)
    pos = [c for c in range(128) if np.isfinite(values[c]) and values[c] >= 0 and not (c and values[c] == 0)]
    pos.sort(key=lambda c: values[c])
    pv, pc = values[pos], np.array(pos, dtype=np.uint8)
    nan_code = np.uint8(next((c for c in range(256) if np.isnan(values[c])), 0x7F))
    signed_zero = values[0x80] == 0  # fnuz types have no -0 (0x80 is their NaN)

    def rnd(f: Any) -> Any:
        f = np.asarray(f, dtype=np.float64)
        a = np.minimum(np.abs(np.nan_to_num(f, nan=0.0)), pv[-1])
        i = np.clip(np.searchsorted(pv, a, side="left"), 1, len(pv) - 1)
        lo, hi = pv[i - 1], pv[i]
        up = (hi - a < a - lo) | ((hi - a == a - lo) & (pc[i] % 2 == 0))
        code = np.where(up, pc[i], pc[i - 1])
        negative = np.signbit(f) & ((code != 0) | signed_zero)
        code = np.where(negative, code | 0x80, code)
        return np.where(np.isnan(f), nan_code, code).astype(np.uint8)

    return rnd


def _patch_fp8() -> None:
    """Casts to fp8: the interpreter's rounding drops the carry when the mantissa rounds over (31.2 -> 16 in e4m3),
    a factor of 2 on ~2% of values. Arithmetic on fp8 (raw bits there too) raises instead of computing garbage."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    decode_bf16, encode_bf16 = _bf16_codec()
    handle, builder = interpreter.TensorHandle, interpreter.InterpreterBuilder
    fp8 = [tl.float8e4nv, tl.float8e5, tl.float8e4b8, tl.float8e5b16, tl.float8e4b15]
    wide = (tl.float32, tl.float16, tl.float64, tl.bfloat16)
    rounders: dict[Any, Callable[[Any], Any]] = {}
    tables: dict[Any, Any] = {}
    orig_fp_to_fp, orig_binary = builder.create_fp_to_fp, builder.binary_op
    bitwise = {np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.left_shift, np.right_shift}

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        dst, s = dst_type.scalar, src.dtype.scalar
        if dst in fp8 and rounding_mode != interpreter._ir.ROUNDING_MODE.RTZ and s in wide:
            f = decode_bf16(src.data) if s == tl.bfloat16 else src.data.astype(np.float32)
            rnd = rounders.get(dst) or rounders.setdefault(dst, fp8_rounder(dst))
            return handle(rnd(f), dst)
        if s in fp8 and dst in wide:  # decode through the table: NaN and inf codes too
            table = tables.get(s)
            if table is None:
                table = tables[s] = _fp8_values(s).astype(np.float32)
            f = table[src.data.astype(np.int64)]
            out = encode_bf16(f) if dst == tl.bfloat16 else f.astype(interpreter._get_np_dtype(dst_type))
            return handle(out, dst)
        return orig_fp_to_fp(self, src, dst_type, rounding_mode)

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if op not in bitwise and getattr(lhs.dtype, "scalar", None) in fp8:
            raise InterpreterLimitation(f"arithmetic on {lhs.dtype.scalar} is not emulated under the Triton "
                                        "interpreter (it would operate on the raw bits)")
        return orig_binary(self, lhs, rhs, op)

    _patch(builder, "create_fp_to_fp", create_fp_to_fp)
    _patch(builder, "binary_op", binary_op)

# --------------------------------------------------------------------------------------------- limitations

_CUDA_MISSING = re.compile(r"Torch not compiled with CUDA enabled|No CUDA GPUs are available|Found no NVIDIA "
                           r"driver|CUDA driver initialization failed|no CUDA-capable device")
_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\d+ active drivers"), "the Triton interpreter has no GPU driver (triton.runtime.driver.active: "
                                        "{where})"),
    (re.compile(r"extern_elementwise not supported in interpreter mode"),
     "extern elementwise functions are not supported by the Triton interpreter"),
    (re.compile(r"inline_asm not supported in interpreter mode"),
     "tl.inline_asm_elementwise is not supported by the Triton interpreter"),
    (re.compile(r"'InterpreterBuilder' object has no attribute '(\w+)'"),
     "the Triton interpreter does not implement {0}"),
    (re.compile(r"'NoneType' object has no attribute '(_init_handles|n_regs|n_spills|metadata|asm)'"),
     "the precompile API (kernel.warmup(...).{0}) returns nothing under the Triton interpreter"),
]


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(out) < 8 and cur not in out:
        out.append(cur)
        cur = cur.__cause__ if cur.__cause__ is not None else cur.__context__
    return out


def _frames(exc: BaseException) -> Iterable[tuple[str, str]]:
    tb = exc.__traceback__
    while tb is not None:
        yield tb.tb_frame.f_code.co_filename.replace(os.sep, "/"), tb.tb_frame.f_code.co_name
        tb = tb.tb_next


def _uses_libdevice_stubs(exc: BaseException) -> bool:
    """Whether a frame of the traceback runs code whose globals hold ``triton.language.extra.libdevice`` or one
    of its functions (stubs that return None under the interpreter unless :func:`install` ran)."""
    stub = "triton.language.extra.libdevice"
    tb = exc.__traceback__
    while tb is not None:
        for value in list(tb.tb_frame.f_globals.values()):
            if getattr(value, "__name__", None) == stub or getattr(value, "__module__", None) == stub:
                return True
        tb = tb.tb_next
    return False


def limitation(exc: BaseException) -> str | None:
    """A one-line description of the known interpreter limitation behind ``exc``, or None when it is not one
    (then the exception is the kernel's own failure)."""
    chain = _chain(exc)
    frames = [f for e in chain for f in _frames(e)]
    in_triton = [f"{fn}" for path, fn in frames if "/triton/" in path]
    for e in chain:
        text = str(e)
        if isinstance(e, InterpreterLimitation):
            return text.splitlines()[0][:300]
        if _CUDA_MISSING.search(text):
            return f"the submission needs a CUDA device and the CPU run has none ({_CUDA_MISSING.search(text)[0]})"
        for pattern, what in _RULES:
            m = pattern.search(text)
            if m:
                where = "@triton.autotune benchmarking" if "_bench" in in_triton else "a driver query"
                return what.format(*m.groups(), where=where)[:300]
    in_launch = any(path.endswith("triton/runtime/interpreter.py") for path, _ in frames)
    libdevice = [fn for path, fn in frames if "/language/extra/" in path]
    for e in chain:
        text = str(e)
        if libdevice and ("_semantic" in text or "None of type <class 'NoneType'>" in text):
            return f"libdevice.{libdevice[-1]} is not available under the Triton interpreter"
        if in_launch and "NoneType" in text and any(_uses_libdevice_stubs(c) for c in chain):
            return "triton.language.extra.libdevice functions are empty stubs under the Triton interpreter"
        if in_launch and "'float' object has no attribute" in text:
            return "a float scalar argument is a Python float under the Triton interpreter (an fp32 scalar on the GPU)"
        if in_launch and "Did you forget to add @triton.jit" in text:
            return "a triton.language builtin that the Triton interpreter does not provide was called in a kernel"
    return None


__all__ = ["install", "uninstall", "limitation", "LaunchCounter", "InterpreterLimitation"]
