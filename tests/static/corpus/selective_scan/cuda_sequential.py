"""CUDA through load_inline: one thread per (batch, channel) walking L sequentially with its 16 states in a
float register array; A is pre-scaled by log2(e) when loaded so each state costs one exp2f; softplus, D*u
and the silu gate (__expf, __fdividef) are fused; bf16 converted on load, y rounded once."""
import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>

#define NSTATE 16

__global__ void ssm_sequential(const __nv_bfloat16* __restrict__ u, const __nv_bfloat16* __restrict__ delta,
                               const float* __restrict__ A, const __nv_bfloat16* __restrict__ Bm,
                               const __nv_bfloat16* __restrict__ Cm, const float* __restrict__ Dskip,
                               const __nv_bfloat16* __restrict__ z, const float* __restrict__ dbias,
                               __nv_bfloat16* __restrict__ y, int D, int L) {
    int d = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y;
    if (d >= D) return;
    float a2[NSTATE];
    float h[NSTATE];
    #pragma unroll
    for (int n = 0; n < NSTATE; ++n) {
        a2[n] = A[d * NSTATE + n] * 1.4426950408889634f;
        h[n] = 0.f;
    }
    const float ds = Dskip[d];
    const float bias = dbias[d];
    const long long row = ((long long)b * D + d) * L;
    const long long bc = (long long)b * NSTATE * L;
    for (int t = 0; t < L; ++t) {
        float uu = __bfloat162float(u[row + t]);
        float v = __bfloat162float(delta[row + t]) + bias;
        float dt = v > 20.f ? v : log1pf(__expf(v));
        float acc = 0.f;
        #pragma unroll
        for (int n = 0; n < NSTATE; ++n) {
            float dA = exp2f(dt * a2[n]);
            h[n] = dA * h[n] + dt * __bfloat162float(Bm[bc + n * L + t]) * uu;
            acc += h[n] * __bfloat162float(Cm[bc + n * L + t]);
        }
        float zz = __bfloat162float(z[row + t]);
        float out = (acc + ds * uu) * __fdividef(zz, 1.f + __expf(-zz));
        y[row + t] = __float2bfloat16(out);
    }
}

torch::Tensor selective_scan(torch::Tensor u, torch::Tensor delta, torch::Tensor A, torch::Tensor B,
                             torch::Tensor C, torch::Tensor Dskip, torch::Tensor z, torch::Tensor dbias) {
    int batch = u.size(0);
    int D = u.size(1);
    int L = u.size(2);
    TORCH_CHECK(A.size(1) == NSTATE, "N must be 16");
    auto y = torch::empty_like(u);
    dim3 grid((D + 127) / 128, batch);
    ssm_sequential<<<grid, 128>>>(
        reinterpret_cast<const __nv_bfloat16*>(u.data_ptr()), reinterpret_cast<const __nv_bfloat16*>(delta.data_ptr()),
        A.data_ptr<float>(), reinterpret_cast<const __nv_bfloat16*>(B.data_ptr()),
        reinterpret_cast<const __nv_bfloat16*>(C.data_ptr()), Dskip.data_ptr<float>(),
        reinterpret_cast<const __nv_bfloat16*>(z.data_ptr()), dbias.data_ptr<float>(),
        reinterpret_cast<__nv_bfloat16*>(y.data_ptr()), D, L);
    return y;
}
"""

CPP = ("torch::Tensor selective_scan(torch::Tensor u, torch::Tensor delta, torch::Tensor A, torch::Tensor B, "
       "torch::Tensor C, torch::Tensor Dskip, torch::Tensor z, torch::Tensor dbias);")
_mod = None


def kernel(u, delta, A, B, C, D_skip, z, delta_bias):
    global _mod
    if _mod is None:
        _mod = load_inline(name="corpus_selective_scan_seq", cpp_sources=CPP, cuda_sources=SRC,
                           functions=["selective_scan"])
    u, delta, z, B, C = (t.contiguous() for t in (u, delta, z, B, C))
    return _mod.selective_scan(u, delta, A.contiguous(), B, C, D_skip, z, delta_bias)
