"""CUDA radix select, one CTA per row, through load_inline: keys from __float_as_uint with the sign flip, four
8-bit digit passes that each re-read the row and count into a __shared__ histogram with __match_any_sync
aggregation (one atomicAdd per group of equal digits), a suffix scan in shared memory to find the bucket, keys
above the threshold appended through a shared counter, ties taken by whichever thread wins an atomicCAS spin lock
(released with atomicExch), and the k selected keys sorted with cub::BlockRadixSort."""
import torch
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <cub/cub.cuh>
#include <cuda_runtime.h>

constexpr int THREADS = 1024;
constexpr int BINS = 256;
constexpr int MAX_K = 2048;
constexpr int ITEMS = MAX_K / THREADS;

__device__ __forceinline__ unsigned twiddle(float f) {
  unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__global__ void __launch_bounds__(THREADS)
radix_topk_row(const float* __restrict__ x, float* __restrict__ vals, long* __restrict__ idx, int V, int k) {
  __shared__ unsigned hist[BINS];
  __shared__ unsigned prefix, mask, need, n_out;
  __shared__ int lock, ties_taken;
  __shared__ unsigned long long out_words[MAX_K];
  const float* row = x + (size_t)blockIdx.x * V;
  if (threadIdx.x == 0) { prefix = 0; mask = 0; need = k; n_out = 0; lock = 0; ties_taken = 0; }
  __syncthreads();
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < BINS; b += THREADS) hist[b] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < V; i += THREADS) {
      unsigned key = twiddle(row[i]);
      bool live = (key & mask) == prefix;
      unsigned digit = (key >> shift) & 0xFF;
      unsigned peers = __match_any_sync(__activemask(), live ? digit : 0xFFFFFFFFu);
      int leader = __ffs(peers) - 1;
      if (live && (threadIdx.x & 31) == leader) atomicAdd(&hist[digit], __popc(peers));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned above = 0;
      for (int b = BINS - 1; b >= 0; --b) {
        if (above + hist[b] >= need) { prefix |= (unsigned)b << shift; mask |= 0xFFu << shift; need -= above; break; }
        above += hist[b];
      }
    }
    __syncthreads();
  }
  unsigned thr = prefix;
  for (int i = threadIdx.x; i < V; i += THREADS) {
    unsigned key = twiddle(row[i]);
    unsigned long long word = ((unsigned long long)key << 32) | (unsigned)(V - 1 - i);
    if (key > thr) {
      out_words[atomicAdd(&n_out, 1u)] = word;
    } else if (key == thr) {
      while (atomicCAS(&lock, 0, 1) != 0) { }
      if (ties_taken < (int)need) { out_words[atomicAdd(&n_out, 1u)] = word; ties_taken++; }
      atomicExch(&lock, 0);
    }
  }
  __syncthreads();
  using Sort = cub::BlockRadixSort<unsigned long long, THREADS, ITEMS>;
  __shared__ typename Sort::TempStorage tmp;
  unsigned long long items[ITEMS];
  for (int j = 0; j < ITEMS; ++j) {
    int s = threadIdx.x * ITEMS + j;
    items[j] = s < k ? out_words[s] : 0ull;
  }
  Sort(tmp).SortDescending(items);
  for (int j = 0; j < ITEMS; ++j) {
    int s = threadIdx.x * ITEMS + j;
    if (s >= k) continue;
    unsigned key = (unsigned)(items[j] >> 32);
    unsigned u = (key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key;
    vals[(size_t)blockIdx.x * k + s] = __uint_as_float(u);
    idx[(size_t)blockIdx.x * k + s] = V - 1 - (long)(items[j] & 0xFFFFFFFFu);
  }
}

std::vector<torch::Tensor> topk_cuda(torch::Tensor x, int64_t k) {
  int B = x.size(0), V = x.size(1);
  auto xf = x.to(torch::kFloat32).contiguous();
  auto vals = torch::empty({B, k}, xf.options());
  auto idx = torch::empty({B, k}, x.options().dtype(torch::kInt64));
  radix_topk_row<<<B, THREADS>>>(xf.data_ptr<float>(), vals.data_ptr<float>(), idx.data_ptr<long>(), V, (int)k);
  return {vals.to(x.scalar_type()), idx};
}
"""

_ext = load_inline("wild_topk_radix", cpp_sources="std::vector<torch::Tensor> topk_cuda(torch::Tensor x, int64_t k);",
                   cuda_sources=_CUDA, functions=["topk_cuda"])


def kernel(x, *, k):
    values, indices = _ext.topk_cuda(x, k)
    return values, indices
