"""Honest CUDA softmax through load_inline: one block per row, fp32 accumulation (the CUDA build-cache test)."""

import torch
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void d2k_softmax_rows(const float* __restrict__ x, float* __restrict__ y, int n_cols) {
    extern __shared__ float red[];
    const float* xr = x + (size_t)blockIdx.x * n_cols;
    float* yr = y + (size_t)blockIdx.x * n_cols;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < n_cols; j += blockDim.x) m = fmaxf(m, xr[j]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0.f;
    for (int j = threadIdx.x; j < n_cols; j += blockDim.x) sum += __expf(xr[j] - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.f / red[0];
    for (int j = threadIdx.x; j < n_cols; j += blockDim.x) yr[j] = __expf(xr[j] - m) * inv;
}

torch::Tensor softmax_rows(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int threads = 256;
    d2k_softmax_rows<<<x.size(0), threads, threads * sizeof(float), at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), (int)x.size(1));
    return y;
}
"""

_mod = load_inline(name="d2k_test_softmax_rows", cpp_sources="torch::Tensor softmax_rows(torch::Tensor x);",
                   cuda_sources=_CUDA, functions=["softmax_rows"], extra_cuda_cflags=["-O3"])


def kernel(x):
    return _mod.softmax_rows(x.contiguous())
