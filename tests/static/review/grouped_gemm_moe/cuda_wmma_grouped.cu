// MoE grouped GEMM (torch extension source): one launch over an upper bound of the flattened (expert, m_tile)
// x n_tile space. Each CTA first scans the expert offsets in shared memory (tile counts cdiv(rows_e, BM), an
// inclusive prefix), binary-searches its tile's expert, and exits when past the real tile count; empty experts own
// no tiles. wmma bf16 with fp32 accumulators; rows masked at the expert boundary; W[e] based at (int64_t)e * N * K.
// The host picks BM from the average rows per expert (16 / 64 / 128) with no device-to-host copy.
#include <torch/extension.h>
#include <cuda_bf16.h>
#include <mma.h>
using namespace nvcuda;

constexpr int BN = 64, BK = 32, MAX_E = 256;

template <int BM>
__global__ void __launch_bounds__((BM / 16) * 32) moe_grouped_gemm(const __nv_bfloat16* __restrict__ X,
                                                                   const __nv_bfloat16* __restrict__ W,
                                                                   const int* __restrict__ offsets,
                                                                   __nv_bfloat16* __restrict__ Y, int E, int N,
                                                                   int K) {
  constexpr int THREADS = (BM / 16) * 32;
  __shared__ int tile_end[MAX_E];
  __shared__ __align__(32) __nv_bfloat16 Xs[BM][BK];
  __shared__ __align__(32) __nv_bfloat16 Ws[BN][BK];
  __shared__ float Cs[BM][BN];
  if (threadIdx.x == 0) {
    int run = 0;
    for (int e = 0; e < E; ++e) {
      run += (offsets[e + 1] - offsets[e] + BM - 1) / BM;
      tile_end[e] = run;
    }
  }
  __syncthreads();
  int n_tiles = (N + BN - 1) / BN;
  int tile = blockIdx.x / n_tiles, n0 = (blockIdx.x % n_tiles) * BN;
  if (tile >= tile_end[E - 1]) return;
  int lo = 0, hi = E - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (tile_end[mid] <= tile) lo = mid + 1;
    else hi = mid;
  }
  const int e = lo;
  const int m_tile = tile - (e == 0 ? 0 : tile_end[e - 1]);
  const int row0 = offsets[e] + m_tile * BM, row_end = offsets[e + 1];
  const __nv_bfloat16* We = W + (int64_t)e * N * K;
  const int warp = threadIdx.x / 32;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[BN / 16];
#pragma unroll
  for (int j = 0; j < BN / 16; ++j) wmma::fill_fragment(acc[j], 0.f);
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = threadIdx.x; i < BM * BK; i += THREADS) {
      int r = i / BK, c = i % BK;
      Xs[r][c] = row0 + r < row_end ? X[(int64_t)(row0 + r) * K + k0 + c] : __float2bfloat16(0.f);
    }
    for (int i = threadIdx.x; i < BN * BK; i += THREADS) {
      int r = i / BK, c = i % BK;
      Ws[r][c] = n0 + r < N ? We[(int64_t)(n0 + r) * K + k0 + c] : __float2bfloat16(0.f);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
      wmma::load_matrix_sync(fa, &Xs[warp * 16][kk], BK);
#pragma unroll
      for (int j = 0; j < BN / 16; ++j) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
        wmma::load_matrix_sync(fb, &Ws[j * 16][kk], BK);
        wmma::mma_sync(acc[j], fa, fb, acc[j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < BN / 16; ++j) wmma::store_matrix_sync(&Cs[warp * 16][j * 16], acc[j], BN, wmma::mem_row_major);
  __syncthreads();
  for (int i = threadIdx.x; i < BM * BN; i += THREADS) {
    int r = i / BN, c = i % BN;
    if (row0 + r < row_end && n0 + c < N) Y[(int64_t)(row0 + r) * N + n0 + c] = __float2bfloat16(Cs[r][c]);
  }
}

torch::Tensor grouped_gemm(torch::Tensor X, torch::Tensor W, torch::Tensor offsets) {
  int T = X.size(0), K = X.size(1), E = W.size(0), N = W.size(1);
  auto Y = torch::empty({T, N}, X.options());
  auto x = reinterpret_cast<const __nv_bfloat16*>(X.data_ptr());
  auto w = reinterpret_cast<const __nv_bfloat16*>(W.data_ptr());
  auto y = reinterpret_cast<__nv_bfloat16*>(Y.data_ptr());
  int n_tiles = (N + BN - 1) / BN;
  int rows_per_expert = T / E;
  if (rows_per_expert <= 16) {
    int upper = (T + 15) / 16 + E;
    moe_grouped_gemm<16><<<upper * n_tiles, 32>>>(x, w, offsets.data_ptr<int>(), y, E, N, K);
  } else if (rows_per_expert <= 512) {
    int upper = (T + 63) / 64 + E;
    moe_grouped_gemm<64><<<upper * n_tiles, 128>>>(x, w, offsets.data_ptr<int>(), y, E, N, K);
  } else {
    int upper = (T + 127) / 128 + E;
    moe_grouped_gemm<128><<<upper * n_tiles, 256>>>(x, w, offsets.data_ptr<int>(), y, E, N, K);
  }
  return Y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("grouped_gemm", &grouped_gemm); }
