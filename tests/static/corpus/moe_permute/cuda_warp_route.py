"""CUDA through load_inline, three kernels, no host sync. route: a warp per token, k rounds of a shuffle arg-max
on (value, index) pairs (lower index wins ties), softmax over the k picks with expf; the block's pairs go to
shared memory and one thread per expert counts them in (token, slot) order, giving each pair its block-local rank
and the block's count row (no atomics). scan: one thread per expert walks the blocks. scatter: a block per token
loads the row once as uint4 and stores it to its k destinations with __stcs."""
import torch
from torch.utils.cpp_extension import load_inline

CPP = "std::vector<torch::Tensor> permute(torch::Tensor logits, torch::Tensor X, int64_t k);"

CUDA = r"""
#include <cuda_bf16.h>
#include <torch/extension.h>

constexpr int TB = 32;     // tokens per block
constexpr int WARPS = 8;

__global__ void route(const float* logits, int* ids, float* w, int* counts, int* rank, int T, int E, int k) {
    __shared__ int s_ids[TB * 8];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int tt = warp; tt < TB; tt += WARPS) {
        int t = blockIdx.x * TB + tt;
        if (t >= T) break;
        unsigned taken = 0;   // lane-local: which of my logits are already picked
        float picked[8];
        for (int j = 0; j < k; ++j) {
            float best = -INFINITY; int bi = 0x7fffffff;
            for (int i = 0, e = lane; e < E; ++i, e += 32) {
                float v = logits[(size_t)t * E + e];
                if (!(taken >> i & 1) && v > best) { best = v; bi = e; }
            }
            for (int off = 16; off > 0; off >>= 1) {
                float ov = __shfl_xor_sync(0xffffffff, best, off);
                int oi = __shfl_xor_sync(0xffffffff, bi, off);
                if (ov > best || (ov == best && oi < bi)) { best = ov; bi = oi; }
            }
            if (bi % 32 == lane) taken |= 1u << (bi / 32);
            picked[j] = best;
            if (lane == 0) { ids[t * k + j] = bi; s_ids[tt * k + j] = bi; }
        }
        if (lane == 0) {
            float s = 0.f;
            for (int j = 0; j < k; ++j) { picked[j] = __expf(picked[j] - picked[0]); s += picked[j]; }
            for (int j = 0; j < k; ++j) w[t * k + j] = picked[j] / s;
        }
    }
    __syncthreads();
    int n_pairs = min(TB, T - blockIdx.x * TB) * k;
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        int c = 0;
        for (int p = 0; p < n_pairs; ++p)
            if (s_ids[p] == e) rank[blockIdx.x * TB * k + p] = c++;
        counts[blockIdx.x * E + e] = c;
    }
}

__global__ void scan(int* counts, int* offsets, int NB, int E) {
    __shared__ int totals[1024];
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        int run = 0;
        for (int b = 0; b < NB; ++b) { int c = counts[b * E + e]; counts[b * E + e] = run; run += c; }
        totals[e] = run;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int acc = 0;
        for (int e = 0; e < E; ++e) { offsets[e] = acc; acc += totals[e]; }
        offsets[E] = acc;
    }
}

__global__ void scatter(const uint4* X, uint4* Xp, const int* ids, const int* base, const int* offsets,
                        int* rank, int E, int H8, int k) {
    int t = blockIdx.x;
    __shared__ int dest[8];
    if (threadIdx.x < k) {
        int e = ids[t * k + threadIdx.x];
        int d = offsets[e] + base[(t / TB) * E + e] + rank[t * k + threadIdx.x];
        dest[threadIdx.x] = d;
        rank[t * k + threadIdx.x] = d;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < H8; i += blockDim.x) {
        uint4 v = X[(size_t)t * H8 + i];
        for (int j = 0; j < k; ++j) __stcs(&Xp[(size_t)dest[j] * H8 + i], v);
    }
}

std::vector<torch::Tensor> permute(torch::Tensor logits, torch::Tensor X, int64_t k) {
    int T = logits.size(0), E = logits.size(1), H = X.size(1);
    auto i32 = logits.options().dtype(torch::kInt32);
    int NB = (T + TB - 1) / TB;
    auto ids = torch::empty({T, k}, i32), rank = torch::empty({T, k}, i32);
    auto w = torch::empty({T, k}, logits.options());
    auto counts = torch::empty({NB, E}, i32), offsets = torch::empty({E + 1}, i32);
    auto Xp = torch::empty({T * k, H}, X.options());
    route<<<NB, 32 * WARPS>>>(logits.data_ptr<float>(), ids.data_ptr<int>(), w.data_ptr<float>(),
                              counts.data_ptr<int>(), rank.data_ptr<int>(), T, E, k);
    scan<<<1, 256>>>(counts.data_ptr<int>(), offsets.data_ptr<int>(), NB, E);
    scatter<<<T, 128>>>(reinterpret_cast<const uint4*>(X.data_ptr()), reinterpret_cast<uint4*>(Xp.data_ptr()),
                        ids.data_ptr<int>(), counts.data_ptr<int>(), offsets.data_ptr<int>(), rank.data_ptr<int>(),
                        E, H / 8, k);
    return {ids, w, offsets, rank, Xp};
}
"""

_ext = load_inline("corpus_moe_permute", cpp_sources=CPP, cuda_sources=CUDA, functions=["permute"],
                   extra_cuda_cflags=["-O3"])


def kernel(logits, X, *, k):
    ids, w, offsets, row_map, X_perm = _ext.permute(logits.contiguous(), X.contiguous(), k)
    return ids, w, offsets, row_map, X_perm
