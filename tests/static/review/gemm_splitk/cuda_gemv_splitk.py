"""CUDA split-K GEMV for decode (M <= 4) through load_inline.

Each warp owns one output column n (a weight row) and one K slice (blockIdx.y); lanes read the row with 16-byte
__ldcs loads (streamed, not kept in L1/L2), four uint4 in flight per lane, multiply by the M <= 4 activation rows
staged once in shared memory, reduce with __shfl_xor_sync and publish one fp32 atomicAdd per (m, n, slice) into a
memset workspace; a second kernel casts to bf16. The slice count comes from the SM count. Batches of more than 4
rows run the GEMV once per 4-row chunk.
"""
import torch
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <cuda_bf16.h>
#include <torch/extension.h>

constexpr int MAX_M = 4;
constexpr int WARPS = 8;
constexpr int PREFETCH = 4;

__device__ __forceinline__ float dot8(uint4 w, const float* a) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&w);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = __bfloat1622float2(h[i]);
    s += f.x * a[2 * i] + f.y * a[2 * i + 1];
  }
  return s;
}

__global__ void __launch_bounds__(WARPS * 32) gemv_splitk(const __nv_bfloat16* __restrict__ A,
                                                         const uint4* __restrict__ B, float* __restrict__ ws,
                                                         int M, int N, int K, int k_slice) {
  extern __shared__ float a_s[];  // [M, k_slice] in fp32
  int k_begin = blockIdx.y * k_slice;
  int k_len = min(k_slice, K - k_begin);
  for (int i = threadIdx.x; i < M * k_len; i += blockDim.x) {
    int m = i / k_len, k = i % k_len;
    a_s[m * k_slice + k] = __bfloat162float(A[(size_t)m * K + k_begin + k]);
  }
  __syncthreads();
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int n = blockIdx.x * WARPS + warp;
  if (n >= N) return;
  const uint4* row = B + ((size_t)n * K + k_begin) / 8;
  float acc[MAX_M] = {0.f, 0.f, 0.f, 0.f};
  int vecs = k_len / 8;
  uint4 buf[PREFETCH];
#pragma unroll
  for (int p = 0; p < PREFETCH; ++p) buf[p] = lane + p * 32 < vecs ? __ldcs(row + lane + p * 32) : make_uint4(0, 0, 0, 0);
  for (int v = lane; v < vecs; v += 32 * PREFETCH) {
#pragma unroll
    for (int p = 0; p < PREFETCH; ++p) {
      uint4 w = buf[p];
      int nxt = v + (p + PREFETCH) * 32;
      buf[p] = nxt < vecs ? __ldcs(row + nxt) : make_uint4(0, 0, 0, 0);
      int k = (v + p * 32) * 8;
      if (v + p * 32 < vecs) {
#pragma unroll
        for (int m = 0; m < MAX_M; ++m)
          if (m < M) acc[m] += dot8(w, a_s + m * k_slice + k);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < MAX_M; ++m) {
    float s = acc[m];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    if (lane == 0 && m < M) atomicAdd(ws + (size_t)m * N + n, s);
  }
}

__global__ void cast_bf16(const float* __restrict__ ws, __nv_bfloat16* __restrict__ out, int total) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total) out[i] = __float2bfloat16(ws[i]);
}

torch::Tensor gemv(torch::Tensor A, torch::Tensor B) {
  int M = A.size(0), K = A.size(1), N = B.size(0);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, A.get_device());
  int col_blocks = (N + WARPS - 1) / WARPS;
  int splits = std::max(1, std::min((2 * sms + col_blocks - 1) / col_blocks, K / 2048));
  int k_slice = ((K + splits - 1) / splits + 255) / 256 * 256;
  splits = (K + k_slice - 1) / k_slice;
  auto ws = torch::empty({M, N}, A.options().dtype(torch::kFloat32));
  cudaMemsetAsync(ws.data_ptr(), 0, sizeof(float) * M * N);
  auto C = torch::empty({M, N}, A.options());
  dim3 grid(col_blocks, splits);
  gemv_splitk<<<grid, WARPS * 32, M * k_slice * sizeof(float)>>>(
      reinterpret_cast<const __nv_bfloat16*>(A.data_ptr()), reinterpret_cast<const uint4*>(B.data_ptr()),
      ws.data_ptr<float>(), M, N, K, k_slice);
  cast_bf16<<<(M * N + 255) / 256, 256>>>(ws.data_ptr<float>(), reinterpret_cast<__nv_bfloat16*>(C.data_ptr()), M * N);
  return C;
}
"""

_ext = load_inline(name="review_gemv_splitk", cpp_sources="torch::Tensor gemv(torch::Tensor A, torch::Tensor B);",
                   cuda_sources=_CUDA, functions=["gemv"], extra_cuda_cflags=["-O3"])


def kernel(A, B):
    A = A.contiguous()
    B = B.contiguous()
    if A.shape[0] <= 4:
        return _ext.gemv(A, B)
    # larger batches: the same GEMV on 4-row chunks (B is streamed once per chunk)
    return torch.cat([_ext.gemv(A[i:i + 4], B) for i in range(0, A.shape[0], 4)], dim=0)
