"""CUDA cross-entropy via load_inline: one block per row; per-thread online (max, sum) over a strided sweep,
merged with warp shuffles and shared memory; one scalar load of z[t]; a second sweep with __ldcs/__stcs writes
the gradient; int64 row offsets; ignored rows branch out."""
import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <cuda_bf16.h>
#include <torch/extension.h>

__global__ void ce_rows(const __nv_bfloat16* __restrict__ logits, const int64_t* __restrict__ target,
                        float* loss, __nv_bfloat16* grad, int V) {
    __shared__ float sm_m[32], sm_s[32];
    int64_t base = (int64_t)blockIdx.x * V;
    int64_t t = target[blockIdx.x];
    if (t == -100) {
        for (int i = threadIdx.x; i < V; i += blockDim.x) grad[base + i] = __float2bfloat16(0.f);
        if (threadIdx.x == 0) loss[blockIdx.x] = 0.f;
        return;
    }
    float m = -INFINITY, s = 0.f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float z = __bfloat162float(logits[base + i]);
        float mn = fmaxf(m, z);
        s = s * __expf(m - mn) + __expf(z - mn);
        m = mn;
    }
    for (int o = 16; o > 0; o >>= 1) {
        float mo = __shfl_xor_sync(0xffffffff, m, o), so = __shfl_xor_sync(0xffffffff, s, o);
        float mn = fmaxf(m, mo);
        s = s * __expf(m - mn) + so * __expf(mo - mn);
        m = mn;
    }
    if (threadIdx.x % 32 == 0) { sm_m[threadIdx.x / 32] = m; sm_s[threadIdx.x / 32] = s; }
    __syncthreads();
    float gm = -INFINITY, gs = 0.f;
    for (int w = 0; w < blockDim.x / 32; ++w) {
        float mn = fmaxf(gm, sm_m[w]);
        gs = gs * __expf(gm - mn) + sm_s[w] * __expf(sm_m[w] - mn);
        gm = mn;
    }
    float inv = 1.f / gs;
    if (threadIdx.x == 0) loss[blockIdx.x] = gm + logf(gs) - __bfloat162float(logits[base + t]);
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float p = __expf(__bfloat162float(__ldcs(logits + base + i)) - gm) * inv;
        __stcs(grad + base + i, __float2bfloat16(i == t ? p - 1.f : p));
    }
}

std::vector<torch::Tensor> ce(torch::Tensor logits, torch::Tensor target) {
    int M = logits.size(0), V = logits.size(1);
    auto loss = torch::empty({M}, logits.options().dtype(torch::kFloat));
    auto grad = torch::empty_like(logits);
    ce_rows<<<M, 1024>>>(reinterpret_cast<const __nv_bfloat16*>(logits.data_ptr()), target.data_ptr<int64_t>(),
                         loss.data_ptr<float>(), reinterpret_cast<__nv_bfloat16*>(grad.data_ptr()), V);
    return {loss, grad};
}
"""

ext = load_inline("corpus_ce", cpp_sources="std::vector<torch::Tensor> ce(torch::Tensor logits, torch::Tensor target);",
                  cuda_sources=SRC, functions=["ce"])


def kernel(logits, target):
    loss, grad = ext.ce(logits, target)
    return loss, grad
