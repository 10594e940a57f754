"""CUDA grouped GEMM through load_inline. A one-thread pre-kernel scans expert_offsets into M-tile starts on the
device; the GEMM grid is the bound (cdiv(T, BM) + E) x cdiv(N, BN) and each block binary-searches the tile starts
for its expert (blocks past the real total exit). wmma bf16 fragments with fp32 accumulators, rows zero-filled
past the expert end, 64-bit expert base. The host picks the <BM, BN> template from T / E."""
import torch
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor grouped_gemm(torch::Tensor X, torch::Tensor W, torch::Tensor eo);"

CUDA = r"""
#include <cuda_bf16.h>
#include <mma.h>
#include <torch/extension.h>
using namespace nvcuda;

__global__ void tile_starts(const int* eo, int* starts, int E, int BM) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        int acc = 0;
        for (int e = 0; e < E; ++e) {
            starts[e] = acc;
            acc += (eo[e + 1] - eo[e] + BM - 1) / BM;
        }
        starts[E] = acc;
    }
}

template <int BM, int BN>
__global__ void moe_gemm(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, const int* eo,
                         const int* starts, int E, int N, int K) {
    constexpr int BK = 32;
    __shared__ __align__(32) __nv_bfloat16 As[BM][BK];
    __shared__ __align__(32) __nv_bfloat16 Bs[BN][BK];
    __shared__ float Cs[BM][BN];
    int tile = blockIdx.x;
    if (tile >= starts[E]) return;
    int lo = 0, hi = E - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (starts[mid] <= tile) lo = mid; else hi = mid - 1;
    }
    int e = lo;
    int row0 = eo[e] + (tile - starts[e]) * BM;
    int row_end = eo[e + 1];
    int n0 = blockIdx.y * BN;
    const __nv_bfloat16* Wb = W + (int64_t)e * N * K;
    int warp = threadIdx.x / 32;
    constexpr int WARPS_N = BN / 16;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[BM / 16];
    for (int i = 0; i < BM / 16; ++i) wmma::fill_fragment(acc[i], 0.f);
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = threadIdx.x; i < BM * BK; i += blockDim.x) {
            int r = i / BK, c = i % BK;
            bool ok = (row0 + r < row_end) && (k0 + c < K);
            As[r][c] = ok ? X[(int64_t)(row0 + r) * K + k0 + c] : __float2bfloat16(0.f);
        }
        for (int i = threadIdx.x; i < BN * BK; i += blockDim.x) {
            int r = i / BK, c = i % BK;
            bool ok = (n0 + r < N) && (k0 + c < K);
            Bs[r][c] = ok ? Wb[(int64_t)(n0 + r) * K + k0 + c] : __float2bfloat16(0.f);
        }
        __syncthreads();
        if (warp < WARPS_N) {
            for (int kk = 0; kk < BK; kk += 16) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
                wmma::load_matrix_sync(fb, &Bs[warp * 16][kk], BK);
                for (int i = 0; i < BM / 16; ++i) {
                    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
                    wmma::load_matrix_sync(fa, &As[i * 16][kk], BK);
                    wmma::mma_sync(acc[i], fa, fb, acc[i]);
                }
            }
        }
        __syncthreads();
    }
    if (warp < WARPS_N)
        for (int i = 0; i < BM / 16; ++i)
            wmma::store_matrix_sync(&Cs[i * 16][warp * 16], acc[i], BN, wmma::mem_row_major);
    __syncthreads();
    for (int i = threadIdx.x; i < BM * BN; i += blockDim.x) {
        int r = i / BN, c = i % BN;
        if (row0 + r < row_end && n0 + c < N)
            Y[(int64_t)(row0 + r) * N + n0 + c] = __float2bfloat16(Cs[r][c]);
    }
}

torch::Tensor grouped_gemm(torch::Tensor X, torch::Tensor W, torch::Tensor eo) {
    int T = X.size(0), K = X.size(1), E = W.size(0), N = W.size(1);
    auto Y = torch::empty({T, N}, X.options());
    auto starts = torch::empty({E + 1}, eo.options());
    auto xp = reinterpret_cast<const __nv_bfloat16*>(X.data_ptr());
    auto wp = reinterpret_cast<const __nv_bfloat16*>(W.data_ptr());
    auto yp = reinterpret_cast<__nv_bfloat16*>(Y.data_ptr());
    if (T / E <= 32) {
        tile_starts<<<1, 32>>>(eo.data_ptr<int>(), starts.data_ptr<int>(), E, 16);
        dim3 grid((T + 15) / 16 + E, (N + 63) / 64);
        moe_gemm<16, 64><<<grid, 128>>>(xp, wp, yp, eo.data_ptr<int>(), starts.data_ptr<int>(), E, N, K);
    } else {
        tile_starts<<<1, 32>>>(eo.data_ptr<int>(), starts.data_ptr<int>(), E, 64);
        dim3 grid((T + 63) / 64 + E, (N + 127) / 128);
        moe_gemm<64, 128><<<grid, 256>>>(xp, wp, yp, eo.data_ptr<int>(), starts.data_ptr<int>(), E, N, K);
    }
    return Y;
}
"""

_ext = load_inline("corpus_moe_grouped_gemm", cpp_sources=CPP, cuda_sources=CUDA, functions=["grouped_gemm"],
                   extra_cuda_cflags=["-O3", "-arch=sm_90"])


def kernel(X, W, expert_offsets):
    return _ext.grouped_gemm(X.contiguous(), W.contiguous(), expert_offsets)
