"""CUDA softmax through load_inline: one block per row; each thread keeps an online (max, sum) over its strided
elements, the pairs are merged with warp shuffles and shared memory; a second strided pass normalises."""
import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <cuda_runtime.h>
#include <torch/extension.h>

__device__ __forceinline__ void merge(float& m, float& s, float m_o, float s_o) {
    float m_n = fmaxf(m, m_o);
    s = s * __expf(m - m_n) + s_o * __expf(m_o - m_n);
    m = m_n;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float sm_m[32];
    __shared__ float sm_s[32];
    const float* xr = x + (size_t)blockIdx.x * n;
    float* yr = y + (size_t)blockIdx.x * n;
    float m = -INFINITY, s = 0.f;
    const float4* xv = reinterpret_cast<const float4*>(xr);
    for (int i = threadIdx.x; i < n / 4; i += blockDim.x) {
        float4 v = xv[i];
        float vm = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
        float m_n = fmaxf(m, vm);
        s = s * __expf(m - m_n) + __expf(v.x - m_n) + __expf(v.y - m_n) + __expf(v.z - m_n) + __expf(v.w - m_n);
        m = m_n;
    }
    for (int off = 16; off > 0; off >>= 1) {
        float m_o = __shfl_xor_sync(0xffffffff, m, off);
        float s_o = __shfl_xor_sync(0xffffffff, s, off);
        merge(m, s, m_o, s_o);
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) { sm_m[warp] = m; sm_s[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        int nw = blockDim.x / 32;
        m = lane < nw ? sm_m[lane] : -INFINITY;
        s = lane < nw ? sm_s[lane] : 0.f;
        for (int off = 16; off > 0; off >>= 1) {
            merge(m, s, __shfl_xor_sync(0xffffffff, m, off), __shfl_xor_sync(0xffffffff, s, off));
        }
        if (lane == 0) { sm_m[0] = m; sm_s[0] = s; }
    }
    __syncthreads();
    float row_max = sm_m[0];
    float inv = 1.f / sm_s[0];
    float4* yv = reinterpret_cast<float4*>(yr);
    for (int i = threadIdx.x; i < n / 4; i += blockDim.x) {
        float4 v = __ldcs(xv + i);
        float4 o;
        o.x = __expf(v.x - row_max) * inv;
        o.y = __expf(v.y - row_max) * inv;
        o.z = __expf(v.z - row_max) * inv;
        o.w = __expf(v.w - row_max) * inv;
        __stcs(yv + i, o);
    }
}

torch::Tensor softmax_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int rows = x.size(0), n = x.size(1);
    softmax_rows<<<rows, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

CPP_SRC = "torch::Tensor softmax_cuda(torch::Tensor x);"

_ext = None


def _module():
    global _ext
    if _ext is None:
        _ext = load_inline(name="corpus_softmax_rows", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                           functions=["softmax_cuda"], extra_cuda_cflags=["-O3"])
    return _ext


def kernel(x):
    return _module().softmax_cuda(x.float().contiguous()).to(x.dtype)
