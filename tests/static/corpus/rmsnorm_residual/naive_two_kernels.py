"""Naive add + RMSNorm: an add kernel writes residual_out, a norm kernel re-reads it and divides by sqrt."""
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, r_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask)
    r = tl.load(r_ptr + row * N + cols, mask=mask)
    tl.store(out_ptr + row * N + cols, x + r, mask=mask)


@triton.jit
def rmsnorm_kernel(h_ptr, w_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    h = tl.load(h_ptr + row * N + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask)
    ms = tl.sum(h * h, axis=0) / N
    y = h / tl.sqrt(ms + eps) * w
    tl.store(y_ptr + row * N + cols, y, mask=mask)


def kernel(x, residual, w, *, eps=1e-6):
    M, N = x.shape
    res_out = torch.empty_like(x)
    y = torch.empty_like(x)
    BLOCK = triton.next_power_of_2(N)
    add_kernel[(M,)](x, residual, res_out, N, BLOCK=BLOCK, num_warps=8)
    rmsnorm_kernel[(M,)](res_out, w, y, N, eps, BLOCK=BLOCK, num_warps=8)
    return y, res_out
