"""Flash attention forward in CUDA (load_inline) with wmma: S and P go through shared memory.

One CTA per (q block, (batch, kv head, group member)): blockIdx.x enumerates query heads with the group member
fastest, so the G heads reading one KV head run together; q blocks are taken in reverse (heaviest causal blocks
first). K/V blocks are double-buffered with cp.async. Per K/V block: S = Q K^T by wmma into shared fp32, each warp
runs the online softmax on its rows (exp2f on log2-scaled scores, running max / sum, O rows rescaled in shared
memory), writes P as bf16 to shared memory, then O += P V by wmma (the accumulator fragment loaded from and stored
back to shared memory). The causal loop stops at the diagonal and masks only the blocks that cross it.
"""

import torch
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <cuda_bf16.h>
#include <mma.h>
#include <torch/extension.h>
using namespace nvcuda;
typedef __nv_bfloat16 bf16;

constexpr int THREADS = 256;
constexpr float LOG2E_F = 1.4426950408889634f;

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(src));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

template <int D, int BM, int BN>
__global__ void __launch_bounds__(THREADS) flash_fwd(const bf16* __restrict__ Q, const bf16* __restrict__ K,
                                                     const bf16* __restrict__ V, bf16* __restrict__ O,
                                                     float* __restrict__ LSE, int S, int HQ, int HKV, float scale_log2,
                                                     bool causal) {
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem);
  bf16* Ks = Qs + BM * D;            // [2][BN][D]
  bf16* Vs = Ks + 2 * BN * D;        // [2][BN][D]
  float* Ss = reinterpret_cast<float*>(Vs + 2 * BN * D);  // [BM][BN]
  bf16* Ps = reinterpret_cast<bf16*>(Ss + BM * BN);        // [BM][BN]
  float* Os = reinterpret_cast<float*>(Ps + BM * BN);      // [BM][D]
  __shared__ float row_m[BM], row_l[BM], row_alpha[BM];

  const int G = HQ / HKV;
  const int g = blockIdx.x % G;
  const int kvh = (blockIdx.x / G) % HKV;
  const int b = blockIdx.x / (G * HKV);
  const int h = kvh * G + g;
  const int m_block = gridDim.y - 1 - blockIdx.y;
  const int q0 = m_block * BM;
  const bf16* q = Q + ((size_t)(b * HQ + h) * S + q0) * D;
  const bf16* k = K + (size_t)(b * HKV + kvh) * S * D;
  const bf16* v = V + (size_t)(b * HKV + kvh) * S * D;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  for (int i = threadIdx.x; i < BM * D / 8; i += THREADS) cp_async16(Qs + i * 8, q + i * 8);
  for (int i = threadIdx.x; i < BM * D; i += THREADS) Os[i] = 0.f;
  for (int r = threadIdx.x; r < BM; r += THREADS) { row_m[r] = -INFINITY; row_l[r] = 0.f; }
  auto load_kv = [&](int buf, int n0) {
    for (int i = threadIdx.x; i < BN * D / 8; i += THREADS) {
      cp_async16(Ks + buf * BN * D + i * 8, k + (size_t)n0 * D + i * 8);
      cp_async16(Vs + buf * BN * D + i * 8, v + (size_t)n0 * D + i * 8);
    }
    cp_commit();
  };
  const int n_end = causal ? min(S, q0 + BM) : S;
  load_kv(0, 0);

  constexpr int WARPS_M = BM / 16, WARPS_N = 8 / WARPS_M;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  for (int n0 = 0, it = 0; n0 < n_end; n0 += BN, ++it) {
    const int buf = it & 1;
    cp_wait_all();
    __syncthreads();
    if (n0 + BN < n_end) load_kv(buf ^ 1, n0 + BN);
    // S = Q K^T
    for (int c = wn * (BN / WARPS_N); c < (wn + 1) * (BN / WARPS_N); c += 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> s_frag;
      wmma::fill_fragment(s_frag, 0.f);
      for (int kk = 0; kk < D; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> qa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> kb;
        wmma::load_matrix_sync(qa, Qs + wm * 16 * D + kk, D);
        wmma::load_matrix_sync(kb, Ks + buf * BN * D + c * D + kk, D);
        wmma::mma_sync(s_frag, qa, kb, s_frag);
      }
      wmma::store_matrix_sync(Ss + wm * 16 * BN + c, s_frag, BN, wmma::mem_row_major);
    }
    __syncthreads();
    // online softmax, one warp per row
    const bool diag = causal && n0 + BN > q0;
    for (int r = warp; r < BM; r += THREADS / 32) {
      float mx = row_m[r];
      for (int c = lane; c < BN; c += 32) {
        float s = Ss[r * BN + c] * scale_log2;
        if (diag && n0 + c > q0 + r) s = -INFINITY;
        Ss[r * BN + c] = s;
        mx = fmaxf(mx, s);
      }
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, o));
      float sum = 0.f;
      for (int c = lane; c < BN; c += 32) {
        float p = exp2f(Ss[r * BN + c] - mx);
        Ps[r * BN + c] = __float2bfloat16(p);
        sum += p;
      }
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o);
      float alpha = exp2f(row_m[r] - mx);
      for (int c = lane; c < D; c += 32) Os[r * D + c] *= alpha;
      if (lane == 0) { row_l[r] = row_l[r] * alpha + sum; row_m[r] = mx; }
    }
    __syncthreads();
    // O += P V
    for (int c = wn * (D / WARPS_N); c < (wn + 1) * (D / WARPS_N); c += 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> o_frag;
      wmma::load_matrix_sync(o_frag, Os + wm * 16 * D + c, D, wmma::mem_row_major);
      for (int kk = 0; kk < BN; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> pa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> vb;
        wmma::load_matrix_sync(pa, Ps + wm * 16 * BN + kk, BN);
        wmma::load_matrix_sync(vb, Vs + buf * BN * D + kk * D + c, D);
        wmma::mma_sync(o_frag, pa, vb, o_frag);
      }
      wmma::store_matrix_sync(Os + wm * 16 * D + c, o_frag, D, wmma::mem_row_major);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < BM * D; i += THREADS) {
    int r = i / D;
    if (q0 + r < S) O[((size_t)(b * HQ + h) * S + q0) * D + i] = __float2bfloat16(Os[i] / row_l[r]);
  }
  for (int r = threadIdx.x; r < BM; r += THREADS)
    if (q0 + r < S) LSE[(size_t)(b * HQ + h) * S + q0 + r] = (row_m[r] + log2f(row_l[r])) / LOG2E_F;
}

template <int D, int BM, int BN>
void launch(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor o, torch::Tensor lse, bool causal) {
  int B = q.size(0), HQ = q.size(1), S = q.size(2), HKV = k.size(1);
  size_t smem = (BM * D + 4 * BN * D) * 2 + BM * BN * 4 + BM * BN * 2 + BM * D * 4;
  auto kern = flash_fwd<D, BM, BN>;
  cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  dim3 grid(B * HQ, (S + BM - 1) / BM);
  kern<<<grid, THREADS, smem>>>(reinterpret_cast<const bf16*>(q.data_ptr()), reinterpret_cast<const bf16*>(k.data_ptr()),
                                reinterpret_cast<const bf16*>(v.data_ptr()), reinterpret_cast<bf16*>(o.data_ptr()),
                                lse.data_ptr<float>(), S, HQ, HKV, LOG2E_F / sqrtf((float)D), causal);
}

std::vector<torch::Tensor> attention(torch::Tensor q, torch::Tensor k, torch::Tensor v, bool causal) {
  auto o = torch::empty_like(q);
  auto lse = torch::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(torch::kFloat32));
  if (q.size(3) == 256) launch<256, 64, 32>(q, k, v, o, lse, causal);
  else launch<128, 128, 64>(q, k, v, o, lse, causal);
  return {o, lse};
}
"""

_ext = load_inline(name="review_flash_wmma",
                   cpp_sources="std::vector<torch::Tensor> attention(torch::Tensor q, torch::Tensor k, torch::Tensor v, bool causal);",
                   cuda_sources=_SRC, functions=["attention"], extra_cuda_cflags=["-O3", "-arch=sm_90"])


def kernel(q, k, v, *, causal):
    o, lse = _ext.attention(q.contiguous(), k.contiguous(), v.contiguous(), causal)
    return o, lse
