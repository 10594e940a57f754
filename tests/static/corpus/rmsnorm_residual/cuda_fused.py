"""Fused add + RMSNorm in CUDA through load_inline: one block per row, bf16 pairs loaded as __nv_bfloat162
(__ldcs for the streamed inputs, __ldg for w), h kept in registers, fp32 sum of squares, rsqrtf once."""
import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <cuda_bf16.h>
#include <torch/extension.h>

constexpr int PAIRS = 4;

__device__ float block_sum(float v) {
    __shared__ float partial[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = lane < blockDim.x / 32 ? partial[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

__global__ void add_rmsnorm(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ res,
                            const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ y,
                            __nv_bfloat16* __restrict__ res_out, int n, float eps) {
    size_t base = (size_t)blockIdx.x * n;
    const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(x + base);
    const __nv_bfloat162* r2 = reinterpret_cast<const __nv_bfloat162*>(res + base);
    const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(w);
    __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(res_out + base);
    __nv_bfloat162* y2 = reinterpret_cast<__nv_bfloat162*>(y + base);
    float2 hv[PAIRS];
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < PAIRS; ++k) {
        int i = threadIdx.x + k * blockDim.x;
        float2 a = __bfloat1622float2(__ldcs(x2 + i));
        float2 b = __bfloat1622float2(__ldcs(r2 + i));
        float2 h = make_float2(a.x + b.x, a.y + b.y);
        hv[k] = h;
        o2[i] = __floats2bfloat162_rn(h.x, h.y);
        ss += h.x * h.x + h.y * h.y;
    }
    ss = block_sum(ss);
    float rstd = rsqrtf(ss / n + eps);
#pragma unroll
    for (int k = 0; k < PAIRS; ++k) {
        int i = threadIdx.x + k * blockDim.x;
        float2 h = hv[k];
        float2 wv = __bfloat1622float2(__ldg(w2 + i));
        y2[i] = __floats2bfloat162_rn(h.x * rstd * wv.x, h.y * rstd * wv.y);
    }
}

std::vector<torch::Tensor> add_rmsnorm_cuda(torch::Tensor x, torch::Tensor res, torch::Tensor w, double eps) {
    auto y = torch::empty_like(x);
    auto res_out = torch::empty_like(x);
    int n = x.size(1);
    add_rmsnorm<<<x.size(0), n / (2 * PAIRS)>>>(
        reinterpret_cast<const __nv_bfloat16*>(x.data_ptr()), reinterpret_cast<const __nv_bfloat16*>(res.data_ptr()),
        reinterpret_cast<const __nv_bfloat16*>(w.data_ptr()), reinterpret_cast<__nv_bfloat16*>(y.data_ptr()),
        reinterpret_cast<__nv_bfloat16*>(res_out.data_ptr()), n, (float)eps);
    return {y, res_out};
}
"""

_mod = load_inline(name="corpus_add_rmsnorm", cpp_sources="std::vector<torch::Tensor> add_rmsnorm_cuda("
                   "torch::Tensor x, torch::Tensor res, torch::Tensor w, double eps);",
                   cuda_sources=SRC, functions=["add_rmsnorm_cuda"])


def kernel(x, residual, w, *, eps=1e-6):
    y, res_out = _mod.add_rmsnorm_cuda(x, residual, w, eps)
    return y, res_out
