"""A sequential kernel: a program owns BLOCK_D channels of one batch element and walks L one step at a time,
the [BLOCK_D, N] fp32 state in registers, B/C columns loaded once per step and broadcast over the channels,
tl.exp for the decay, softplus/D*u/gate fused. A chunked associative-scan kernel (launched only under
`if False:`), an exp2 prescale helper and a CUDA source are defined but never used."""
import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)

CUDA_SRC = r"""
__global__ void ssm_vec(const uint4* u, float* y, const float* A, int L) {
    float a2 = A[threadIdx.x] * 1.4426950408889634f;
    uint4 v = u[blockIdx.x * blockDim.x + threadIdx.x];
    y[threadIdx.x] = exp2f(a2 * (float)v.x);
}
"""


@triton.jit
def _combine(a1, b1, a2, b2):
    return a1 * a2, a2 * b1 + b2


@triton.jit
def _prescale(a):
    return a * LOG2E


@triton.jit
def _chunked(u_ptr, delta_ptr, a_ptr, y_ptr, L, N: tl.constexpr, BLOCK_L: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_L)
    a2 = _prescale(tl.load(a_ptr + r % N))
    carry = 0.0
    for l0 in range(0, L, BLOCK_L):
        dt = tl.load(delta_ptr + r * L + l0 + offs, mask=l0 + offs < L, other=0.0).to(tl.float32)
        uu = tl.load(u_ptr + r * L + l0 + offs, mask=l0 + offs < L, other=0.0).to(tl.float32)
        cum, hs = tl.associative_scan((tl.exp2(dt * a2), dt * uu), axis=0, combine_fn=_combine)
        hs = hs + cum * carry
        tl.store(y_ptr + r * L + l0 + offs, hs.to(tl.bfloat16), mask=l0 + offs < L)
        carry = tl.sum(tl.where(offs == BLOCK_L - 1, hs, 0.0), axis=0)


@triton.jit
def _ssm_steps(u_ptr, delta_ptr, a_ptr, b_ptr, c_ptr, dskip_ptr, z_ptr, bias_ptr, y_ptr, D, L,
               N: tl.constexpr, BLOCK_D: tl.constexpr):
    pb = tl.program_id(0)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    offs_n = tl.arange(0, N)
    a = tl.load(a_ptr + offs_d[:, None] * N + offs_n[None, :], mask=d_ok[:, None], other=0.0)
    dsk = tl.load(dskip_ptr + offs_d, mask=d_ok, other=0.0)
    bias = tl.load(bias_ptr + offs_d, mask=d_ok, other=0.0)
    rows = (pb * D + offs_d).to(tl.int64) * L
    bc = pb.to(tl.int64) * N * L
    h = tl.zeros([BLOCK_D, N], dtype=tl.float32)
    for t in range(L):
        ut = tl.load(u_ptr + rows + t, mask=d_ok, other=0.0).to(tl.float32)
        v = tl.load(delta_ptr + rows + t, mask=d_ok, other=0.0).to(tl.float32) + bias
        zt = tl.load(z_ptr + rows + t, mask=d_ok, other=0.0).to(tl.float32)
        dt = tl.where(v > 20.0, v, tl.log(1.0 + tl.exp(v)))
        bt = tl.load(b_ptr + bc + offs_n * L + t).to(tl.float32)
        ct = tl.load(c_ptr + bc + offs_n * L + t).to(tl.float32)
        h = tl.exp(dt[:, None] * a) * h + (dt * ut)[:, None] * bt[None, :]
        yt = tl.sum(h * ct[None, :], axis=1) + dsk * ut
        tl.store(y_ptr + rows + t, (yt * zt * tl.sigmoid(zt)).to(tl.bfloat16), mask=d_ok)


def kernel(u, delta, A, B, C, D_skip, z, delta_bias):
    u, delta, z, B, C = (t.contiguous() for t in (u, delta, z, B, C))
    batch, D, L = u.shape
    N = A.shape[1]
    y = torch.empty_like(u)
    if False:
        _chunked[(batch * D,)](u, delta, A, y, L, N=N, BLOCK_L=512)
        return y
    _ssm_steps[(batch, triton.cdiv(D, 8))](u, delta, A.contiguous(), B, C, D_skip, z, delta_bias, y, D, L,
                                           N=N, BLOCK_D=8, num_warps=2)
    return y
