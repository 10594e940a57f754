"""Program (batch, 4 channels), L in 512-step chunks, one state at a time with tl.associative_scan, A2 =
A * log2(e) hoisted, B/C rows loaded once per program and broadcast over the channels; but the scan pairs and
the carried state are bf16 (only the C contraction accumulates in fp32), and dt = softplus(delta + bias) is
computed by PyTorch before the launch. D*u and the silu gate are fused."""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _comb(a1, b1, a2, b2):
    return a1 * a2, a2 * b1 + b2


@triton.jit
def _ssm_bf16(u_ptr, dt_ptr, a_ptr, b_ptr, c_ptr, dskip_ptr, z_ptr, y_ptr, D, L,
              N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_L: tl.constexpr):
    pb = tl.program_id(0).to(tl.int64)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    offs_n = tl.arange(0, N)
    offs_t = tl.arange(0, BLOCK_L)
    a2 = tl.load(a_ptr + offs_d[:, None] * N + offs_n[None, :], mask=d_ok[:, None], other=0.0) * LOG2E
    dsk = tl.load(dskip_ptr + offs_d, mask=d_ok, other=0.0)
    rows = (pb * D + offs_d) * L
    h = tl.zeros([BLOCK_D, N], dtype=tl.bfloat16)
    for l0 in range(0, L, BLOCK_L):
        offs_l = l0 + offs_t
        m = d_ok[:, None] & (offs_l < L)[None, :]
        tile = rows[:, None] + offs_l[None, :]
        uu = tl.load(u_ptr + tile, mask=m, other=0.0).to(tl.float32)
        dt = tl.load(dt_ptr + tile, mask=m, other=0.0).to(tl.float32)
        zz = tl.load(z_ptr + tile, mask=m, other=0.0).to(tl.float32)
        acc = tl.zeros([BLOCK_D, BLOCK_L], dtype=tl.float32)
        h_next = tl.zeros([BLOCK_D, N], dtype=tl.bfloat16)
        for n in range(N):
            sel = offs_n[None, :] == n
            a_n = tl.sum(tl.where(sel, a2, 0.0), axis=1)
            h_n = tl.sum(tl.where(sel, h, 0.0), axis=1)
            b_n = tl.load(b_ptr + pb * N * L + n * L + offs_l, mask=offs_l < L, other=0.0)
            c_n = tl.load(c_ptr + pb * N * L + n * L + offs_l, mask=offs_l < L, other=0.0).to(tl.float32)
            da = tl.exp2(dt * a_n[:, None]).to(tl.bfloat16)
            dbu = (dt * uu * b_n[None, :].to(tl.float32)).to(tl.bfloat16)
            cum, hs = tl.associative_scan((da, dbu), axis=1, combine_fn=_comb)
            hs = hs + cum * h_n[:, None]
            acc += hs.to(tl.float32) * c_n[None, :]
            last = tl.sum(tl.where(offs_t[None, :] == BLOCK_L - 1, hs, 0.0), axis=1)
            h_next = tl.where(sel, last[:, None], h_next)
        h = h_next
        out = (acc + dsk[:, None] * uu) * zz * tl.sigmoid(zz)
        tl.store(y_ptr + tile, out.to(tl.bfloat16), mask=m)


def kernel(u, delta, A, B, C, D_skip, z, delta_bias):
    u, z, B, C = (t.contiguous() for t in (u, z, B, C))
    batch, D, L = u.shape
    N = A.shape[1]
    dt = F.softplus(delta.float() + delta_bias[:, None]).to(torch.bfloat16).contiguous()
    y = torch.empty_like(u)
    _ssm_bf16[(batch, triton.cdiv(D, 4))](u, dt, A.contiguous(), B, C, D_skip, z, y, D, L, N=N, BLOCK_D=4,
                                          BLOCK_L=512, num_warps=4)
    return y
