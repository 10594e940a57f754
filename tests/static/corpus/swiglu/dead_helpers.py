"""A plain (row, 1024-column) SwiGLU with silu = g / (1 + exp(-g)) and no hints. An exp2 sigmoid helper, a
[ROWS, BLOCK] tile kernel with evict_first/.cs, and a uint4 CUDA string are defined but never used."""
import torch
import triton
import triton.language as tl

CUDA_SRC = r"""
__global__ void swiglu_u4(const uint4* x, uint4* h, long n) {
    long v = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (v < n) __stcs(h + v, __ldcs(x + v));
    float r = __frcp_rn(1.f + __expf(-1.f));
}
"""


@triton.jit
def _silu_exp2(g):
    return g * (1.0 / (1.0 + tl.exp2(-g * 1.4426950408889634)))


@triton.jit
def _tile_kernel(x_ptr, h_ptr, T, I, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    c = tl.multiple_of(tl.program_id(1) * BLOCK + tl.arange(0, BLOCK), BLOCK)
    p = x_ptr + r[:, None] * 2 * I + c[None, :]
    g = tl.load(p, eviction_policy="evict_first").to(tl.float32)
    u = tl.load(p + I, eviction_policy="evict_first").to(tl.float32)
    tl.store(h_ptr + r[:, None] * I + c[None, :], (_silu_exp2(g) * u).to(tl.bfloat16), cache_modifier=".cs")


@triton.jit
def swiglu_kernel(x_ptr, h_ptr, I, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < I
    g = tl.load(x_ptr + row * stride_x + cols, mask=m, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * stride_x + I + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(h_ptr + row * I + cols, (g / (1.0 + tl.exp(-g)) * u).to(tl.bfloat16), mask=m)


def kernel(x):
    T, two_i = x.shape
    I = two_i // 2
    h = torch.empty((T, I), dtype=x.dtype, device=x.device)
    swiglu_kernel[(T, triton.cdiv(I, 1024))](x, h, I, x.stride(0), BLOCK=1024)
    return h
