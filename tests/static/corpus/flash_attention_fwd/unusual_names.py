"""Attention with most of the design under unhelpful names: `mix` is the kernel and `walk` the key loop, `top`
and `mass` the running max and denominator, `fix` the rescale factor, `c` the folded scale (1/sqrt(D) / ln 2),
`lane` the query head within its KV group (fastest in the program id), `back` the reversed tile index.
Pointer loads only (no TMA); launched with BLOCK 128 x (128, or 64 for D = 256), 8 warps, 3 stages."""
import math

import torch
import triton
import triton.language as tl

LN2 = math.log(2.0)


@triton.jit
def walk(o_acc, mass, top, a, K, V, r0, lo, hi, n, st, c, i_m, i_n, i_d, EDGE: tl.constexpr, BN: tl.constexpr):
    for j in tl.range(lo, hi, BN):
        rr = (r0 + j + i_n).to(tl.int64)[:, None]
        live = ((j + i_n) < n)[:, None]
        b = tl.load(K + rr * st + i_d[None, :], mask=live, other=0.0)
        z = tl.dot(a, tl.trans(b))
        if EDGE:
            z = tl.where((i_m[:, None] >= (j + i_n)[None, :]) & ((j + i_n) < n)[None, :], z, -float("inf"))
        nt = tl.maximum(top, tl.max(z, axis=1) * c)
        e = tl.exp2(z * c - nt[:, None])
        fix = tl.exp2(top - nt)
        mass = mass * fix + tl.sum(e, axis=1)
        w = tl.load(V + rr * st + i_d[None, :], mask=live, other=0.0)
        o_acc = tl.dot(e.to(tl.bfloat16), w, o_acc * fix[:, None])
        top = nt
    return o_acc, mass, top


@triton.jit
def mix(Q, K, V, O, L, n, c, st, HA: tl.constexpr, HB: tl.constexpr, W: tl.constexpr, EDGE_ON: tl.constexpr,
        BM: tl.constexpr, BN: tl.constexpr):
    gsz: tl.constexpr = HA // HB
    t = tl.program_id(0)
    lane = t % gsz
    t = t // gsz
    nm = tl.cdiv(n, BM)
    back = nm - 1 - t % nm
    t = t // nm
    kvh = t % HB
    bb = t // HB
    qh = kvh * gsz + lane
    r_q = (bb * HA + qh) * n
    r_k = (bb * HB + kvh) * n
    i_m = back * BM + tl.arange(0, BM)
    i_n = tl.arange(0, BN)
    i_d = tl.arange(0, W)
    a = tl.load(Q + (r_q + i_m).to(tl.int64)[:, None] * st + i_d[None, :], mask=(i_m < n)[:, None], other=0.0)
    top = tl.full([BM], -float("inf"), tl.float32)
    mass = tl.zeros([BM], tl.float32)
    o_acc = tl.zeros([BM, W], tl.float32)
    if EDGE_ON:
        o_acc, mass, top = walk(o_acc, mass, top, a, K, V, r_k, 0, back * BM, n, st, c, i_m, i_n, i_d, False, BN)
        o_acc, mass, top = walk(o_acc, mass, top, a, K, V, r_k, back * BM, tl.minimum(back * BM + BM, n), n, st, c,
                                i_m, i_n, i_d, True, BN)
    else:
        o_acc, mass, top = walk(o_acc, mass, top, a, K, V, r_k, 0, n, n, st, c, i_m, i_n, i_d, False, BN)
    tl.store(O + (r_q + i_m).to(tl.int64)[:, None] * st + i_d[None, :], (o_acc / mass[:, None]).to(tl.bfloat16),
             mask=(i_m < n)[:, None])
    tl.store(L + r_q + i_m, (top + tl.log2(mass)) * 0.6931471805599453, mask=i_m < n)


def kernel(q, k, v, *, causal):
    B, HA, n, W = q.shape
    HB = k.shape[1]
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    lse = torch.empty((B, HA, n), dtype=torch.float32, device=q.device)
    bn = 128 if W <= 128 else 64
    assert causal or n % bn == 0
    c = 1.0 / math.sqrt(W) / LN2
    mix[(B * HA * triton.cdiv(n, 128),)](q, k, v, o, lse, n, c, W, HA=HA, HB=HB, W=W, EDGE_ON=causal, BM=128, BN=bn,
                                         num_warps=8, num_stages=3)
    return o, lse
