"""Fused RoPE in CUDA (load_inline): one 128-thread block per token, q then k heads.

The token's cos/sin rows (D/2 fp32 each, gathered by position) are staged in shared memory once. NeoX: a thread
owns 8 consecutive elements of the first half and the matching 8 of the second (one uint4 each, __ldcs), rotates
them with __fmaf_rn and stores both uint4 in place. GPT-J: a thread owns 8 consecutive elements as four
__nv_bfloat162 pairs, converted with __bfloat1622float2 and packed back with __floats2bfloat162_rn.
"""
import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <cuda_bf16.h>
#include <cuda_runtime.h>

template <int D, bool NEOX>
__global__ void rope_token(__nv_bfloat16* __restrict__ q, __nv_bfloat16* __restrict__ k,
                           const int64_t* __restrict__ pos, const float* __restrict__ cos_c,
                           const float* __restrict__ sin_c, int hq, int hkv) {
    constexpr int HALF = D / 2;
    __shared__ float sc[HALF];
    __shared__ float ss[HALF];
    const int64_t t = blockIdx.x;
    const int64_t p = pos[t];
    for (int i = threadIdx.x; i < HALF; i += blockDim.x) {
        sc[i] = __ldg(cos_c + p * HALF + i);
        ss[i] = __ldg(sin_c + p * HALF + i);
    }
    __syncthreads();
    const int heads = hq + hkv;
    constexpr int VEC_PER_HEAD = NEOX ? HALF / 8 : D / 8;
    for (int w = threadIdx.x; w < heads * VEC_PER_HEAD; w += blockDim.x) {
        const int h = w / VEC_PER_HEAD, v = w % VEC_PER_HEAD;
        __nv_bfloat16* row = h < hq ? q + (t * hq + h) * D : k + (t * hkv + (h - hq)) * D;
        if (NEOX) {
            uint4* p1 = reinterpret_cast<uint4*>(row + v * 8);
            uint4* p2 = reinterpret_cast<uint4*>(row + HALF + v * 8);
            uint4 a = __ldcs(p1), b = __ldcs(p2);
            __nv_bfloat16* ea = reinterpret_cast<__nv_bfloat16*>(&a);
            __nv_bfloat16* eb = reinterpret_cast<__nv_bfloat16*>(&b);
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const int i = v * 8 + j;
                float x1 = __bfloat162float(ea[j]), x2 = __bfloat162float(eb[j]);
                ea[j] = __float2bfloat16(__fmaf_rn(x1, sc[i], -x2 * ss[i]));
                eb[j] = __float2bfloat16(__fmaf_rn(x2, sc[i], x1 * ss[i]));
            }
            *p1 = a;
            *p2 = b;
        } else {
            uint4* pv = reinterpret_cast<uint4*>(row + v * 8);
            uint4 a = __ldcs(pv);
            __nv_bfloat162* pr = reinterpret_cast<__nv_bfloat162*>(&a);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int i = v * 4 + j;
                float2 x = __bfloat1622float2(pr[j]);
                pr[j] = __floats2bfloat162_rn(__fmaf_rn(x.x, sc[i], -x.y * ss[i]),
                                              __fmaf_rn(x.y, sc[i], x.x * ss[i]));
            }
            *pv = a;
        }
    }
}

void rope(torch::Tensor q, torch::Tensor k, torch::Tensor pos, torch::Tensor cos_c, torch::Tensor sin_c,
          bool neox) {
    const int T = q.size(0), hq = q.size(1), hkv = k.size(1), D = q.size(2);
    auto qp = reinterpret_cast<__nv_bfloat16*>(q.data_ptr());
    auto kp = reinterpret_cast<__nv_bfloat16*>(k.data_ptr());
    auto pp = pos.data_ptr<int64_t>();
    auto cp = cos_c.data_ptr<float>();
    auto sp = sin_c.data_ptr<float>();
    if (D == 128) {
        if (neox) rope_token<128, true><<<T, 128>>>(qp, kp, pp, cp, sp, hq, hkv);
        else rope_token<128, false><<<T, 128>>>(qp, kp, pp, cp, sp, hq, hkv);
    } else {
        if (neox) rope_token<64, true><<<T, 128>>>(qp, kp, pp, cp, sp, hq, hkv);
        else rope_token<64, false><<<T, 128>>>(qp, kp, pp, cp, sp, hq, hkv);
    }
}
"""

_ext = load_inline("rope_token_smem", cpp_sources="void rope(torch::Tensor q, torch::Tensor k, torch::Tensor pos, "
                   "torch::Tensor cos_c, torch::Tensor sin_c, bool neox);", cuda_sources=SRC,
                   functions=["rope"], extra_cuda_cflags=["-O3"])


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    q = q.contiguous()
    k = k.contiguous()
    _ext.rope(q, k, positions, cos_cache, sin_cache, style == "neox")
    return q, k
