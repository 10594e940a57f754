"""CUDA softmax through load_inline, written the way CUDA libraries write it: vector types behind a template
alias (``Vec<T>`` is float4 for fp32 and uint4 for bf16), the bf16 rows passed as ``const uint4*``, register
arrays sized by a template expression. Three kernels picked on the host: a warp per row for N <= 1024, a CTA
per row holding the row in registers up to 16k (threads scale with N), and a CTA per row that sweeps twice for
longer rows (online (m, s) in the first sweep, __ldcs on the second). exp2f with log2(e), one reciprocal."""
import torch
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <cuda_bf16.h>
#include <cuda_runtime.h>

template <typename T> struct VecTraits;
template <> struct VecTraits<float> { using type = float4; static constexpr int N = 4; };
template <> struct VecTraits<__nv_bfloat16> { using type = uint4; static constexpr int N = 8; };
template <typename T> using Vec = typename VecTraits<T>::type;

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ void unpack(const float4& v, float* out) {
  out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
}
__device__ __forceinline__ void unpack(const uint4& v, float* out) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) { float2 f = __bfloat1622float2(h[i]); out[2 * i] = f.x; out[2 * i + 1] = f.y; }
}
__device__ __forceinline__ float4 pack(const float* in, float4) { return make_float4(in[0], in[1], in[2], in[3]); }
__device__ __forceinline__ uint4 pack(const float* in, uint4) {
  uint4 v; __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}

// one warp per row, N <= 1024: the row lives in registers
template <typename T, int ITEMS>
__global__ void softmax_warp_row(const Vec<T>* __restrict__ x, Vec<T>* __restrict__ y, int rows, int nvec) {
  constexpr int V = VecTraits<T>::N;
  int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= rows) return;
  float vals[ITEMS * V];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    int c = lane + i * 32;
    if (c < nvec) unpack(x[(size_t)row * nvec + c], vals + i * V);
    else for (int j = 0; j < V; ++j) vals[i * V + j] = -INFINITY;
#pragma unroll
    for (int j = 0; j < V; ++j) m = fmaxf(m, vals[i * V + j]);
  }
  m = warp_max(m);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < ITEMS * V; ++i) { vals[i] = exp2f((vals[i] - m) * kLog2e); s += vals[i]; }
  float inv = 1.f / warp_sum(s);
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    int c = lane + i * 32;
    float o[V];
    for (int j = 0; j < V; ++j) o[j] = vals[i * V + j] * inv;
    if (c < nvec) y[(size_t)row * nvec + c] = pack(o, Vec<T>{});
  }
}

__device__ float block_reduce(float v, float* smem, bool is_max) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = is_max ? warp_max(v) : warp_sum(v);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = (threadIdx.x < blockDim.x / 32) ? smem[threadIdx.x] : (is_max ? -INFINITY : 0.f);
  if (warp == 0) v = is_max ? warp_max(v) : warp_sum(v);
  if (threadIdx.x == 0) smem[0] = v;
  __syncthreads();
  float out = smem[0];
  __syncthreads();
  return out;
}

// one CTA per row held in registers (N <= 16k)
template <typename T, int ITEMS>
__global__ void softmax_block_row(const Vec<T>* __restrict__ x, Vec<T>* __restrict__ y, int nvec) {
  constexpr int V = VecTraits<T>::N;
  __shared__ float red[32];
  const Vec<T>* xr = x + (size_t)blockIdx.x * nvec;
  float vals[ITEMS * V];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    int c = threadIdx.x + i * blockDim.x;
    if (c < nvec) unpack(xr[c], vals + i * V);
    else for (int j = 0; j < V; ++j) vals[i * V + j] = -INFINITY;
    for (int j = 0; j < V; ++j) m = fmaxf(m, vals[i * V + j]);
  }
  m = block_reduce(m, red, true);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < ITEMS * V; ++i) { vals[i] = exp2f((vals[i] - m) * kLog2e); s += vals[i]; }
  float inv = 1.f / block_reduce(s, red, false);
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    int c = threadIdx.x + i * blockDim.x;
    float o[V];
    for (int j = 0; j < V; ++j) o[j] = vals[i * V + j] * inv;
    if (c < nvec) y[(size_t)blockIdx.x * nvec + c] = pack(o, Vec<T>{});
  }
}

// one CTA per long row: sweep 1 online (m, s), sweep 2 re-reads with __ldcs and writes
template <typename T>
__global__ void softmax_block_two_sweep(const Vec<T>* __restrict__ x, Vec<T>* __restrict__ y, int nvec) {
  constexpr int V = VecTraits<T>::N;
  __shared__ float sm_m[32], sm_s[32];
  const Vec<T>* xr = x + (size_t)blockIdx.x * nvec;
  float m = -INFINITY, s = 0.f, v[V];
  for (int c = threadIdx.x; c < nvec; c += blockDim.x) {
    unpack(xr[c], v);
    float tm = m;
    for (int j = 0; j < V; ++j) tm = fmaxf(tm, v[j]);
    s *= exp2f((m - tm) * kLog2e);
    for (int j = 0; j < V; ++j) s += exp2f((v[j] - tm) * kLog2e);
    m = tm;
  }
  for (int o = 16; o > 0; o >>= 1) {
    float om = __shfl_xor_sync(0xffffffff, m, o), os = __shfl_xor_sync(0xffffffff, s, o);
    float nm = fmaxf(m, om);
    s = s * exp2f((m - nm) * kLog2e) + os * exp2f((om - nm) * kLog2e);
    m = nm;
  }
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) { sm_m[warp] = m; sm_s[warp] = s; }
  __syncthreads();
  if (warp == 0) {
    m = lane < blockDim.x / 32 ? sm_m[lane] : -INFINITY;
    s = lane < blockDim.x / 32 ? sm_s[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) {
      float om = __shfl_xor_sync(0xffffffff, m, o), os = __shfl_xor_sync(0xffffffff, s, o);
      float nm = fmaxf(m, om);
      s = s * exp2f((m - nm) * kLog2e) + os * exp2f((om - nm) * kLog2e);
      m = nm;
    }
    if (lane == 0) { sm_m[0] = m; sm_s[0] = s; }
  }
  __syncthreads();
  m = sm_m[0];
  float inv = 1.f / sm_s[0];
  for (int c = threadIdx.x; c < nvec; c += blockDim.x) {
    Vec<T> raw = __ldcs(xr + c);
    unpack(raw, v);
    float o[V];
    for (int j = 0; j < V; ++j) o[j] = exp2f((v[j] - m) * kLog2e) * inv;
    y[(size_t)blockIdx.x * nvec + c] = pack(o, Vec<T>{});
  }
}

template <typename T>
void launch(torch::Tensor x, torch::Tensor y) {
  int rows = x.size(0), n = x.size(1), nvec = n / VecTraits<T>::N;
  auto xp = reinterpret_cast<const Vec<T>*>(x.data_ptr());
  auto yp = reinterpret_cast<Vec<T>*>(y.data_ptr());
  if (n <= 1024) {
    softmax_warp_row<T, 1024 / (32 * VecTraits<T>::N)><<<(rows + 3) / 4, 128>>>(xp, yp, rows, nvec);
  } else if (n <= 16384) {
    int threads = n <= 4096 ? 256 : (n <= 8192 ? 512 : 1024);
    softmax_block_row<T, 16384 / (256 * VecTraits<T>::N)><<<rows, threads>>>(xp, yp, nvec);
  } else {
    softmax_block_two_sweep<T><<<rows, 1024>>>(xp, yp, nvec);
  }
}

torch::Tensor softmax_cuda(torch::Tensor x) {
  auto y = torch::empty_like(x);
  if (x.scalar_type() == torch::kBFloat16) launch<__nv_bfloat16>(x, y);
  else launch<float>(x, y);
  return y;
}
"""

_CPP = "torch::Tensor softmax_cuda(torch::Tensor x);"
_ext = None


def _module():
    global _ext
    if _ext is None:
        _ext = load_inline("wild_softmax_vec", cpp_sources=_CPP, cuda_sources=_CUDA, functions=["softmax_cuda"],
                           extra_cuda_cflags=["-O3", "--use_fast_math"])
    return _ext


def kernel(x: torch.Tensor) -> torch.Tensor:
    return _module().softmax_cuda(x.contiguous())
