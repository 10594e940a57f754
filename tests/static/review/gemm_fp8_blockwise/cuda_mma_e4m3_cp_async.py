"""Block-scaled fp8 GEMM in CUDA (load_inline) for sm_89/sm_90 with mma.sync e4m3 (no wgmma, no TMA).

CTA tile 128x128, BK = 128 = the scale block, 8 warps of 64x32. A and B tiles (both K-major: A [M, K], B [N, K])
go to shared memory with 16-byte cp.async in a 3-stage ring. Per K block every warp runs its MMAs into a
temporary fp32 fragment zeroed at the block start, then folds it into the main accumulator with the block's scale
product a_s[m, kb] * b_s[n0 / 128, kb] (per-block promotion; the fp8 MMA's accumulator never spans two blocks).
"""
import torch
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <cuda_bf16.h>
#include <torch/extension.h>
#include <cstdint>

constexpr int BM = 128, BN = 128, BK = 128, STAGES = 3, THREADS = 256;

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

__device__ __forceinline__ void mma_e4m3(float* d, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__global__ void __launch_bounds__(THREADS) fp8_blockscaled_gemm(const uint8_t* __restrict__ A,
                                                              const uint8_t* __restrict__ B,
                                                              const float* __restrict__ a_s,
                                                              const float* __restrict__ b_s,
                                                              __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* As = smem;
  uint8_t* Bs = smem + STAGES * BM * BK;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
  const int kblocks = K / BK, ks = K / 128;
  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  auto load_stage = [&](int s, int kb) {
    for (int c = threadIdx.x; c < BM * BK / 16; c += THREADS) {
      int r = c / (BK / 16), col = (c % (BK / 16)) * 16;
      int ar = min(m0 + r, M - 1);
      cp_async16(As + s * BM * BK + r * BK + col, A + (size_t)ar * K + kb * BK + col);
      cp_async16(Bs + s * BN * BK + r * BK + col, B + (size_t)(n0 + r) * K + kb * BK + col);
    }
    cp_async_commit();
  };

  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < kblocks) load_stage(s, s);
    else cp_async_commit();
  }
  for (int kb = 0; kb < kblocks; ++kb) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    int nxt = kb + STAGES - 1;
    if (nxt < kblocks) load_stage(nxt % STAGES, nxt);
    else cp_async_commit();
    const uint8_t* as = As + (kb % STAGES) * BM * BK;
    const uint8_t* bs = Bs + (kb % STAGES) * BN * BK;
    float part[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) part[i][j][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 32) {
      uint32_t af[4][4], bf[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        int r = wm + i * 16 + g;
        af[i][0] = *reinterpret_cast<const uint32_t*>(as + r * BK + kk + t * 4);
        af[i][1] = *reinterpret_cast<const uint32_t*>(as + (r + 8) * BK + kk + t * 4);
        af[i][2] = *reinterpret_cast<const uint32_t*>(as + r * BK + kk + 16 + t * 4);
        af[i][3] = *reinterpret_cast<const uint32_t*>(as + (r + 8) * BK + kk + 16 + t * 4);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        int c = wn + j * 8 + g;
        bf[j][0] = *reinterpret_cast<const uint32_t*>(bs + c * BK + kk + t * 4);
        bf[j][1] = *reinterpret_cast<const uint32_t*>(bs + c * BK + kk + 16 + t * 4);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_e4m3(part[i][j], af[i], bf[j]);
    }
    // promote the block's partial with its scales (fp32 FFMA into the main accumulator)
    const float sb = b_s[(n0 / 128) * ks + kb];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int r0 = min(m0 + wm + i * 16 + g, M - 1), r1 = min(r0 + 8, M - 1);
      float s0 = a_s[(size_t)r0 * ks + kb] * sb, s1 = a_s[(size_t)r1 * ks + kb] * sb;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        acc[i][j][0] += part[i][j][0] * s0;
        acc[i][j][1] += part[i][j][1] * s0;
        acc[i][j][2] += part[i][j][2] * s1;
        acc[i][j][3] += part[i][j][3] * s1;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int r = m0 + wm + i * 16 + g, c = n0 + wn + j * 8 + t * 2;
      if (r < M) {
        C[(size_t)r * N + c] = __float2bfloat16(acc[i][j][0]);
        C[(size_t)r * N + c + 1] = __float2bfloat16(acc[i][j][1]);
      }
      if (r + 8 < M) {
        C[(size_t)(r + 8) * N + c] = __float2bfloat16(acc[i][j][2]);
        C[(size_t)(r + 8) * N + c + 1] = __float2bfloat16(acc[i][j][3]);
      }
    }
}

torch::Tensor fp8_gemm(torch::Tensor A, torch::Tensor B, torch::Tensor a_s, torch::Tensor b_s) {
  int M = A.size(0), K = A.size(1), N = B.size(0);
  auto C = torch::empty({M, N}, A.options().dtype(torch::kBFloat16));
  size_t smem = STAGES * (BM + BN) * BK;
  cudaFuncSetAttribute(fp8_blockscaled_gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  dim3 grid(N / BN, (M + BM - 1) / BM);
  fp8_blockscaled_gemm<<<grid, THREADS, smem>>>(
      reinterpret_cast<const uint8_t*>(A.data_ptr()), reinterpret_cast<const uint8_t*>(B.data_ptr()),
      a_s.data_ptr<float>(), b_s.data_ptr<float>(), reinterpret_cast<__nv_bfloat16*>(C.data_ptr()), M, N, K);
  return C;
}
"""

_mod = load_inline(name="review_fp8_mma_sync",
                   cpp_sources="torch::Tensor fp8_gemm(torch::Tensor A, torch::Tensor B, torch::Tensor a_s, torch::Tensor b_s);",
                   cuda_sources=_SRC, functions=["fp8_gemm"], extra_cuda_cflags=["-O3", "-arch=sm_90"])


def kernel(A, B, a_s, b_s):
    return _mod.fp8_gemm(A.contiguous(), B.contiguous(), a_s.contiguous(), b_s.contiguous())
