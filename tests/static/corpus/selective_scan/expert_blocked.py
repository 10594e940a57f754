"""Program (batch, block of BLOCK_D channels), L in chunks: one [BLOCK_D, N, BLOCK_L] tile of (exp2(dt*A2),
dt*B*u) scanned along time with tl.associative_scan, the carried [BLOCK_D, N] fp32 state entering through the
cumulative decay. A2 = A * log2(e) loaded once per program; B/C chunks loaded once as [N, BLOCK_L] and
broadcast over the channels; softplus once per (t, d); D*u and the silu gate fused before one bf16 store."""
import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _combine(a1, b1, a2, b2):
    return a1 * a2, a2 * b1 + b2


@triton.autotune(
    configs=[triton.Config({"BLOCK_D": 2, "BLOCK_L": 256}, num_warps=4),
             triton.Config({"BLOCK_D": 4, "BLOCK_L": 128}, num_warps=4),
             triton.Config({"BLOCK_D": 4, "BLOCK_L": 256}, num_warps=8)],
    key=["D", "L"])
@triton.jit
def _ssm_fwd(u_ptr, delta_ptr, a_ptr, b_ptr, c_ptr, dskip_ptr, z_ptr, bias_ptr, y_ptr,
             D, L, s_ub, s_ud, s_bb, s_bn,
             N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_L: tl.constexpr):
    pid_b = tl.program_id(0).to(tl.int64)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    offs_n = tl.arange(0, N)
    offs_t = tl.arange(0, BLOCK_L)
    a2 = tl.load(a_ptr + offs_d[:, None] * N + offs_n[None, :], mask=d_ok[:, None], other=0.0) * LOG2E
    dsk = tl.load(dskip_ptr + offs_d, mask=d_ok, other=0.0)
    bias = tl.load(bias_ptr + offs_d, mask=d_ok, other=0.0)
    rows = pid_b * s_ub + offs_d.to(tl.int64) * s_ud
    bcb = pid_b * s_bb
    h = tl.zeros([BLOCK_D, N], dtype=tl.float32)
    for l0 in range(0, L, BLOCK_L):
        offs_l = l0 + offs_t
        l_ok = offs_l < L
        m = d_ok[:, None] & l_ok[None, :]
        tile = rows[:, None] + offs_l[None, :]
        uu = tl.load(u_ptr + tile, mask=m, other=0.0).to(tl.float32)
        v = tl.load(delta_ptr + tile, mask=m, other=0.0).to(tl.float32) + bias[:, None]
        zz = tl.load(z_ptr + tile, mask=m, other=0.0).to(tl.float32)
        dt = tl.where(v > 20.0, v, tl.log2(1.0 + tl.exp2(v * LOG2E)) * LN2)
        dt = tl.where(m, dt, 0.0)
        bc = bcb + offs_n[:, None] * s_bn + offs_l[None, :]
        bt = tl.load(b_ptr + bc, mask=l_ok[None, :], other=0.0).to(tl.float32)
        ct = tl.load(c_ptr + bc, mask=l_ok[None, :], other=0.0).to(tl.float32)
        da = tl.exp2(dt[:, None, :] * a2[:, :, None])
        dbu = (dt * uu)[:, None, :] * bt[None, :, :]
        decay, hs = tl.associative_scan((da, dbu), axis=2, combine_fn=_combine)
        hs = hs + decay * h[:, :, None]
        yy = tl.sum(hs * ct[None, :, :], axis=1)
        h = tl.sum(tl.where(offs_t[None, None, :] == BLOCK_L - 1, hs, 0.0), axis=2)
        gate = zz / (1.0 + tl.exp2(-zz * LOG2E))
        tl.store(y_ptr + tile, ((yy + dsk[:, None] * uu) * gate).to(tl.bfloat16), mask=m)


def kernel(u, delta, A, B, C, D_skip, z, delta_bias):
    u, delta, z, B, C = (t.contiguous() for t in (u, delta, z, B, C))
    batch, D, L = u.shape
    N = A.shape[1]
    y = torch.empty_like(u)
    grid = lambda meta: (batch, triton.cdiv(D, meta["BLOCK_D"]))  # noqa: E731
    _ssm_fwd[grid](u, delta, A.contiguous(), B, C, D_skip, z, delta_bias, y, D, L,
                   u.stride(0), u.stride(1), B.stride(0), B.stride(1), N=N)
    return y
