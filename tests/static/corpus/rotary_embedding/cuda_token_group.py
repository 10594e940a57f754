"""CUDA RoPE through load_inline: one CTA per group of 4 tokens. The group's cos/sin rows are gathered by
position into shared memory once (__ldg), then the threads walk the q heads and the k heads of those tokens.
NeoX: a thread owns elements i and i + D/2; GPT-J: one __nv_bfloat162 pair, converted with __bfloat1622float2
and rounded back once with __floats2bfloat162_rn. q/k are read with __ldcs (streamed)."""
import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <cuda_bf16.h>
#include <torch/extension.h>

#define TOK 4

template <bool GPTJ>
__global__ void rope_group(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                           const long* __restrict__ pos, const float* __restrict__ cos_c,
                           const float* __restrict__ sin_c, __nv_bfloat16* __restrict__ qo,
                           __nv_bfloat16* __restrict__ ko, int T, int hq, int hk, int half) {
    extern __shared__ float cs[];            // [TOK][half] cos, then [TOK][half] sin
    float* sn = cs + TOK * half;
    int t0 = blockIdx.x * TOK;
    for (int i = threadIdx.x; i < TOK * half; i += blockDim.x) {
        int t = t0 + i / half;
        if (t < T) {
            long p = pos[t];
            cs[i] = __ldg(cos_c + p * half + i % half);
            sn[i] = __ldg(sin_c + p * half + i % half);
        }
    }
    __syncthreads();
    int D = 2 * half;
    for (int which = 0; which < 2; ++which) {
        const __nv_bfloat16* x = which == 0 ? q : k;
        __nv_bfloat16* y = which == 0 ? qo : ko;
        int H = which == 0 ? hq : hk;
        int work = TOK * H * half;
        for (int w = threadIdx.x; w < work; w += blockDim.x) {
            int tl_ = w / (H * half), rem = w % (H * half), h = rem / half, i = rem % half;
            int t = t0 + tl_;
            if (t >= T) continue;
            float c = cs[tl_ * half + i], s = sn[tl_ * half + i];
            size_t row = ((size_t)t * H + h) * D;
            if (GPTJ) {
                const __nv_bfloat162* xp = reinterpret_cast<const __nv_bfloat162*>(x + row);
                __nv_bfloat162 v = __ldcs(xp + i);
                float2 f = __bfloat1622float2(v);
                float a = f.x * c - f.y * s;
                float b = f.y * c + f.x * s;
                reinterpret_cast<__nv_bfloat162*>(y + row)[i] = __floats2bfloat162_rn(a, b);
            } else {
                float x1 = __bfloat162float(__ldcs(x + row + i));
                float x2 = __bfloat162float(__ldcs(x + row + half + i));
                y[row + i] = __float2bfloat16(x1 * c - x2 * s);
                y[row + half + i] = __float2bfloat16(x2 * c + x1 * s);
            }
        }
    }
}

std::vector<torch::Tensor> rope(torch::Tensor q, torch::Tensor k, torch::Tensor pos, torch::Tensor cos_c,
                                torch::Tensor sin_c, bool gptj) {
    auto qo = torch::empty_like(q);
    auto ko = torch::empty_like(k);
    int T = q.size(0), hq = q.size(1), hk = k.size(1), half = q.size(2) / 2;
    int blocks = (T + TOK - 1) / TOK;
    size_t smem = 2 * TOK * half * sizeof(float);
    auto qp = reinterpret_cast<const __nv_bfloat16*>(q.data_ptr());
    auto kp = reinterpret_cast<const __nv_bfloat16*>(k.data_ptr());
    auto qop = reinterpret_cast<__nv_bfloat16*>(qo.data_ptr());
    auto kop = reinterpret_cast<__nv_bfloat16*>(ko.data_ptr());
    if (gptj) {
        rope_group<true><<<blocks, 256, smem>>>(qp, kp, pos.data_ptr<long>(), cos_c.data_ptr<float>(),
                                                sin_c.data_ptr<float>(), qop, kop, T, hq, hk, half);
    } else {
        rope_group<false><<<blocks, 256, smem>>>(qp, kp, pos.data_ptr<long>(), cos_c.data_ptr<float>(),
                                                 sin_c.data_ptr<float>(), qop, kop, T, hq, hk, half);
    }
    return {qo, ko};
}
"""

CPP = "std::vector<torch::Tensor> rope(torch::Tensor q, torch::Tensor k, torch::Tensor pos, torch::Tensor cos_c, torch::Tensor sin_c, bool gptj);"

_mod = None


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    global _mod
    if _mod is None:
        _mod = load_inline(name="corpus_rope_group", cpp_sources=CPP, cuda_sources=SRC, functions=["rope"])
    qo, ko = _mod.rope(q.contiguous(), k.contiguous(), positions, cos_cache, sin_cache, style == "gptj")
    return qo, ko
