// Softmax for short rows (N <= 1024): one warp per row, the row in registers (float4 loads), warp-shuffle
// reductions only, exp2f with log2(e) folded in, one reciprocal per row.
#include <cuda_runtime.h>

#define LOG2E 1.4426950408889634f
constexpr int VEC = 8;  // floats per lane: 2 x float4

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void __launch_bounds__(256) softmax_warp_rows(const float* __restrict__ x, float* __restrict__ y,
                                                         int rows, int n) {
    int warp = threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    int row = blockIdx.x * (blockDim.x / 32) + warp;
    if (row >= rows) return;
    const float4* xr = reinterpret_cast<const float4*>(x + (size_t)row * n);
    float4* yr = reinterpret_cast<float4*>(y + (size_t)row * n);
    float v[VEC];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < VEC / 4; ++k) {
        int idx = lane + k * 32;
        float4 q = idx * 4 < n ? xr[idx] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        v[4 * k + 0] = q.x * LOG2E;
        v[4 * k + 1] = q.y * LOG2E;
        v[4 * k + 2] = q.z * LOG2E;
        v[4 * k + 3] = q.w * LOG2E;
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) m = fmaxf(m, v[k]);
    m = warp_max(m);
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        v[k] = exp2f(v[k] - m);
        s += v[k];
    }
    s = warp_sum(s);
    float inv = 1.f / s;
#pragma unroll
    for (int k = 0; k < VEC / 4; ++k) {
        int idx = lane + k * 32;
        if (idx * 4 < n) yr[idx] = make_float4(v[4 * k] * inv, v[4 * k + 1] * inv, v[4 * k + 2] * inv, v[4 * k + 3] * inv);
    }
}

void launch_softmax(const float* x, float* y, int rows, int n, cudaStream_t stream) {
    int warps_per_block = 8;
    softmax_warp_rows<<<(rows + warps_per_block - 1) / warps_per_block, warps_per_block * 32, 0, stream>>>(x, y, rows, n);
}
