"""CUDA through load_inline: one warp per bag (whatever its length), lanes covering D with 16-byte vectors
(float4, or 8 bf16 converted with __bfloat1622float2). The lookup loop is unrolled 8x so eight row gathers are in
flight; every lane reads each index and weight itself (no shuffle broadcast). Row addresses in int64, rows read
through __ldg for every workload, fp32 accumulation, one store per bag."""
import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>

__device__ __forceinline__ void add_row(float (&acc)[8], const float* table, int64_t row, int64_t D, int lane,
                                        float w) {
    const float4* p = reinterpret_cast<const float4*>(table + row * D) + lane * 2;
    float4 a = __ldg(p), b = __ldg(p + 1);
    acc[0] += w * a.x; acc[1] += w * a.y; acc[2] += w * a.z; acc[3] += w * a.w;
    acc[4] += w * b.x; acc[5] += w * b.y; acc[6] += w * b.z; acc[7] += w * b.w;
}

__device__ __forceinline__ void add_row(float (&acc)[8], const __nv_bfloat16* table, int64_t row, int64_t D,
                                        int lane, float w) {
    uint4 v = __ldg(reinterpret_cast<const uint4*>(table + row * D) + lane);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
    #pragma unroll
    for (int k = 0; k < 4; ++k) {
        float2 f = __bfloat1622float2(h[k]);
        acc[2 * k] += w * f.x;
        acc[2 * k + 1] += w * f.y;
    }
}

template <typename T>
__global__ void warp_per_bag(const T* __restrict__ table, const int64_t* __restrict__ idx,
                             const int64_t* __restrict__ offsets, const float* __restrict__ psw,
                             float* __restrict__ out, int B, int64_t D) {
    int bag = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (bag >= B) return;
    int64_t lo = offsets[bag], hi = offsets[bag + 1];
    bool active = lane * 8 < D;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    int64_t i = lo;
    for (; i + 8 <= hi; i += 8) {
        #pragma unroll 8
        for (int j = 0; j < 8; ++j) {
            int64_t r = idx[i + j];
            float w = psw[i + j];
            if (active) add_row(acc, table, r, D, lane, w);
        }
    }
    for (; i < hi; ++i) {
        if (active) add_row(acc, table, idx[i], D, lane, psw[i]);
    }
    if (active) {
        float4* o = reinterpret_cast<float4*>(out + (int64_t)bag * D) + lane * 2;
        o[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        o[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    }
}

torch::Tensor embedding_bag(torch::Tensor table, torch::Tensor idx, torch::Tensor offsets, torch::Tensor psw) {
    int B = offsets.size(0) - 1;
    int64_t D = table.size(1);
    auto out = torch::empty({B, D}, table.options().dtype(torch::kFloat32));
    int threads = 256, blocks = (B * 32 + threads - 1) / threads;
    if (table.scalar_type() == torch::kBFloat16) {
        warp_per_bag<__nv_bfloat16><<<blocks, threads>>>(
            reinterpret_cast<const __nv_bfloat16*>(table.data_ptr()), idx.data_ptr<int64_t>(),
            offsets.data_ptr<int64_t>(), psw.data_ptr<float>(), out.data_ptr<float>(), B, D);
    } else {
        warp_per_bag<float><<<blocks, threads>>>(table.data_ptr<float>(), idx.data_ptr<int64_t>(),
            offsets.data_ptr<int64_t>(), psw.data_ptr<float>(), out.data_ptr<float>(), B, D);
    }
    return out;
}
"""

CPP = "torch::Tensor embedding_bag(torch::Tensor table, torch::Tensor idx, torch::Tensor offsets, torch::Tensor psw);"
_ext = None


def kernel(table, indices, offsets, per_sample_weights):
    global _ext
    if _ext is None:
        _ext = load_inline("corpus_ebag_warp", cpp_sources=CPP, cuda_sources=SRC, functions=["embedding_bag"])
    return _ext.embedding_bag(table.contiguous(), indices.contiguous(), offsets.contiguous(),
                              per_sample_weights.float().contiguous())
