// CSR SpMV, CSR-adaptive style: rows binned by length once per call, one launch per bin.
//   bin 0: <= 8 nnz   -> spmv_vector<4>:  a 4-lane sub-warp per row (8 rows per warp)
//   bin 1: 9-32       -> spmv_vector<8>
//   bin 2: 33-1024    -> spmv_vector<32>: a warp per row
//   bin 3: > 4096     -> spmv_long_chunks: the row cut into 4096-nnz chunks, one block each, one atomicAdd per
//                        chunk into y (zeroed for those rows beforehand); 1025-4096 nnz go to bin 2 as well.
// Lanes of a sub-warp read consecutive nonzeros (i = start + lane; i += VS), values and col_idx are streamed with
// __ldcs, x is gathered with __ldg, and the lanes reduce with __shfl_down_sync over the sub-warp width. The long-row
// kernel reads its chunk as float4/int4 after a scalar prologue up to the next 16-byte boundary.
#include <torch/extension.h>
#include <stdint.h>

__global__ void classify_rows(const int* __restrict__ row_ptr, int M, int* __restrict__ bins,
                              int* __restrict__ counts, int* __restrict__ long_chunks) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= M) return;
    int len = row_ptr[r + 1] - row_ptr[r];
    int b = len <= 8 ? 0 : (len <= 32 ? 1 : (len <= 4096 ? 2 : 3));
    int slot = atomicAdd(&counts[b], 1);
    bins[(long long)b * M + slot] = r;
    if (b == 3) atomicAdd(long_chunks, (len + 4095) / 4096);
}

template <int VS>
__global__ void spmv_vector(const int* __restrict__ row_ptr, const int* __restrict__ col_idx,
                            const float* __restrict__ values, const float* __restrict__ x, float* __restrict__ y,
                            const int* __restrict__ rows, int n_rows) {
    const int gid = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x & (VS - 1);
    const int slot = gid / VS;
    if (slot >= n_rows) return;
    const int row = rows[slot];
    const int start = row_ptr[row], end = row_ptr[row + 1];
    float sum = 0.f;
    for (int i = start + lane; i < end; i += VS) sum += __ldcs(&values[i]) * __ldg(&x[__ldcs(&col_idx[i])]);
    #pragma unroll
    for (int off = VS / 2; off > 0; off >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, off, VS);
    if (lane == 0) y[row] = sum;
}

// chunk_of[k] = (row, first nnz) of chunk k of the long rows, filled on the host side of the launch below.
__global__ void spmv_long_chunks(const int* __restrict__ row_ptr, const int* __restrict__ col_idx,
                                 const float* __restrict__ values, const float* __restrict__ x,
                                 float* __restrict__ y, const int2* __restrict__ chunk_of) {
    __shared__ float warp_sums[8];
    const int2 ch = chunk_of[blockIdx.x];
    const int row = ch.x;
    const int begin = ch.y;
    const int end = min(begin + 4096, row_ptr[row + 1]);
    float sum = 0.f;
    // scalar prologue up to a 4-element (16-byte) boundary
    const int aligned = min(end, (begin + 3) & ~3);
    for (int i = begin + threadIdx.x; i < aligned; i += blockDim.x)
        sum += __ldcs(&values[i]) * __ldg(&x[__ldcs(&col_idx[i])]);
    const int n4 = (end - aligned) / 4;
    const float4* v4 = reinterpret_cast<const float4*>(values + aligned);
    const int4* c4 = reinterpret_cast<const int4*>(col_idx + aligned);
    for (int q = threadIdx.x; q < n4; q += blockDim.x) {
        float4 v = __ldcs(&v4[q]);
        int4 c = __ldcs(&c4[q]);
        sum += v.x * __ldg(&x[c.x]) + v.y * __ldg(&x[c.y]) + v.z * __ldg(&x[c.z]) + v.w * __ldg(&x[c.w]);
    }
    for (int i = aligned + 4 * n4 + threadIdx.x; i < end; i += blockDim.x)
        sum += __ldcs(&values[i]) * __ldg(&x[__ldcs(&col_idx[i])]);
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, off);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = sum;
    __syncthreads();
    if (warp == 0) {
        sum = lane < (blockDim.x >> 5) ? warp_sums[lane] : 0.f;
        #pragma unroll
        for (int off = 4; off > 0; off >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, off);
        if (lane == 0) atomicAdd(&y[row], sum);
    }
}

__global__ void expand_long_chunks(const int* __restrict__ row_ptr, const int* __restrict__ long_rows, int n_long,
                                   int2* __restrict__ chunk_of, int* __restrict__ cursor, float* __restrict__ y) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n_long) return;
    const int row = long_rows[k];
    const int s = row_ptr[row], e = row_ptr[row + 1];
    const int n = (e - s + 4095) / 4096;
    const int base = atomicAdd(cursor, n);
    for (int c = 0; c < n; ++c) chunk_of[base + c] = make_int2(row, s + c * 4096);
    y[row] = 0.f;
}

torch::Tensor spmv(torch::Tensor row_ptr, torch::Tensor col_idx, torch::Tensor values, torch::Tensor x) {
    const int M = row_ptr.size(0) - 1;
    auto opts = row_ptr.options();
    auto y = torch::empty({M}, values.options());
    auto bins = torch::empty({4 * (long long)M}, opts);
    auto counts = torch::zeros({4}, opts);
    auto long_chunks = torch::zeros({1}, opts);
    const int* rp = row_ptr.data_ptr<int>();
    classify_rows<<<(M + 255) / 256, 256>>>(rp, M, bins.data_ptr<int>(), counts.data_ptr<int>(),
                                            long_chunks.data_ptr<int>());
    auto h_counts = counts.cpu();
    const int* c = h_counts.data_ptr<int>();
    const int* ci = col_idx.data_ptr<int>();
    const float* v = values.data_ptr<float>();
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const int* b = bins.data_ptr<int>();
    if (c[0]) spmv_vector<4><<<(c[0] * 4 + 255) / 256, 256>>>(rp, ci, v, xp, yp, b, c[0]);
    if (c[1]) spmv_vector<8><<<(c[1] * 8 + 255) / 256, 256>>>(rp, ci, v, xp, yp, b + M, c[1]);
    if (c[2]) spmv_vector<32><<<(c[2] * 32 + 255) / 256, 256>>>(rp, ci, v, xp, yp, b + 2LL * M, c[2]);
    if (c[3]) {
        const int n_chunks = long_chunks.cpu().item<int>();
        auto chunk_of = torch::empty({2 * (long long)n_chunks}, opts);
        auto cursor = torch::zeros({1}, opts);
        int2* co = reinterpret_cast<int2*>(chunk_of.data_ptr<int>());
        expand_long_chunks<<<(c[3] + 255) / 256, 256>>>(rp, b + 3LL * M, c[3], co, cursor.data_ptr<int>(), yp);
        spmv_long_chunks<<<n_chunks, 256>>>(rp, ci, v, xp, yp, co);
    }
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("spmv", &spmv); }
