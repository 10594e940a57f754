"""Paged decode attention in CUDA (load_inline), vLLM-v2 style partitions with GQA packing on CUDA cores.

Grid (KV head, sequence, partition of 512 tokens); partitions past a sequence's length exit at once, so a long
sequence gets proportionally more CTAs. A CTA serves the G query heads of its KV head: each warp walks tokens, reads
the token's K row once (uint2 per lane) and forms the G dot products with the pre-scaled queries held in shared
memory, keeping a per-head online softmax (exp2f) and fp32 accumulators in registers. The partition's block-table
slice is staged in shared memory first; K/V rows are addressed with int64 page offsets. A sequence with one
partition writes o directly; otherwise fp32 partials + lse go to a merge kernel, which skips unsplit sequences.
"""

import torch
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <cuda_bf16.h>
#include <torch/extension.h>
typedef __nv_bfloat16 bf16;

constexpr int PARTITION = 512, WARPS = 4, D = 128, MAX_G = 8, P = 16;

__device__ __forceinline__ void load4(const bf16* p, float* out) {
  uint2 raw = *reinterpret_cast<const uint2*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
  float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
  out[0] = a.x; out[1] = a.y; out[2] = b.x; out[3] = b.y;
}

__global__ void __launch_bounds__(WARPS * 32) paged_decode(const bf16* __restrict__ q, const bf16* __restrict__ kc,
                                                          const bf16* __restrict__ vc, const int* __restrict__ bt,
                                                          const int* __restrict__ lens, bf16* __restrict__ o,
                                                          float* __restrict__ part_o, float* __restrict__ part_lse,
                                                          int HQ, int HKV, int max_pages, int max_parts,
                                                          long long page_stride, int slot_stride, float scale_log2) {
  const int kvh = blockIdx.x, b = blockIdx.y, part = blockIdx.z;
  const int ctx = lens[b];
  const int start = part * PARTITION;
  if (start >= ctx) return;
  const int end = min(ctx, start + PARTITION);
  const int n_parts = (ctx + PARTITION - 1) / PARTITION;
  const int G = HQ / HKV;
  __shared__ float qs[MAX_G][D];
  __shared__ int pages[PARTITION / P];
  __shared__ float red_m[WARPS][MAX_G], red_l[WARPS][MAX_G], red_acc[WARPS][MAX_G][D];
  for (int i = threadIdx.x; i < G * D; i += blockDim.x)
    qs[i / D][i % D] = __bfloat162float(q[((size_t)b * HQ + kvh * G + i / D) * D + i % D]) * scale_log2;
  for (int i = threadIdx.x; i < (end - start + P - 1) / P; i += blockDim.x) pages[i] = bt[b * max_pages + start / P + i];
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float m[MAX_G], l[MAX_G], acc[MAX_G][4];
#pragma unroll
  for (int g = 0; g < MAX_G; ++g) {
    m[g] = -INFINITY; l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[g][e] = 0.f;
  }
  for (int t = start + warp; t < end; t += WARPS) {
    const long long row = (long long)pages[(t - start) / P] * page_stride + (long long)(t % P) * slot_stride +
                          (long long)kvh * D + lane * 4;
    float kf[4], vf[4];
    load4(kc + row, kf);
    load4(vc + row, vf);
#pragma unroll
    for (int g = 0; g < MAX_G; ++g) {
      if (g >= G) break;
      float s = kf[0] * qs[g][lane * 4] + kf[1] * qs[g][lane * 4 + 1] + kf[2] * qs[g][lane * 4 + 2] +
                kf[3] * qs[g][lane * 4 + 3];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffff, s, off);
      float m_new = fmaxf(m[g], s);
      float alpha = exp2f(m[g] - m_new), p = exp2f(s - m_new);
      l[g] = l[g] * alpha + p;
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[g][e] = acc[g][e] * alpha + p * vf[e];
      m[g] = m_new;
    }
  }
  // merge the warps' states per head
  for (int g = 0; g < G; ++g) {
    if (lane == 0) { red_m[warp][g] = m[g]; red_l[warp][g] = l[g]; }
#pragma unroll
    for (int e = 0; e < 4; ++e) red_acc[warp][g][lane * 4 + e] = acc[g][e];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
    int g = i / D, d = i % D;
    float mx = -INFINITY;
    for (int w = 0; w < WARPS; ++w) mx = fmaxf(mx, red_m[w][g]);
    float num = 0.f, den = 0.f;
    for (int w = 0; w < WARPS; ++w) {
      float sc = red_m[w][g] == -INFINITY ? 0.f : exp2f(red_m[w][g] - mx);
      num += red_acc[w][g][d] * sc;
      den += red_l[w][g] * sc;
    }
    const size_t head = (size_t)b * HQ + kvh * G + g;
    if (n_parts == 1) {
      o[head * D + d] = __float2bfloat16(num / den);
    } else {
      part_o[(head * max_parts + part) * D + d] = num / den;
      if (d == 0) part_lse[head * max_parts + part] = mx + log2f(den);
    }
  }
}

__global__ void merge_parts(const float* __restrict__ part_o, const float* __restrict__ part_lse,
                            const int* __restrict__ lens, bf16* __restrict__ o, int HQ, int max_parts) {
  const int head = blockIdx.x, b = head / HQ, d = threadIdx.x;
  const int n_parts = (lens[b] + PARTITION - 1) / PARTITION;
  if (n_parts <= 1) return;
  float mx = -INFINITY;
  for (int p = 0; p < n_parts; ++p) mx = fmaxf(mx, part_lse[head * max_parts + p]);
  float num = 0.f, den = 0.f;
  for (int p = 0; p < n_parts; ++p) {
    float w = exp2f(part_lse[head * max_parts + p] - mx);
    num += w * part_o[((size_t)head * max_parts + p) * D + d];
    den += w;
  }
  o[(size_t)head * D + d] = __float2bfloat16(num / den);
}

torch::Tensor paged_attention(torch::Tensor q, torch::Tensor kc, torch::Tensor vc, torch::Tensor bt, torch::Tensor lens) {
  int B = q.size(0), HQ = q.size(1), HKV = kc.size(2), max_pages = bt.size(1);
  int max_parts = (max_pages * P + PARTITION - 1) / PARTITION;
  auto o = torch::empty_like(q);
  auto part_o = torch::empty({B * HQ * max_parts, D}, q.options().dtype(torch::kFloat32));
  auto part_lse = torch::empty({B * HQ * max_parts}, q.options().dtype(torch::kFloat32));
  float scale_log2 = 1.4426950408889634f / sqrtf((float)D);
  dim3 grid(HKV, B, max_parts);
  paged_decode<<<grid, WARPS * 32>>>(reinterpret_cast<const bf16*>(q.data_ptr()), reinterpret_cast<const bf16*>(kc.data_ptr()),
                                     reinterpret_cast<const bf16*>(vc.data_ptr()), bt.data_ptr<int>(), lens.data_ptr<int>(),
                                     reinterpret_cast<bf16*>(o.data_ptr()), part_o.data_ptr<float>(),
                                     part_lse.data_ptr<float>(), HQ, HKV, max_pages, max_parts, kc.stride(0),
                                     kc.stride(1), scale_log2);
  merge_parts<<<B * HQ, D>>>(part_o.data_ptr<float>(), part_lse.data_ptr<float>(), lens.data_ptr<int>(),
                             reinterpret_cast<bf16*>(o.data_ptr()), HQ, max_parts);
  return o;
}
"""

_ext = load_inline(name="review_paged_cuda",
                   cpp_sources="torch::Tensor paged_attention(torch::Tensor q, torch::Tensor kc, torch::Tensor vc, torch::Tensor bt, torch::Tensor lens);",
                   cuda_sources=_SRC, functions=["paged_attention"], extra_cuda_cflags=["-O3", "-arch=sm_90"])


def kernel(q, k_cache, v_cache, block_tables, context_lens):
    return _ext.paged_attention(q, k_cache, v_cache, block_tables.int(), context_lens.int())
