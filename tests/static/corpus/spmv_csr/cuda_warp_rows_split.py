"""CUDA SpMV through load_inline: rows of up to 8192 nonzeros get one warp each (lane-strided loop over the
row, __ldcs for values/col_idx, __ldg for x, __shfl_down_sync tree, lane 0 stores); longer rows are cut on the
host into 4096-nonzero chunks, each reduced by one block that adds its partial to y with a single atomicAdd."""
import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>

#define LONG_ROW 8192
#define CHUNK 4096

__device__ __forceinline__ float warp_sum(float s) {
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
    return s;
}

__global__ void spmv_warp_rows(const int* __restrict__ row_ptr, const int* __restrict__ col,
                               const float* __restrict__ val, const float* __restrict__ x, float* __restrict__ y,
                               int M) {
    int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (row >= M) return;
    int start = row_ptr[row], end = row_ptr[row + 1];
    if (end - start > LONG_ROW) return;                 // long rows: chunk kernel
    float s = 0.f;
    for (int i = start + lane; i < end; i += 32) s += __ldcs(val + i) * __ldg(x + __ldcs(col + i));
    s = warp_sum(s);
    if (lane == 0) y[row] = s;
}

__global__ void spmv_long_chunks(const int* __restrict__ chunk_row, const int* __restrict__ chunk_start,
                                 const int* __restrict__ row_ptr, const int* __restrict__ col,
                                 const float* __restrict__ val, const float* __restrict__ x, float* __restrict__ y) {
    __shared__ float part[32];
    int row = chunk_row[blockIdx.x];
    int start = chunk_start[blockIdx.x];
    int end = min(start + CHUNK, row_ptr[row + 1]);
    float s = 0.f;
    for (int i = start + threadIdx.x; i < end; i += blockDim.x) s += __ldcs(val + i) * __ldg(x + __ldcs(col + i));
    s = warp_sum(s);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.f;
        s = warp_sum(s);
        if (threadIdx.x == 0) atomicAdd(y + row, s);
    }
}

torch::Tensor spmv(torch::Tensor row_ptr, torch::Tensor col, torch::Tensor val, torch::Tensor x,
                   torch::Tensor chunk_row, torch::Tensor chunk_start) {
    int M = row_ptr.size(0) - 1;
    auto y = torch::zeros({M}, x.options());
    spmv_warp_rows<<<(M * 32 + 255) / 256, 256>>>(row_ptr.data_ptr<int>(), col.data_ptr<int>(),
                                                    val.data_ptr<float>(), x.data_ptr<float>(), y.data_ptr<float>(), M);
    int n_chunks = chunk_row.size(0);
    if (n_chunks > 0) {
        spmv_long_chunks<<<n_chunks, 256>>>(chunk_row.data_ptr<int>(), chunk_start.data_ptr<int>(),
                                            row_ptr.data_ptr<int>(), col.data_ptr<int>(), val.data_ptr<float>(),
                                            x.data_ptr<float>(), y.data_ptr<float>());
    }
    return y;
}
"""

CPP = ("torch::Tensor spmv(torch::Tensor row_ptr, torch::Tensor col, torch::Tensor val, torch::Tensor x, "
       "torch::Tensor chunk_row, torch::Tensor chunk_start);")
LONG_ROW, CHUNK = 8192, 4096

_mod = None


def _long_chunks(row_ptr):
    lengths = row_ptr[1:] - row_ptr[:-1]
    rows = torch.nonzero(lengths > LONG_ROW).flatten()
    n = (lengths[rows] + CHUNK - 1) // CHUNK
    chunk_row = torch.repeat_interleave(rows, n)
    first = torch.repeat_interleave(torch.cumsum(n, 0) - n, n)
    chunk_start = row_ptr[chunk_row] + (torch.arange(chunk_row.numel(), device=row_ptr.device) - first) * CHUNK
    return chunk_row.int(), chunk_start.int()


def kernel(row_ptr, col_idx, values, x):
    global _mod
    if _mod is None:
        _mod = load_inline(name="corpus_spmv_warp", cpp_sources=CPP, cuda_sources=SRC, functions=["spmv"])
    chunk_row, chunk_start = _long_chunks(row_ptr)
    return _mod.spmv(row_ptr, col_idx, values, x, chunk_row, chunk_start)
