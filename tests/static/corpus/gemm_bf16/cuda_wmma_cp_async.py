"""CUDA GEMM through load_inline: wmma 16x16x16 bf16 fragments with fp32 accumulators, A/B tiles staged in shared
memory by cp.async (double buffered), one CTA per 64x64 tile in launch order."""
import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <mma.h>
#include <torch/extension.h>
using namespace nvcuda;

constexpr int BM = 64, BN = 64, BK = 32;

__global__ void gemm_wmma(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int M, int N, int K) {
    __shared__ __align__(128) __nv_bfloat16 As[2][BM][BK];
    __shared__ __align__(128) __nv_bfloat16 Bs[2][BN][BK];
    __shared__ float Cs[BM][BN];
    int tile_m = blockIdx.y, tile_n = blockIdx.x;
    int warp = threadIdx.x / 32;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
    wmma::fill_fragment(acc[0], 0.f);
    wmma::fill_fragment(acc[1], 0.f);
    int ktiles = K / BK;
    for (int s = 0; s < 2 && s < ktiles; ++s) {
        for (int i = threadIdx.x; i < BM * BK / 8; i += blockDim.x) {
            int r = i / (BK / 8), c = (i % (BK / 8)) * 8;
            __pipeline_memcpy_async(&As[s][r][c], A + (size_t)(tile_m * BM + r) * K + s * BK + c, 16);
            __pipeline_memcpy_async(&Bs[s][r][c], B + (size_t)(tile_n * BN + r) * K + s * BK + c, 16);
        }
        __pipeline_commit();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        int stage = kt % 2;
        __pipeline_wait_prior(1);
        __syncthreads();
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
            wmma::load_matrix_sync(fa, &As[stage][(warp / 2) * 16][kk], BK);
            for (int j = 0; j < 2; ++j) {
                wmma::load_matrix_sync(fb, &Bs[stage][((warp % 2) * 2 + j) * 16][kk], BK);
                wmma::mma_sync(acc[j], fa, fb, acc[j]);
            }
        }
        __syncthreads();
        if (kt + 2 < ktiles) {
            for (int i = threadIdx.x; i < BM * BK / 8; i += blockDim.x) {
                int r = i / (BK / 8), c = (i % (BK / 8)) * 8;
                __pipeline_memcpy_async(&As[stage][r][c], A + (size_t)(tile_m * BM + r) * K + (kt + 2) * BK + c, 16);
                __pipeline_memcpy_async(&Bs[stage][r][c], B + (size_t)(tile_n * BN + r) * K + (kt + 2) * BK + c, 16);
            }
        }
        __pipeline_commit();
    }
    for (int j = 0; j < 2; ++j)
        wmma::store_matrix_sync(&Cs[(warp / 2) * 16][((warp % 2) * 2 + j) * 16], acc[j], BN, wmma::mem_row_major);
    __syncthreads();
    for (int i = threadIdx.x; i < BM * BN; i += blockDim.x) {
        int r = i / BN, c = i % BN;
        C[(size_t)(tile_m * BM + r) * N + tile_n * BN + c] = __float2bfloat16(Cs[r][c]);
    }
}

torch::Tensor gemm(torch::Tensor A, torch::Tensor B) {
    int M = A.size(0), K = A.size(1), N = B.size(0);
    auto C = torch::empty({M, N}, A.options());
    dim3 grid(N / BN, M / BM);
    gemm_wmma<<<grid, 256>>>(reinterpret_cast<const __nv_bfloat16*>(A.data_ptr()),
                             reinterpret_cast<const __nv_bfloat16*>(B.data_ptr()),
                             reinterpret_cast<__nv_bfloat16*>(C.data_ptr()), M, N, K);
    return C;
}
"""

ext = load_inline("corpus_gemm_wmma", cpp_sources="torch::Tensor gemm(torch::Tensor A, torch::Tensor B);",
                  cuda_sources=SRC, functions=["gemm"], extra_cuda_cflags=["-arch=sm_90"])


def kernel(A, B):
    return ext.gemm(A.contiguous(), B.contiguous())
