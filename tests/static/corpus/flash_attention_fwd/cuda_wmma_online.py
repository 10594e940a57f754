"""CUDA attention forward through load_inline: a 64-row query tile per CTA (4 warps), grid (m_block, head,
batch) with the query tiles taken in reverse order. S = Q K^T and O += P V run on tensor cores through wmma; the
online softmax keeps a running max (log2 domain, scale * log2 e folded into one constant) and denominator per
row, rescaling the fp32 O tile held in shared memory by exp2f(m_old - m_new). P is written to shared memory as
bf16 and reloaded as a wmma fragment. Causal: the key loop stops at the diagonal block and only blocks that cross
the diagonal are masked. K/V tiles are single-buffered."""
import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <cuda_bf16.h>
#include <mma.h>
#include <torch/extension.h>
using namespace nvcuda;

#define BM 64
#define BN 64

template <int D>
__global__ void fa_fwd(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                       const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ o, float* __restrict__ lse,
                       int S, int Hq, int Hkv, float scale_log2, bool causal) {
    extern __shared__ char smem[];
    __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem);
    __nv_bfloat16* sK = sQ + BM * D;
    __nv_bfloat16* sV = sK + BN * D;
    __nv_bfloat16* sP = sV + BN * D;
    float* sS = reinterpret_cast<float*>(sP + BM * BN);
    float* sO = sS + BM * BN;
    __shared__ float row_m[BM], row_l[BM], row_alpha[BM];

    int m_block = gridDim.x - 1 - blockIdx.x;          // heaviest causal tiles first
    int h = blockIdx.y, b = blockIdx.z;
    int kvh = h / (Hq / Hkv);
    const __nv_bfloat16* qh = q + ((size_t)(b * Hq + h) * S) * D;
    const __nv_bfloat16* kh = k + ((size_t)(b * Hkv + kvh) * S) * D;
    const __nv_bfloat16* vh = v + ((size_t)(b * Hkv + kvh) * S) * D;
    int warp = threadIdx.x / 32, tid = threadIdx.x;

    for (int i = tid; i < BM * D; i += blockDim.x) {
        int r = m_block * BM + i / D;
        sQ[i] = r < S ? qh[(size_t)r * D + i % D] : __float2bfloat16(0.f);
        sO[i] = 0.f;
    }
    for (int r = tid; r < BM; r += blockDim.x) { row_m[r] = -INFINITY; row_l[r] = 0.f; }
    __syncthreads();

    int n_blocks = (S + BN - 1) / BN;
    int n_end = causal ? min(n_blocks, ((m_block + 1) * BM + BN - 1) / BN) : n_blocks;
    for (int nb = 0; nb < n_end; ++nb) {
        for (int i = tid; i < BN * D; i += blockDim.x) {
            int r = nb * BN + i / D;
            sK[i] = r < S ? kh[(size_t)r * D + i % D] : __float2bfloat16(0.f);
            sV[i] = r < S ? vh[(size_t)r * D + i % D] : __float2bfloat16(0.f);
        }
        __syncthreads();
        // S = Q K^T: warp w computes rows [16w, 16w + 16) x all BN columns
        for (int cn = 0; cn < BN / 16; ++cn) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> sacc;
            wmma::fill_fragment(sacc, 0.f);
            for (int kk = 0; kk < D / 16; ++kk) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
                wmma::load_matrix_sync(fa, sQ + warp * 16 * D + kk * 16, D);
                wmma::load_matrix_sync(fb, sK + cn * 16 * D + kk * 16, D);
                wmma::mma_sync(sacc, fa, fb, sacc);
            }
            wmma::store_matrix_sync(sS + warp * 16 * BN + cn * 16, sacc, BN, wmma::mem_row_major);
        }
        __syncthreads();
        // only blocks crossing the diagonal (or the end of the sequence) pay for mask math
        bool masked = (causal && (nb + 1) * BN > m_block * BM) || (nb + 1) * BN > S;
        for (int r = tid; r < BM; r += blockDim.x) {
            int qi = m_block * BM + r;
            float mx = row_m[r];
            if (masked) {
                for (int c = 0; c < BN; ++c) {
                    int kj = nb * BN + c;
                    float s = sS[r * BN + c] * scale_log2;
                    if (kj >= S || (causal && kj > qi)) s = -INFINITY;
                    sS[r * BN + c] = s;
                    mx = fmaxf(mx, s);
                }
            } else {
                for (int c = 0; c < BN; ++c) {
                    float s = sS[r * BN + c] * scale_log2;
                    sS[r * BN + c] = s;
                    mx = fmaxf(mx, s);
                }
            }
            float alpha = exp2f(row_m[r] - mx);
            float sum = 0.f;
            for (int c = 0; c < BN; ++c) {
                float p = exp2f(sS[r * BN + c] - mx);
                sum += p;
                sP[r * BN + c] = __float2bfloat16(p);
            }
            row_l[r] = row_l[r] * alpha + sum;
            row_m[r] = mx;
            row_alpha[r] = alpha;
        }
        __syncthreads();
        for (int i = tid; i < BM * D; i += blockDim.x) sO[i] *= row_alpha[i / D];
        __syncthreads();
        // O += P V on tensor cores (P reloaded from shared memory)
        for (int cd = 0; cd < D / 16; ++cd) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> oacc;
            wmma::load_matrix_sync(oacc, sO + warp * 16 * D + cd * 16, D, wmma::mem_row_major);
            for (int kk = 0; kk < BN / 16; ++kk) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fp;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fv;
                wmma::load_matrix_sync(fp, sP + warp * 16 * BN + kk * 16, BN);
                wmma::load_matrix_sync(fv, sV + kk * 16 * D + cd * 16, D);
                wmma::mma_sync(oacc, fp, fv, oacc);
            }
            wmma::store_matrix_sync(sO + warp * 16 * D + cd * 16, oacc, D, wmma::mem_row_major);
        }
        __syncthreads();
    }
    for (int i = tid; i < BM * D; i += blockDim.x) {
        int r = m_block * BM + i / D;
        if (r < S) o[((size_t)(b * Hq + h) * S + r) * D + i % D] = __float2bfloat16(sO[i] / row_l[i / D]);
    }
    for (int r = tid; r < BM; r += blockDim.x) {
        int qi = m_block * BM + r;
        if (qi < S) lse[(size_t)(b * Hq + h) * S + qi] = (row_m[r] + log2f(row_l[r])) * 0.6931471805599453f;
    }
}

std::vector<torch::Tensor> fa(torch::Tensor q, torch::Tensor k, torch::Tensor v, bool causal) {
    int B = q.size(0), Hq = q.size(1), S = q.size(2), D = q.size(3), Hkv = k.size(1);
    auto o = torch::empty_like(q);
    auto lse = torch::empty({B, Hq, S}, q.options().dtype(torch::kFloat32));
    dim3 grid((S + BM - 1) / BM, Hq, B);
    float scale_log2 = 1.4426950408889634f / sqrtf((float)D);
    auto p = [](torch::Tensor t) { return reinterpret_cast<__nv_bfloat16*>(t.data_ptr()); };
    if (D == 128) {
        size_t smem = (BM * 128 + 2 * BN * 128 + BM * BN) * 2 + (BM * BN + BM * 128) * 4;
        cudaFuncSetAttribute(fa_fwd<128>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        fa_fwd<128><<<grid, 128, smem>>>(p(q), p(k), p(v), p(o), lse.data_ptr<float>(), S, Hq, Hkv, scale_log2, causal);
    } else {
        size_t smem = (BM * 256 + 2 * BN * 256 + BM * BN) * 2 + (BM * BN + BM * 256) * 4;
        cudaFuncSetAttribute(fa_fwd<256>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        fa_fwd<256><<<grid, 128, smem>>>(p(q), p(k), p(v), p(o), lse.data_ptr<float>(), S, Hq, Hkv, scale_log2, causal);
    }
    return {o, lse};
}
"""

CPP = "std::vector<torch::Tensor> fa(torch::Tensor q, torch::Tensor k, torch::Tensor v, bool causal);"

_mod = None


def kernel(q, k, v, *, causal):
    global _mod
    if _mod is None:
        _mod = load_inline(name="corpus_fa_wmma", cpp_sources=CPP, cuda_sources=SRC, functions=["fa"],
                           extra_cuda_cflags=["-O3", "-arch=sm_90"])
    o, lse = _mod.fa(q.contiguous(), k.contiguous(), v.contiguous(), causal)
    return o, lse
