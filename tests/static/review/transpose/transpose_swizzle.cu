// Transpose Y[N, M] = X[M, N]^T, fp32, in CUDA.
//
// A CTA of 32 x 8 threads moves one TM x TN tile through shared memory: lanes read 32 consecutive X elements of a
// row (128 B, __ldcs), the tile is stored with its column index XOR-swizzled by the row (tile[r][c ^ (r & 31)]),
// so the transposed reads, where the 32 lanes walk 32 tile rows of one column, hit 32 different banks without
// padding; lanes then write 32 consecutive Y elements (__stcs). Tiles are template parameters picked by
// transpose_launch from the aspect ratio: 64 x 64 (16 elements per thread) for square and wide shapes, 512 x 16
// when N <= 16 so a Y row segment is still 512 elements long.
#include <cuda_runtime.h>

template <int TN>
__device__ __forceinline__ int swz(int r, int c) {
    return c ^ (r & ((TN < 32 ? TN : 32) - 1));
}

template <int TM, int TN>
__global__ void __launch_bounds__(256) transpose_tile(const float* __restrict__ X, float* __restrict__ Y,
                                                       int M, int N) {
    __shared__ float tile[TM][TN];
    const int m0 = blockIdx.y * TM, n0 = blockIdx.x * TN;
    const int tid = threadIdx.y * 32 + threadIdx.x;
    for (int i = tid; i < TM * TN; i += 256) {
        const int r = i / TN, c = i % TN;
        const int gm = m0 + r, gn = n0 + c;
        float v = 0.f;
        if (gm < M && gn < N) v = __ldcs(X + (size_t)gm * N + gn);
        tile[r][swz<TN>(r, c)] = v;
    }
    __syncthreads();
    for (int i = tid; i < TM * TN; i += 256) {
        const int c = i / TM, r = i % TM;
        const int gn = n0 + c, gm = m0 + r;
        if (gn < N && gm < M) __stcs(Y + (size_t)gn * M + gm, tile[r][swz<TN>(r, c)]);
    }
}

void transpose_launch(const float* X, float* Y, int M, int N, cudaStream_t stream) {
    dim3 block(32, 8);
    if (N <= 16) {
        dim3 grid((N + 15) / 16, (M + 511) / 512);
        transpose_tile<512, 16><<<grid, block, 0, stream>>>(X, Y, M, N);
    } else {
        dim3 grid((N + 63) / 64, (M + 63) / 64);
        transpose_tile<64, 64><<<grid, block, 0, stream>>>(X, Y, M, N);
    }
}
