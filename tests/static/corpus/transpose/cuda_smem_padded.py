"""CUDA transpose through load_inline: a 64 x 64 tile per 256-thread CTA staged in a padded shared tile
(tile[64][65]), read coalesced with __ldcs, __syncthreads, and written coalesced with __stcs. A second template
instance with a [256, 16] tile is selected when N <= 16 (skinny matrices)."""
import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>

template <int TM, int TN>
__global__ void transpose_tile(const float* __restrict__ x, float* __restrict__ y, int M, int N) {
    __shared__ float tile[TM][TN + 1];
    int m0 = blockIdx.y * TM, n0 = blockIdx.x * TN;
    int tx = threadIdx.x % TN, ty = threadIdx.x / TN;
    constexpr int ROWS = 256 / TN;
    for (int r = ty; r < TM; r += ROWS) {
        int m = m0 + r, n = n0 + tx;
        if (m < M && n < N) tile[r][tx] = __ldcs(x + (size_t)m * N + n);
    }
    __syncthreads();
    int ox = threadIdx.x % TM, oy = threadIdx.x / TM;
    constexpr int OROWS = 256 / TM;
    for (int c = oy; c < TN; c += OROWS) {
        int n = n0 + c, m = m0 + ox;
        if (m < M && n < N) __stcs(y + (size_t)n * M + m, tile[ox][c]);
    }
}

torch::Tensor transpose(torch::Tensor x) {
    int M = x.size(0), N = x.size(1);
    auto y = torch::empty({N, M}, x.options());
    if (N <= 16) {
        dim3 grid((N + 15) / 16, (M + 255) / 256);
        transpose_tile<256, 16><<<grid, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), M, N);
    } else {
        dim3 grid((N + 63) / 64, (M + 63) / 64);
        transpose_tile<64, 64><<<grid, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), M, N);
    }
    return y;
}
"""

_mod = None


def kernel(X):
    global _mod
    if _mod is None:
        _mod = load_inline(name="corpus_transpose_smem", cpp_sources="torch::Tensor transpose(torch::Tensor x);",
                           cuda_sources=SRC, functions=["transpose"])
    if X.dtype != torch.float32:  # the CUDA path is fp32-only; bf16 goes through a float round trip
        return _mod.transpose(X.float().contiguous()).to(X.dtype)
    return _mod.transpose(X.contiguous())
