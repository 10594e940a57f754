"""Naive-partial SwiGLU: a first kernel writes silu(g) to a bf16 temporary, a second multiplies it by u. Both use
a (row, 1024-column block) grid and tl.sigmoid."""
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def silu_kernel(x_ptr, t_ptr, I, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < I
    g = tl.load(x_ptr + row * stride_x + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(t_ptr + row * I + cols, (g * tl.sigmoid(g)).to(tl.bfloat16), mask=m)


@triton.jit
def mul_kernel(t_ptr, x_ptr, h_ptr, I, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < I
    a = tl.load(t_ptr + row * I + cols, mask=m, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * stride_x + I + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(h_ptr + row * I + cols, (a * u).to(tl.bfloat16), mask=m)


def kernel(x):
    T, two_i = x.shape
    I = two_i // 2
    tmp = torch.empty((T, I), dtype=x.dtype, device=x.device)
    h = torch.empty_like(tmp)
    grid = (T, triton.cdiv(I, BLOCK))
    silu_kernel[grid](x, tmp, I, x.stride(0), BLOCK=BLOCK)
    mul_kernel[grid](tmp, x, h, I, x.stride(0), BLOCK=BLOCK)
    return h
