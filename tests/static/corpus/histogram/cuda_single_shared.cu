// One shared-memory histogram per block (dynamic shared memory sized NB, for every NB), one shared atomicAdd per
// key with no aggregation, scalar 4-byte loads, a fixed grid of 1024 blocks striding over the keys, then every
// bin (zeros included, all blocks from bin 0) added to the global counts, followed by a __threadfence().
#include <cuda_runtime.h>

__global__ void hist_shared(const int* __restrict__ x, int* __restrict__ counts, long n, int nb) {
    extern __shared__ int s_hist[];
    for (int b = threadIdx.x; b < nb; b += blockDim.x) s_hist[b] = 0;
    __syncthreads();
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        atomicAdd(&s_hist[x[i]], 1);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < nb; b += blockDim.x) {
        atomicAdd(&counts[b], s_hist[b]);
    }
    __threadfence();
}

void launch_histogram(const int* x, int* counts, long n, int nb, cudaStream_t stream) {
    cudaMemsetAsync(counts, 0, sizeof(int) * nb, stream);
    hist_shared<<<1024, 512, sizeof(int) * nb, stream>>>(x, counts, n, nb);
}
