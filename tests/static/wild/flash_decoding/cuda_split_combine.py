"""CUDA split-KV decode through load_inline: one CTA per (batch, kv_head, split) whose warps stride over the
split's positions; each warp reads a K row as uint4 vectors with __ldcs (streaming) once and computes the dots of
all G query heads of the group with FMAs and a shuffle reduction, keeping an online softmax per head (scale
D^-0.5*log2(e) folded once, exp2f); partials (fp32 o and lse) go to [B, Hq, S, D] / [B, Hq, S] workspaces and a
combine kernel (one CTA per (b, head)) merges them. S is chosen on the host from the SM count; with S = 1 the
split kernel writes o and no combine is launched."""
import torch
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <cuda_bf16.h>
#include <cuda_runtime.h>
using bf16 = __nv_bfloat16;
constexpr int D = 128;
constexpr int WARPS = 4;
constexpr int MAXG = 8;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <bool SINGLE>
__global__ void __launch_bounds__(WARPS * 32)
split_decode(const bf16* __restrict__ q, const uint4* __restrict__ kc, const uint4* __restrict__ vc,
             bf16* __restrict__ o, float* __restrict__ part, float* __restrict__ lse, int Hkv, int L, int G, int S,
             int chunk, float scale_log2) {
  int bk = blockIdx.x, s = blockIdx.y, b = bk / Hkv, kvh = bk % Hkv;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float qr[MAXG][4];
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < 4; ++j)
      qr[g][j] = __bfloat162float(q[((size_t)b * Hkv * G + kvh * G + g) * D + lane * 4 + j]) * scale_log2;
  float m[MAXG], l[MAXG], acc[MAXG][4];
  for (int g = 0; g < G; ++g) { m[g] = -INFINITY; l[g] = 0.f; for (int j = 0; j < 4; ++j) acc[g][j] = 0.f; }
  int start = s * chunk, end = min(start + chunk, L);
  size_t base = ((size_t)b * Hkv + kvh) * L;
  for (int n = start + warp; n < end; n += WARPS) {
    // 8 bf16 per uint4: lanes 0..15 cover one 128-wide row; each lane reads half a vector's worth for D = 128
    uint4 kv = __ldcs(kc + (base + n) * (D / 8) + lane / 2);
    const bf16* kh = reinterpret_cast<const bf16*>(&kv) + (lane % 2) * 4;
    uint4 vv = __ldcs(vc + (base + n) * (D / 8) + lane / 2);
    const bf16* vh = reinterpret_cast<const bf16*>(&vv) + (lane % 2) * 4;
    for (int g = 0; g < G; ++g) {
      float dot = 0.f;
      for (int j = 0; j < 4; ++j) dot = fmaf(qr[g][j], __bfloat162float(kh[j]), dot);
      float sc = warp_sum(dot);
      float mn = fmaxf(m[g], sc), alpha = exp2f(m[g] - mn), p = exp2f(sc - mn);
      l[g] = l[g] * alpha + p;
      for (int j = 0; j < 4; ++j) acc[g][j] = acc[g][j] * alpha + p * __bfloat162float(vh[j]);
      m[g] = mn;
    }
  }
  __shared__ float sm_m[WARPS][MAXG], sm_l[WARPS][MAXG], sm_acc[WARPS][MAXG][D];
  for (int g = 0; g < G; ++g) {
    if (lane == 0) { sm_m[warp][g] = m[g]; sm_l[warp][g] = l[g]; }
    for (int j = 0; j < 4; ++j) sm_acc[warp][g][lane * 4 + j] = acc[g][j];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * D; idx += WARPS * 32) {
    int g = idx / D, dd = idx % D;
    float mm = -INFINITY;
    for (int w = 0; w < WARPS; ++w) mm = fmaxf(mm, sm_m[w][g]);
    float ll = 0.f, oo = 0.f;
    for (int w = 0; w < WARPS; ++w) {
      float f = exp2f(sm_m[w][g] - mm);
      ll += sm_l[w][g] * f;
      oo += sm_acc[w][g][dd] * f;
    }
    size_t h = (size_t)b * Hkv * G + kvh * G + g;
    if (SINGLE) {
      o[h * D + dd] = __float2bfloat16(oo / ll);
    } else {
      part[(h * S + s) * D + dd] = oo / ll;
      if (dd == 0) lse[h * S + s] = mm + log2f(ll);
    }
  }
}

__global__ void combine(const float* __restrict__ part, const float* __restrict__ lse, bf16* __restrict__ o, int S) {
  size_t h = blockIdx.x;
  __shared__ float w[64];
  __shared__ float top;
  if (threadIdx.x == 0) {
    float mx = -INFINITY;
    for (int s = 0; s < S; ++s) mx = fmaxf(mx, lse[h * S + s]);
    float tot = 0.f;
    for (int s = 0; s < S; ++s) { w[s] = exp2f(lse[h * S + s] - mx); tot += w[s]; }
    for (int s = 0; s < S; ++s) w[s] /= tot;
    top = mx;
  }
  __syncthreads();
  for (int dd = threadIdx.x; dd < D; dd += blockDim.x) {
    float acc = 0.f;
    for (int s = 0; s < S; ++s) acc += w[s] * part[(h * S + s) * D + dd];
    o[h * D + dd] = __float2bfloat16(acc);
  }
}

torch::Tensor decode(torch::Tensor q, torch::Tensor k, torch::Tensor v) {
  int B = q.size(0), Hq = q.size(1), Hkv = k.size(1), L = k.size(2), G = Hq / Hkv, sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, q.get_device());
  int S = (2 * sms + B * Hkv - 1) / (B * Hkv);
  S = max(1, min(S, min(L / 256, 64)));
  int chunk = (L + S - 1) / S;
  auto o = torch::empty_like(q);
  float scale_log2 = rsqrtf((float)D) * 1.4426950408889634f;
  auto kp = reinterpret_cast<const uint4*>(k.data_ptr()), vp = reinterpret_cast<const uint4*>(v.data_ptr());
  auto qp = reinterpret_cast<const bf16*>(q.data_ptr());
  auto op = reinterpret_cast<bf16*>(o.data_ptr());
  dim3 grid(B * Hkv, S);
  if (S == 1) {
    split_decode<true><<<grid, WARPS * 32>>>(qp, kp, vp, op, nullptr, nullptr, Hkv, L, G, 1, chunk, scale_log2);
    return o;
  }
  auto part = torch::empty({B, Hq, S, D}, q.options().dtype(torch::kFloat32));
  auto lse = torch::empty({B, Hq, S}, q.options().dtype(torch::kFloat32));
  split_decode<false><<<grid, WARPS * 32>>>(qp, kp, vp, op, part.data_ptr<float>(), lse.data_ptr<float>(), Hkv, L, G,
                                            S, chunk, scale_log2);
  combine<<<B * Hq, 128>>>(part.data_ptr<float>(), lse.data_ptr<float>(), op, S);
  return o;
}
"""

_mod = load_inline("wild_flash_decode", cpp_sources="torch::Tensor decode(torch::Tensor q, torch::Tensor k, "
                   "torch::Tensor v);", cuda_sources=_SRC, functions=["decode"])


def kernel(q, k_cache, v_cache):
    return _mod.decode(q.contiguous(), k_cache.contiguous(), v_cache.contiguous())
