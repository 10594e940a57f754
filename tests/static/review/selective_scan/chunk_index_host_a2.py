"""Selective scan with a channel-major grid and chunks indexed by chunk number.

grid = (cdiv(D, BLOCK_D), batch). The launcher folds log2(e) into A once on the host (A2 = A * log2 e, a [D, N]
tensor), so the kernel's decay is exp2(dt * A2). The time loop walks chunk indices c = 0..n_chunks-1
(l0 = c * BLOCK_L). Per state n the chunk's (dA, dBu) pairs are scanned with the carried state folded into the
first element (dBu[0] += dA[0] * h_prev), so the scan's last value is directly the next carry.
"""
import math

import torch
import triton
import triton.language as tl

_LOG2E = 1.0 / math.log(2.0)

CONFIGS = [triton.Config({"BLOCK_D": bd, "BLOCK_L": bl}, num_warps=w)
           for bd, bl, w in ((1, 1024, 4), (2, 512, 4), (2, 1024, 8), (4, 256, 4))]


@triton.jit
def _op(a1, b1, a2, b2):
    return a2 * a1, b2 + a2 * b1


@triton.autotune(configs=CONFIGS, key=["D", "L"])
@triton.jit
def _ss_kernel(u_ptr, delta_ptr, a2_ptr, b_ptr, c_ptr, dskip_ptr, z_ptr, dbias_ptr, y_ptr,
               D, L,
               stride_b, stride_d, stride_bc_b, stride_bc_n,
               N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_L: tl.constexpr):
    pid_d = tl.program_id(0)
    pid_b = tl.program_id(1).to(tl.int64)
    dd = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    dm = dd < D
    nn = tl.arange(0, N)
    tt = tl.arange(0, BLOCK_L)
    a2 = tl.load(a2_ptr + dd[:, None] * N + nn[None, :], mask=dm[:, None], other=0.0)
    skip = tl.load(dskip_ptr + dd, mask=dm, other=0.0)
    dbias = tl.load(dbias_ptr + dd, mask=dm, other=0.0)
    rows = pid_b * stride_b + dd.to(tl.int64) * stride_d
    bptr = b_ptr + pid_b * stride_bc_b
    cptr = c_ptr + pid_b * stride_bc_b
    state = tl.zeros((BLOCK_D, N), dtype=tl.float32)
    n_chunks = tl.cdiv(L, BLOCK_L)
    for c in range(n_chunks):
        l0 = c * BLOCK_L
        ll = l0 + tt
        lm = ll < L
        mk = dm[:, None] & lm[None, :]
        addr = rows[:, None] + ll[None, :]
        u = tl.load(u_ptr + addr, mask=mk, other=0.0).to(tl.float32)
        v = tl.load(delta_ptr + addr, mask=mk, other=0.0).to(tl.float32) + dbias[:, None]
        zg = tl.load(z_ptr + addr, mask=mk, other=0.0).to(tl.float32)
        dt = tl.where(v <= 20.0, tl.log(1.0 + tl.exp(v)), v)
        dt = tl.where(mk, dt, 0.0)
        dtu = dt * u
        ysum = tl.zeros((BLOCK_D, BLOCK_L), dtype=tl.float32)
        nxt = tl.zeros((BLOCK_D, N), dtype=tl.float32)
        for n in tl.static_range(N):
            pick = nn[None, :] == n
            a2n = tl.sum(tl.where(pick, a2, 0.0), axis=1)
            hprev = tl.sum(tl.where(pick, state, 0.0), axis=1)
            brow = tl.load(bptr + n * stride_bc_n + ll, mask=lm, other=0.0).to(tl.float32)
            crow = tl.load(cptr + n * stride_bc_n + ll, mask=lm, other=0.0).to(tl.float32)
            da = tl.exp2(dt * a2n[:, None])
            dbu = dtu * brow[None, :]
            # the state entering the chunk rides in the first element
            dbu = tl.where(tt[None, :] == 0, dbu + da * hprev[:, None], dbu)
            _, hs = tl.associative_scan((da, dbu), axis=1, combine_fn=_op)
            ysum += hs * crow[None, :]
            fin = tl.sum(tl.where(tt[None, :] == BLOCK_L - 1, hs, 0.0), axis=1)
            nxt = tl.where(pick, fin[:, None], nxt)
        state = nxt
        res = (ysum + skip[:, None] * u) * (zg / (1.0 + tl.exp(-zg)))
        tl.store(y_ptr + addr, res.to(y_ptr.dtype.element_ty), mask=mk)


def _launch(u, delta, A, B, C, D_skip, z, delta_bias):
    batch, D, L = u.shape
    N = A.shape[1]
    u, delta, z, B, C = (t.contiguous() for t in (u, delta, z, B, C))
    a2 = (A.float() * _LOG2E).contiguous()   # log2(e) folded into A once per call
    y = torch.empty_like(u)

    def grid(meta):
        return (triton.cdiv(D, meta["BLOCK_D"]), batch)

    _ss_kernel[grid](u, delta, a2, B, C, D_skip.contiguous(), z, delta_bias.contiguous(), y,
                     D, L, u.stride(0), u.stride(1), B.stride(0), B.stride(1), N=N)
    return y


def kernel(u, delta, A, B, C, D_skip, z, delta_bias):
    return _launch(u, delta, A, B, C, D_skip, z, delta_bias)
