"""The expert design under other names: 'lanes' (R channels per program), 'mem' (the carried fp32 state),
'wA' (A times K = 1/ln 2, once per program), 'shared_row'/'read_row' (row s of the B/C chunk, loaded once and
broadcast over the lanes), one state at a time scanned with tl.associative_scan and a '_chain' combine
written (g1, s1, g2, s2) -> (g1 * g2, s1 * g2 + s2); softplus, D*u and the gate fused."""
import math

import torch
import triton
import triton.language as tl

K = tl.constexpr(1.0 / math.log(2.0))


@triton.jit
def _chain(g1, s1, g2, s2):
    return g1 * g2, s1 * g2 + s2


@triton.jit
def _ssm(inp, dlt, amat, bmat, cmat, dsk_ptr, gate_ptr, off_ptr, out, D, L, sb, sd, sbb, sbn,
         S: tl.constexpr, R: tl.constexpr, T: tl.constexpr):
    who = tl.program_id(0).to(tl.int64)
    grp = tl.program_id(1)
    lanes = grp * R + tl.arange(0, R)
    ok = lanes < D
    states = tl.arange(0, S)
    wA = tl.load(amat + lanes[:, None] * S + states[None, :], mask=ok[:, None], other=0.0) * K
    dsk = tl.load(dsk_ptr + lanes, mask=ok, other=0.0)
    off = tl.load(off_ptr + lanes, mask=ok, other=0.0)
    mem = tl.zeros([R, S], dtype=tl.float32)
    for start in range(0, L, T):
        steps = start + tl.arange(0, T)
        live = ok[:, None] & (steps < L)[None, :]
        spot = who * sb + lanes[:, None].to(tl.int64) * sd + steps[None, :]
        p = tl.load(inp + spot, mask=live, other=0.0).to(tl.float32)
        q = tl.load(dlt + spot, mask=live, other=0.0).to(tl.float32) + off[:, None]
        gate = tl.load(gate_ptr + spot, mask=live, other=0.0).to(tl.float32)
        step_size = tl.where(live, tl.where(q > 20.0, q, tl.log(1.0 + tl.exp(q))), 0.0)
        mix = tl.zeros([R, T], dtype=tl.float32)
        nxt = tl.zeros([R, S], dtype=tl.float32)
        for s in range(S):
            pick = states[None, :] == s
            col = tl.sum(tl.where(pick, wA, 0.0), axis=1)
            prev = tl.sum(tl.where(pick, mem, 0.0), axis=1)
            shared_row = tl.load(bmat + who * sbb + s * sbn + steps, mask=steps < L, other=0.0).to(tl.float32)
            read_row = tl.load(cmat + who * sbb + s * sbn + steps, mask=steps < L, other=0.0).to(tl.float32)
            g = tl.exp2(step_size * col[:, None])
            s_in = step_size * p * shared_row[None, :]
            G, Sx = tl.associative_scan((g, s_in), 1, _chain)
            Sx = Sx + G * prev[:, None]
            mix += Sx * read_row[None, :]
            last = tl.sum(tl.where(steps[None, :] == start + T - 1, Sx, 0.0), axis=1)
            nxt = tl.where(pick, last[:, None], nxt)
        mem = nxt
        res = (mix + dsk[:, None] * p) * (gate * tl.sigmoid(gate))
        tl.store(out + spot, res.to(tl.bfloat16), mask=live)


def kernel(u, delta, A, B, C, D_skip, z, delta_bias):
    u, delta, z, B, C = (t.contiguous() for t in (u, delta, z, B, C))
    batch, D, L = u.shape
    S = A.shape[1]
    y = torch.empty_like(u)
    R, T = 2, 1024
    _ssm[(batch, triton.cdiv(D, R))](u, delta, A.contiguous(), B, C, D_skip, z, delta_bias, y, D, L,
                                     u.stride(0), u.stride(1), B.stride(0), B.stride(1), S=S, R=R, T=T,
                                     num_warps=4)
    return y
