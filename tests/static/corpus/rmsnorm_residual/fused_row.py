"""Fused add + RMSNorm, one program per row, fp32 statistics and rsqrt; no persistence, no cache hints."""
import torch
import triton
import triton.language as tl


@triton.jit
def _fused_add_rmsnorm(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, N, stride, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    r = tl.load(res_ptr + row * stride + cols, mask=mask, other=0.0)
    h = x.to(tl.float32) + r.to(tl.float32)
    tl.store(res_out_ptr + row * stride + cols, h.to(res_out_ptr.dtype.element_ty), mask=mask)
    ms = tl.sum(h * h, axis=0) / N
    rstd = tl.rsqrt(ms + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, (h * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x, residual, w, *, eps=1e-6):
    M, N = x.shape
    y = torch.empty_like(x)
    res_out = torch.empty_like(x)
    _fused_add_rmsnorm[(M,)](x, residual, w, y, res_out, N, x.stride(0), eps,
                             BLOCK_N=triton.next_power_of_2(N), num_warps=8)
    return y, res_out
