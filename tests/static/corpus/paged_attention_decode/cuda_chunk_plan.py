"""CUDA through load_inline: a token-balanced plan (1024-token chunks per sequence, built with torch on the host)
gives one block per (chunk, query head). The block stages the chunk's page ids in shared memory, then each of 4
warps takes every 4th token: the row address is (int64_t)page * page_stride + slot * slot_stride, lanes split
D = 128, a shuffle sum gives the score and an exp2f online softmax (q pre-scaled by D^-0.5 * log2(e) in fp32)
runs in registers; the token loop stops at the context length, with no masks. Unsplit sequences write o
directly; the merge kernel's blocks for them return at once. Plain loads, no cp.async pipeline."""
import torch
from torch.utils.cpp_extension import load_inline

LOG2E = 1.4426950408889634
CHUNK = 1024

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>

constexpr int HD = 128;
constexpr int WARPS = 4;
constexpr int CHUNK = 1024;
constexpr int MAX_CHUNK_PAGES = CHUNK / 8;

__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffff, x, o);
    return x;
}

__global__ void paged_chunk(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ kc,
                            const __nv_bfloat16* __restrict__ vc, const int* __restrict__ block_tables,
                            const int* __restrict__ lens, const int* __restrict__ n_chunks,
                            const int* __restrict__ item_seq, const int* __restrict__ item_chunk,
                            __nv_bfloat16* __restrict__ out, float* __restrict__ po, float* __restrict__ plse,
                            int Hq, int Hkv, int P, int max_pages, int64_t stride_page, int64_t stride_slot,
                            float qk_scale) {
    __shared__ int pages[MAX_CHUNK_PAGES];
    __shared__ float sm_m[WARPS];
    __shared__ float sm_l[WARPS];
    __shared__ float sm_acc[WARPS][HD];
    const int item = blockIdx.x, hq = blockIdx.y;
    const int b = item_seq[item], c = item_chunk[item];
    const int ctx = lens[b];
    const int lo = c * CHUNK, hi = min(ctx, lo + CHUNK);
    const int n_pages = (hi - lo + P - 1) / P;
    for (int i = threadIdx.x; i < n_pages; i += blockDim.x)
        pages[i] = block_tables[(int64_t)b * max_pages + lo / P + i];
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int kvh = hq / (Hq / Hkv);
    const __nv_bfloat16* qrow = q + ((int64_t)b * Hq + hq) * HD + lane * 4;
    float qr[4];
    for (int i = 0; i < 4; ++i) qr[i] = __bfloat162float(qrow[i]) * qk_scale;
    float m = -INFINITY, l = 0.f;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int t = lo + warp; t < hi; t += WARPS) {
        const int64_t row = (int64_t)pages[(t - lo) / P] * stride_page + (int64_t)(t % P) * stride_slot
                            + (int64_t)kvh * HD + lane * 4;
        float s = 0.f;
        for (int i = 0; i < 4; ++i) s += qr[i] * __bfloat162float(kc[row + i]);
        s = warp_sum(s);
        const float m_new = fmaxf(m, s);
        const float alpha = exp2f(m - m_new);
        const float p = exp2f(s - m_new);
        l = l * alpha + p;
        for (int i = 0; i < 4; ++i) acc[i] = acc[i] * alpha + p * __bfloat162float(vc[row + i]);
        m = m_new;
    }
    if (lane == 0) { sm_m[warp] = m; sm_l[warp] = l; }
    for (int i = 0; i < 4; ++i) sm_acc[warp][lane * 4 + i] = acc[i];
    __syncthreads();
    if (warp != 0) return;
    float mm = -INFINITY;
    for (int w = 0; w < WARPS; ++w) mm = fmaxf(mm, sm_m[w]);
    float ll = 0.f;
    float o[4] = {0.f, 0.f, 0.f, 0.f};
    for (int w = 0; w < WARPS; ++w) {
        const float sc = exp2f(sm_m[w] - mm);
        ll += sm_l[w] * sc;
        for (int i = 0; i < 4; ++i) o[i] += sm_acc[w][lane * 4 + i] * sc;
    }
    if (n_chunks[b] == 1) {
        for (int i = 0; i < 4; ++i) out[((int64_t)b * Hq + hq) * HD + lane * 4 + i] = __float2bfloat16(o[i] / ll);
    } else {
        const int64_t slot = (int64_t)item * Hq + hq;
        for (int i = 0; i < 4; ++i) po[slot * HD + lane * 4 + i] = o[i] / ll;
        if (lane == 0) plse[slot] = mm + log2f(ll);
    }
}

__global__ void paged_merge(const float* __restrict__ po, const float* __restrict__ plse,
                            const int* __restrict__ n_chunks, const int* __restrict__ first,
                            __nv_bfloat16* __restrict__ out, int Hq) {
    const int b = blockIdx.x, hq = blockIdx.y, d = threadIdx.x;
    const int n = n_chunks[b];
    if (n == 1) return;
    const int f = first[b];
    float mx = -INFINITY;
    for (int j = 0; j < n; ++j) mx = fmaxf(mx, plse[(int64_t)(f + j) * Hq + hq]);
    float den = 0.f, num = 0.f;
    for (int j = 0; j < n; ++j) {
        const int64_t slot = (int64_t)(f + j) * Hq + hq;
        const float w = exp2f(plse[slot] - mx);
        den += w;
        num += w * po[slot * HD + d];
    }
    out[((int64_t)b * Hq + hq) * HD + d] = __float2bfloat16(num / den);
}

torch::Tensor paged_decode(torch::Tensor q, torch::Tensor kc, torch::Tensor vc, torch::Tensor block_tables,
                           torch::Tensor lens, torch::Tensor n_chunks, torch::Tensor first, torch::Tensor item_seq,
                           torch::Tensor item_chunk, double qk_scale) {
    const int B = q.size(0), Hq = q.size(1), P = kc.size(1), Hkv = kc.size(2);
    const int items = item_seq.size(0);
    auto out = torch::empty_like(q);
    auto f32 = q.options().dtype(torch::kFloat32);
    auto po = torch::empty({items, Hq, HD}, f32);
    auto plse = torch::empty({items, Hq}, f32);
    paged_chunk<<<dim3(items, Hq), WARPS * 32>>>(
        reinterpret_cast<const __nv_bfloat16*>(q.data_ptr()), reinterpret_cast<const __nv_bfloat16*>(kc.data_ptr()),
        reinterpret_cast<const __nv_bfloat16*>(vc.data_ptr()), block_tables.data_ptr<int>(), lens.data_ptr<int>(),
        n_chunks.data_ptr<int>(), item_seq.data_ptr<int>(), item_chunk.data_ptr<int>(),
        reinterpret_cast<__nv_bfloat16*>(out.data_ptr()), po.data_ptr<float>(), plse.data_ptr<float>(),
        Hq, Hkv, P, block_tables.size(1), kc.stride(0), kc.stride(1), (float)qk_scale);
    paged_merge<<<dim3(B, Hq), HD>>>(po.data_ptr<float>(), plse.data_ptr<float>(), n_chunks.data_ptr<int>(),
                                      first.data_ptr<int>(), reinterpret_cast<__nv_bfloat16*>(out.data_ptr()), Hq);
    return out;
}
"""

CPP_SRC = ("torch::Tensor paged_decode(torch::Tensor q, torch::Tensor kc, torch::Tensor vc, torch::Tensor block_tables, "
           "torch::Tensor lens, torch::Tensor n_chunks, torch::Tensor first, torch::Tensor item_seq, "
           "torch::Tensor item_chunk, double qk_scale);")

_mod = None


def _module():
    global _mod
    if _mod is None:
        _mod = load_inline("paged_chunk_plan", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                           functions=["paged_decode"], extra_cuda_cflags=["-O3"])
    return _mod


def kernel(q, k_cache, v_cache, block_tables, context_lens):
    B, Hq, D = q.shape
    dev = q.device
    n_chunks = ((context_lens + CHUNK - 1) // CHUNK).to(torch.int32)
    first = (torch.cumsum(n_chunks, 0) - n_chunks).to(torch.int32)
    items = int(n_chunks.sum().item())
    item_seq = torch.repeat_interleave(torch.arange(B, device=dev, dtype=torch.int32), n_chunks)
    item_chunk = (torch.arange(items, device=dev, dtype=torch.int32) - first[item_seq.long()]).to(torch.int32)
    return _module().paged_decode(q.contiguous(), k_cache, v_cache, block_tables, context_lens, n_chunks, first,
                                  item_seq, item_chunk, D ** -0.5 * LOG2E)
