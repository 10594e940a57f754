// Linear + tanh-GELU in CUDA C++ (torch extension source): bf16 wmma GEMM with fp32 accumulators, the tile staged
// through shared memory after the K loop, and a fused epilogue: each thread owns one column of the tile, loads
// its bias once, and applies GELU as u * sigmoid(2z) = u / (1 + 2^-t), t = u * (C1 + C2 * u * u), in fp32 with
// exp2f and __fdividef. Two CTA tiles: 128x128 for large M, 64x128 when M <= 256 (decode batches).
#include <torch/extension.h>
#include <cuda_bf16.h>
#include <mma.h>
using namespace nvcuda;

constexpr float GELU_C1 = 2.0f * 0.7978845608028654f * 1.4426950408889634f;
constexpr float GELU_C2 = GELU_C1 * 0.044715f;
constexpr int BK = 32;

__device__ __forceinline__ float gelu_sigmoid(float u) {
  float t = u * (GELU_C1 + GELU_C2 * u * u);
  return __fdividef(u, 1.0f + exp2f(-t));
}

template <int BM, int BN>
__global__ void __launch_bounds__(256) linear_gelu_kernel(const __nv_bfloat16* __restrict__ X,
                                                          const __nv_bfloat16* __restrict__ W,
                                                          const __nv_bfloat16* __restrict__ bias,
                                                          __nv_bfloat16* __restrict__ Y, int M, int N, int K) {
  constexpr int WARPS_M = BM / 32, WARPS_N = 8 / WARPS_M;
  constexpr int FM = 2, FN = BN / (WARPS_N * 16);
  __shared__ __align__(128) __nv_bfloat16 As[BM][BK];
  __shared__ __align__(128) __nv_bfloat16 Bs[BN][BK];
  extern __shared__ float Cs[];
  int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  int warp = threadIdx.x / 32, wm = warp / WARPS_N, wn = warp % WARPS_N;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int e = threadIdx.x; e < BM * BK; e += blockDim.x) {
      int r = e / BK, c = e % BK;
      As[r][c] = (m0 + r < M && k0 + c < K) ? X[(size_t)(m0 + r) * K + k0 + c] : __float2bfloat16(0.f);
    }
    for (int e = threadIdx.x; e < BN * BK; e += blockDim.x) {
      int r = e / BK, c = e % BK;
      Bs[r][c] = (n0 + r < N && k0 + c < K) ? W[(size_t)(n0 + r) * K + k0 + c] : __float2bfloat16(0.f);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[FM];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb[FN];
#pragma unroll
      for (int i = 0; i < FM; ++i) wmma::load_matrix_sync(fa[i], &As[wm * 32 + i * 16][kk], BK);
#pragma unroll
      for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(fb[j], &Bs[wn * FN * 16 + j * 16][kk], BK);
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }

  // Epilogue: fp32 tile to shared memory, then bias + GELU per column, one bf16 rounding at the store.
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j)
      wmma::store_matrix_sync(&Cs[(wm * 32 + i * 16) * BN + wn * FN * 16 + j * 16], acc[i][j], BN,
                              wmma::mem_row_major);
  __syncthreads();
  int col = threadIdx.x % BN;
  int n = n0 + col;
  float b = n < N ? __bfloat162float(bias[n]) : 0.0f;
  for (int r = threadIdx.x / BN; r < BM; r += blockDim.x / BN) {
    int m = m0 + r;
    if (m < M && n < N) Y[(size_t)m * N + n] = __float2bfloat16(gelu_sigmoid(Cs[r * BN + col] + b));
  }
}

torch::Tensor linear_gelu(torch::Tensor X, torch::Tensor W, torch::Tensor b) {
  int M = X.size(0), K = X.size(1), N = W.size(0);
  auto Y = torch::empty({M, N}, X.options());
  auto x = reinterpret_cast<const __nv_bfloat16*>(X.data_ptr());
  auto w = reinterpret_cast<const __nv_bfloat16*>(W.data_ptr());
  auto bb = reinterpret_cast<const __nv_bfloat16*>(b.data_ptr());
  auto y = reinterpret_cast<__nv_bfloat16*>(Y.data_ptr());
  if (M <= 256) {
    dim3 grid((N + 127) / 128, (M + 63) / 64);
    linear_gelu_kernel<64, 128><<<grid, 256, 64 * 128 * sizeof(float)>>>(x, w, bb, y, M, N, K);
  } else {
    dim3 grid((N + 127) / 128, (M + 127) / 128);
    cudaFuncSetAttribute(linear_gelu_kernel<128, 128>, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536);
    linear_gelu_kernel<128, 128><<<grid, 256, 128 * 128 * sizeof(float)>>>(x, w, bb, y, M, N, K);
  }
  return Y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("linear_gelu", &linear_gelu); }
