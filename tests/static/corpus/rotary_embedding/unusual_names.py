"""RoPE with the whole design under unhelpful names: `spin` is the kernel and `turn` its helper, `A`/`B` the two
projections, `lut_a` and `lut_b` the cos/sin tables, `u`/`v` the pair members, `unzip`/`zip2` are tl.split and
tl.join imported under other names, and KEEP/DROP are the eviction policies."""
import torch
import triton
import triton.language as tl
from triton.language import join as zip2
from triton.language import split as unzip

KEEP = "evict_last"
DROP = "evict_first"


@triton.jit
def turn(src, dst, r, live, ca, sb, nh, s0, s1, W: tl.constexpr, R: tl.constexpr, P: tl.constexpr,
         WP: tl.constexpr, ODD: tl.constexpr):
    for h in tl.range(0, nh, P):
        hh = (h + tl.arange(0, P))[None, :, None]
        ok = live[:, None, None] & (hh < nh)
        at = src + r.to(tl.int64)[:, None, None] * s0 + hh * s1
        to = dst + r.to(tl.int64)[:, None, None] * s0 + hh * s1
        if ODD:
            e = tl.arange(0, 2 * WP)[None, None, :]
            w = tl.load(at + e, mask=ok & (e < 2 * W), other=0.0, eviction_policy=DROP).to(tl.float32)
            u, v = unzip(tl.reshape(w, [R, P, WP, 2]))
            z = zip2(u * ca - v * sb, v * ca + u * sb)
            tl.store(to + e, tl.reshape(z, [R, P, 2 * WP]).to(tl.bfloat16), mask=ok & (e < 2 * W))
        else:
            e = tl.arange(0, WP)[None, None, :]
            u = tl.load(at + e, mask=ok & (e < W), other=0.0, eviction_policy=DROP).to(tl.float32)
            v = tl.load(at + W + e, mask=ok & (e < W), other=0.0, eviction_policy=DROP).to(tl.float32)
            tl.store(to + e, (u * ca - v * sb).to(tl.bfloat16), mask=ok & (e < W))
            tl.store(to + W + e, (v * ca + u * sb).to(tl.bfloat16), mask=ok & (e < W))


@triton.jit
def spin(A, B, idx, lut_a, lut_b, A2, B2, n, na, nb, a0, a1, b0, b1, lut_stride,
         W: tl.constexpr, R: tl.constexpr, PA: tl.constexpr, PB: tl.constexpr, WP: tl.constexpr,
         ODD: tl.constexpr):
    r = tl.program_id(0) * R + tl.arange(0, R)
    live = r < n
    where = tl.load(idx + r, mask=live, other=0)
    f = tl.arange(0, WP)
    g = where[:, None] * lut_stride + f[None, :]
    gm = live[:, None] & (f < W)[None, :]
    ca = tl.load(lut_a + g, mask=gm, other=0.0, eviction_policy=KEEP)[:, None, :]
    sb = tl.load(lut_b + g, mask=gm, other=0.0, eviction_policy=KEEP)[:, None, :]
    turn(A, A2, r, live, ca, sb, na, a0, a1, W, R, PA, WP, ODD)
    turn(B, B2, r, live, ca, sb, nb, b0, b1, W, R, PB, WP, ODD)


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    n, na, d = q.shape
    nb = k.shape[1]
    assert q.is_contiguous() and k.is_contiguous()
    q2, k2 = torch.empty_like(q), torch.empty_like(k)
    wp = triton.next_power_of_2(d // 2)
    r = 4 if (na + nb) * d <= 4096 else 2
    spin[(triton.cdiv(n, r),)](q, k, positions, cos_cache, sin_cache, q2, k2, n, na, nb, q.stride(0), q.stride(1),
                               k.stride(0), k.stride(1), cos_cache.stride(0), W=d // 2, R=r,
                               PA=min(8, triton.next_power_of_2(na)), PB=min(8, triton.next_power_of_2(nb)),
                               WP=wp, ODD=style == "gptj")
    return q2, k2
