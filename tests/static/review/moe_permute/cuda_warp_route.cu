// MoE routing + permutation in CUDA: three kernels, no host synchronisation.
//
// route_count: a warp per token; lane l holds logits l, l+32, ... (E <= 256, 8 per lane). k rounds of a warp
//   arg-max on packed 64-bit keys (order-preserving float bits << 32 | (255 - expert)), so equal logits resolve to
//   the lower expert; weights are a k-way softmax with exp2f. The block's pairs are counted in shared memory
//   (atomicAdd on __shared__ counters) and the block's count row is written once to counts[E][num_blocks].
// scan_counts: one CTA scans counts in expert-major order (exclusive), giving every (expert, block) its base and
//   expert_offsets.
// scatter_copy: a CTA per token block; a pair's rank among the block's earlier pairs of the same expert is counted
//   from the block's ids staged in shared memory (token-slot order, deterministic), dest = base[e][blk] + rank;
//   then a warp per token copies X[t] once into registers (uint4) and stores it k times with __stcs.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

constexpr int TOK_PER_BLOCK = 8;   // one warp per token
constexpr int MAX_K = 8;

__device__ __forceinline__ uint32_t order_key(float v) {
    uint32_t b = __float_as_uint(v);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__global__ void route_count(const float* __restrict__ logits, int32_t* __restrict__ ids,
                            float* __restrict__ weights, int32_t* __restrict__ counts, int T, int E, int K,
                            int num_blocks) {
    extern __shared__ int32_t hist[];
    for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int t = blockIdx.x * TOK_PER_BLOCK + warp;
    if (t < T) {
        unsigned long long keys[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int e = lane + 32 * i;
            keys[i] = e < E ? ((unsigned long long)order_key(logits[(int64_t)t * E + e]) << 32) | (uint32_t)(255 - e)
                            : 0ull;
        }
        float picked[MAX_K];
        int chosen[MAX_K];
        for (int j = 0; j < K; ++j) {
            unsigned long long best = 0ull;
#pragma unroll
            for (int i = 0; i < 8; ++i) best = keys[i] > best ? keys[i] : best;
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) {
                unsigned long long o = __shfl_xor_sync(0xffffffff, best, off);
                best = o > best ? o : best;
            }
            const int e = 255 - (int)(best & 0xffffffffu);
            chosen[j] = e;
            picked[j] = __shfl_sync(0xffffffff, logits[(int64_t)t * E + (e < E ? e : 0)], 0);
#pragma unroll
            for (int i = 0; i < 8; ++i) if (keys[i] == best) keys[i] = 0ull;
        }
        if (lane == 0) {
            float m = picked[0], s = 0.f;
            for (int j = 0; j < K; ++j) s += exp2f((picked[j] - m) * 1.4426950408889634f);
            const float inv = 1.f / s;
            for (int j = 0; j < K; ++j) {
                ids[t * K + j] = chosen[j];
                weights[t * K + j] = exp2f((picked[j] - m) * 1.4426950408889634f) * inv;
                atomicAdd(&hist[chosen[j]], 1);
            }
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x) counts[e * num_blocks + blockIdx.x] = hist[e];
}

__global__ void scan_counts(int32_t* __restrict__ counts, int32_t* __restrict__ offsets, int E, int num_blocks) {
    __shared__ int32_t carry;
    __shared__ int32_t warp_sums[32];
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    const int n = E * num_blocks;
    for (int base = 0; base < n; base += blockDim.x) {
        const int i = base + threadIdx.x;
        int32_t v = i < n ? counts[i] : 0;
        int32_t x = v;
        for (int off = 1; off < 32; off <<= 1) {
            int32_t y = __shfl_up_sync(0xffffffff, x, off);
            if ((threadIdx.x & 31) >= off) x += y;
        }
        if ((threadIdx.x & 31) == 31) warp_sums[threadIdx.x / 32] = x;
        __syncthreads();
        if (threadIdx.x < 32) {
            int32_t w = threadIdx.x < blockDim.x / 32 ? warp_sums[threadIdx.x] : 0;
            for (int off = 1; off < 32; off <<= 1) {
                int32_t y = __shfl_up_sync(0xffffffff, w, off);
                if (threadIdx.x >= off) w += y;
            }
            warp_sums[threadIdx.x] = w;
        }
        __syncthreads();
        const int32_t before = carry + (threadIdx.x >= 32 ? warp_sums[threadIdx.x / 32 - 1] : 0);
        const int32_t excl = before + x - v;
        if (i < n) {
            counts[i] = excl;
            if (i % num_blocks == 0) offsets[i / num_blocks] = excl;
        }
        __syncthreads();
        if (threadIdx.x == blockDim.x - 1) carry = excl + v;
        __syncthreads();
    }
    if (threadIdx.x == 0) offsets[E] = carry;
}

__global__ void scatter_copy(const __nv_bfloat16* __restrict__ X, __nv_bfloat16* __restrict__ Xp,
                             const int32_t* __restrict__ ids, const int32_t* __restrict__ base,
                             int32_t* __restrict__ row_map, int T, int K, int H, int num_blocks) {
    __shared__ int32_t blk_ids[TOK_PER_BLOCK * MAX_K];
    __shared__ int32_t blk_dest[TOK_PER_BLOCK * MAX_K];
    const int t0 = blockIdx.x * TOK_PER_BLOCK;
    const int n_pairs = min(TOK_PER_BLOCK, T - t0) * K;
    for (int p = threadIdx.x; p < n_pairs; p += blockDim.x) blk_ids[p] = ids[t0 * K + p];
    __syncthreads();
    for (int p = threadIdx.x; p < n_pairs; p += blockDim.x) {
        const int e = blk_ids[p];
        int rank = 0;
        for (int q = 0; q < p; ++q) rank += blk_ids[q] == e;
        const int32_t dest = base[e * num_blocks + blockIdx.x] + rank;
        blk_dest[p] = dest;
        row_map[t0 * K + p] = dest;
    }
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int t = t0 + warp;
    if (t >= T) return;
    const uint4* src = reinterpret_cast<const uint4*>(X + (int64_t)t * H);
    const int nvec = H / 8;
    for (int v = lane; v < nvec; v += 32) {
        const uint4 val = __ldcs(src + v);
        for (int j = 0; j < K; ++j)
            __stcs(reinterpret_cast<uint4*>(Xp + (int64_t)blk_dest[warp * K + j] * H) + v, val);
    }
}

void moe_permute_launch(const float* logits, const __nv_bfloat16* X, int32_t* ids, float* weights,
                        int32_t* counts, int32_t* offsets, int32_t* row_map, __nv_bfloat16* Xp,
                        int T, int E, int K, int H, cudaStream_t stream) {
    const int num_blocks = (T + TOK_PER_BLOCK - 1) / TOK_PER_BLOCK;
    route_count<<<num_blocks, TOK_PER_BLOCK * 32, E * sizeof(int32_t), stream>>>(logits, ids, weights, counts, T, E,
                                                                                K, num_blocks);
    scan_counts<<<1, 1024, 0, stream>>>(counts, offsets, E, num_blocks);
    scatter_copy<<<num_blocks, TOK_PER_BLOCK * 32, 0, stream>>>(X, Xp, ids, counts, row_map, T, K, H, num_blocks);
}
