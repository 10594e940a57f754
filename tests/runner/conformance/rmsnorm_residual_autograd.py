# task: rmsnorm_residual
# expect: passed
# style: a torch.autograd.Function whose forward launches the kernel (called through .apply); a
# style: contiguity decorator and a calculate_settings host helper (block and warps from the row width);
# style: rsqrt imported by name from triton.language.extra.libdevice; eps passed as a runtime float and
# style: used as eps.to(tl.float32); y written to an fp32 scratch buffer and cast on the host with .to
# needs: interp_compat
"""Pre-norm residual add + RMSNorm: one program per row computes h = x + residual in fp32, stores
residual_out = h, then y = h * rsqrt(mean(h^2) + eps) * w from the same registers."""

import functools

import torch
import triton
import triton.language as tl
from triton.language.extra.libdevice import rsqrt

MAX_FUSED_SIZE = 65536


def calculate_settings(n: int) -> tuple[int, int]:
    block = triton.next_power_of_2(n)
    if block > MAX_FUSED_SIZE:
        raise RuntimeError(f"rows of {n} elements exceed the fused block limit {MAX_FUSED_SIZE}")
    warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    return block, warps


def ensure_contiguous(fn):
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        return fn(ctx, *[a.contiguous() if isinstance(a, torch.Tensor) else a for a in args])

    return wrapper


@triton.jit
def _rms_norm_residual_fwd(x_ptr, r_ptr, w_ptr, y_ptr, r_out_ptr, stride_x, stride_r, stride_y, stride_ro,
                           n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * stride_r + cols, mask=mask, other=0.0).to(tl.float32)
    h = x + r
    tl.store(r_out_ptr + row * stride_ro + cols, h.to(r_out_ptr.dtype.element_ty), mask=mask)
    mean_sq = tl.sum(h * h, axis=0) / n_cols
    inv = rsqrt(mean_sq + eps.to(tl.float32))
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, h * inv * w, mask=mask)


class RMSNormResidualFunction(torch.autograd.Function):
    @staticmethod
    @ensure_contiguous
    def forward(ctx, x, residual, w, eps):
        shape = x.shape
        x2, r2 = x.view(-1, shape[-1]), residual.view(-1, shape[-1])
        n_rows, n_cols = x2.shape
        block, warps = calculate_settings(n_cols)
        y32 = torch.empty((n_rows, n_cols), dtype=torch.float32, device=x.device)
        r_out = torch.empty_like(r2)
        _rms_norm_residual_fwd[(n_rows,)](x2, r2, w, y32, r_out, x2.stride(0), r2.stride(0), y32.stride(0),
                                          r_out.stride(0), n_cols, eps, BLOCK_SIZE=block, num_warps=warps)
        return y32.to(x.dtype).view(shape), r_out.view(shape)


def kernel(x, residual, w):
    return RMSNormResidualFunction.apply(x, residual, w, 1e-6)
