"""Fused cross-entropy in CUDA (load_inline): one 512-thread CTA per row.

Sweep 1: each thread carries an online (m, s) over a strided walk of the row, merged across the warp with
shuffles and across the 16 warps through shared memory; z[t] is one scalar load. Sweep 2 re-reads the row with
__ldcs and streams the gradient with __stcs. An ignored row (t == -100) is a CTA-uniform branch that writes zeros.
"""
import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math_constants.h>

#define THREADS 512

__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    s = s * expf(m - mn) + s2 * expf(m2 - mn);
    m = mn;
}

__global__ void __launch_bounds__(THREADS) ce_row_kernel(
        const __nv_bfloat16* __restrict__ logits, const int64_t* __restrict__ target,
        float* __restrict__ loss, __nv_bfloat16* __restrict__ grad, int64_t V) {
    __shared__ float sm_m[THREADS / 32];
    __shared__ float sm_s[THREADS / 32];
    const int64_t row = blockIdx.x;
    const __nv_bfloat16* src = logits + row * V;
    __nv_bfloat16* dst = grad + row * V;
    const int64_t t = target[row];
    if (t == -100) {
        for (int64_t j = threadIdx.x; j < V; j += THREADS) __stcs(dst + j, __float2bfloat16(0.f));
        if (threadIdx.x == 0) loss[row] = 0.f;
        return;
    }
    float m = -CUDART_INF_F, s = 0.f;
    for (int64_t j = threadIdx.x; j < V; j += THREADS) {
        float z = __bfloat162float(src[j]);
        float mn = fmaxf(m, z);
        s = s * expf(m - mn) + expf(z - mn);
        m = mn;
    }
    for (int off = 16; off > 0; off >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffff, m, off);
        float s2 = __shfl_xor_sync(0xffffffff, s, off);
        merge(m, s, m2, s2);
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) { sm_m[warp] = m; sm_s[warp] = s; }
    __syncthreads();
    m = sm_m[0]; s = sm_s[0];
    for (int w = 1; w < THREADS / 32; ++w) merge(m, s, sm_m[w], sm_s[w]);
    if (threadIdx.x == 0) loss[row] = m + logf(s) - __bfloat162float(src[t]);
    const float inv_s = 1.f / s;
    for (int64_t j = threadIdx.x; j < V; j += THREADS) {
        float z = __bfloat162float(__ldcs(src + j));
        float p = expf(z - m) * inv_s;
        p = (j == t) ? p - 1.f : p;
        __stcs(dst + j, __float2bfloat16(p));
    }
}

std::vector<torch::Tensor> ce_forward(torch::Tensor logits, torch::Tensor target) {
    const int64_t M = logits.size(0), V = logits.size(1);
    auto loss = torch::empty({M}, logits.options().dtype(torch::kFloat32));
    auto grad = torch::empty_like(logits);
    ce_row_kernel<<<M, THREADS>>>(
        reinterpret_cast<const __nv_bfloat16*>(logits.data_ptr()), target.data_ptr<int64_t>(),
        loss.data_ptr<float>(), reinterpret_cast<__nv_bfloat16*>(grad.data_ptr()), V);
    return {loss, grad};
}
"""

CPP_SRC = "std::vector<torch::Tensor> ce_forward(torch::Tensor logits, torch::Tensor target);"

_mod = None


def _ext():
    global _mod
    if _mod is None:
        _mod = load_inline("ce_block_row", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                           functions=["ce_forward"], extra_cuda_cflags=["-O3", "--use_fast_math"])
    return _mod


def kernel(logits, target):
    loss, grad = _ext().ce_forward(logits.contiguous(), target.contiguous())
    return loss, grad
