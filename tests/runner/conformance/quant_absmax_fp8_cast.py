# task: quant_absmax
# expect: passed
# style: a plain .to(tl.float8e4nv) cast after an explicit clamp (round to nearest even on the GPU), int8
# style: through libdevice.rint imported from triton.language.extra.cuda; the output format a constexpr picked
# style: on the host from the qdtype string; a 2-D grid over (row, group) with the group width a constexpr
# needs: interp_compat
"""Absmax quantization per group of G columns: program (row, g) loads the group once, s = max(amax, 1e-12) / QMAX,
stores q = cast(clamp(x / s, -QMAX, QMAX)) and the dequantization scale s."""

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda.libdevice import rint

_FORMATS = {"fp8_e4m3": (torch.float8_e4m3fn, 448.0), "int8": (torch.int8, 127.0)}


@triton.jit
def _quant_group(x_ptr, q_ptr, s_ptr, n_cols, n_groups, stride_x, stride_q,
                 G: tl.constexpr, QMAX: tl.constexpr, IS_FP8: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    g = tl.program_id(1)
    cols = g * G + tl.arange(0, G)
    x = tl.load(x_ptr + row * stride_x + cols).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-12) / QMAX
    y = tl.clamp(x / scale, -QMAX, QMAX)
    if IS_FP8:
        q = y.to(tl.float8e4nv)
    else:
        q = rint(y).to(tl.int8)
    tl.store(q_ptr + row * stride_q + cols, q)
    tl.store(s_ptr + row * n_groups + g, scale)


def quantize(x, G, qdtype):
    if qdtype not in _FORMATS:
        raise ValueError(f"unknown qdtype {qdtype!r}")
    dtype, qmax = _FORMATS[qdtype]
    M, N = x.shape
    assert N % G == 0 and G == triton.next_power_of_2(G), "groups must tile the row in powers of two"
    q = torch.empty((M, N), dtype=dtype, device=x.device)
    scales = torch.empty((M, N // G), dtype=torch.float32, device=x.device)
    _quant_group[(M, N // G)](x, q, scales, N, N // G, x.stride(0), q.stride(0), G=G, QMAX=qmax,
                              IS_FP8=dtype == torch.float8_e4m3fn, num_warps=4 if G <= 1024 else 8)
    return q, scales


def kernel(x, *, G, qdtype):
    return quantize(x, G, qdtype)
