"""Fused add + RMSNorm in the style of vLLM's custom ops: ``kernel`` calls a public op, which calls a private
launcher; one program per row with the whole row in registers, num_warps from an if-chain of literals, and the
inverse root spelled ``1 / tl.sqrt(...)`` once per row."""
import torch
import triton
import triton.language as tl


@triton.jit
def _fused_add_rms_norm_kernel(x_ptr, residual_ptr, weight_ptr, out_ptr, residual_out_ptr, stride_x, stride_r,
                               n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(residual_ptr + row * stride_r + cols, mask=mask, other=0.0).to(tl.float32)
    h = x + r
    tl.store(residual_out_ptr + row * stride_r + cols, h.to(residual_out_ptr.dtype.element_ty), mask=mask)
    variance = tl.sum(h * h, axis=0) / n_cols
    rstd = 1 / tl.sqrt(variance + eps)
    w = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_x + cols, (h * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def _launch_fused_add_rms_norm(x, residual, weight, out, residual_out, eps):
    n_rows, n_cols = x.shape
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    if BLOCK_SIZE >= 16384:
        num_warps = 16
    elif BLOCK_SIZE >= 8192:
        num_warps = 8
    elif BLOCK_SIZE >= 2048:
        num_warps = 4
    else:
        num_warps = 2
    _fused_add_rms_norm_kernel[(n_rows,)](x, residual, weight, out, residual_out, x.stride(0), residual.stride(0),
                                          n_cols, eps, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    out = torch.empty_like(x)
    residual_out = torch.empty_like(residual)
    _launch_fused_add_rms_norm(x, residual, weight, out, residual_out, eps)
    return out, residual_out


def kernel(x, residual, w):
    return fused_add_rms_norm(x, residual, w, 1e-6)
