"""Absmax quantization with the whole design under unhelpful names: `k_a` loads [R, C, W] blocks directly as a
3-D tile (rows x groups x group width), `hi` is the group amax, `mul` the inverse scale, `MAGIC` the
round-half-even constant, `k_b` walks a wide group twice (`keep`, then `drop`)."""
import torch
import triton
import triton.language as tl

MAGIC = 12582912.0
TINY = 1e-12


@triton.jit
def k_a(src, dst, sc, m, n, ls, ld, lc, W: tl.constexpr, R: tl.constexpr, C: tl.constexpr,
        LIM: tl.constexpr, E4: tl.constexpr):
    a = tl.program_id(0) * R + tl.arange(0, R)
    b = tl.program_id(1) * C + tl.arange(0, C)
    c = tl.arange(0, W)
    ok2 = (a[:, None] < m) & (b[None, :] < n // W)
    ok = ok2[:, :, None]
    at = a.to(tl.int64)[:, None, None] * ls + b[None, :, None] * W + c[None, None, :]
    t = tl.load(src + at, mask=ok, other=0.0, eviction_policy="evict_first")
    hi = tl.max(tl.abs(t), 2)
    hi = tl.maximum(hi.to(tl.float32), TINY)
    mul = LIM / hi
    u = t.to(tl.float32) * mul[:, :, None]
    u = tl.where(u > LIM, LIM, tl.where(u < -LIM, -LIM, u))
    if E4:
        out = u.to(tl.float8e4nv)
    else:
        out = ((u + MAGIC) - MAGIC).to(tl.int8)
    dt = a.to(tl.int64)[:, None, None] * ld + b[None, :, None] * W + c[None, None, :]
    tl.store(dst + dt, out, mask=ok, cache_modifier=".cs")
    tl.store(sc + a.to(tl.int64)[:, None] * lc + b[None, :], hi / LIM, mask=ok2)


@triton.jit
def k_b(src, dst, sc, n, w, ls, ld, lc, S: tl.constexpr, LIM: tl.constexpr, E4: tl.constexpr):
    i = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1)
    p = src + i * ls + j * w
    o = dst + i * ld + j * w
    z = tl.arange(0, S)
    keep = tl.full([S], 0.0, tl.float32)
    for k in range(0, w, S):
        v = tl.load(p + k + z, mask=k + z < w, other=0.0, eviction_policy="evict_last")
        keep = tl.maximum(keep, tl.abs(v.to(tl.float32)))
    hi = tl.maximum(tl.max(keep, 0), TINY)
    mul = LIM / hi
    for k in range(0, w, S):
        drop = tl.load(p + k + z, mask=k + z < w, other=0.0, eviction_policy="evict_first")
        u = tl.minimum(tl.maximum(drop.to(tl.float32) * mul, -LIM), LIM)
        if E4:
            tl.store(o + k + z, u.to(tl.float8e4nv), mask=k + z < w, cache_modifier=".cs")
        else:
            tl.store(o + k + z, ((u + MAGIC) - MAGIC).to(tl.int8), mask=k + z < w, cache_modifier=".cs")
    tl.store(sc + i * lc + j, hi / LIM)


def kernel(x, *, G, qdtype):
    m, n = x.shape
    x = x.contiguous()
    e4 = qdtype == "fp8_e4m3"
    lim = 448.0 if e4 else 127.0
    y = torch.empty((m, n), device=x.device, dtype=torch.float8_e4m3fn if e4 else torch.int8)
    sc = torch.empty((m, n // G), device=x.device, dtype=torch.float32)
    if G * 2 <= 32768 and (G & (G - 1)) == 0:
        c = max(1, min(triton.next_power_of_2(n // G), 1024 // G))
        r = max(1, 8192 // (c * G))
        k_a[(triton.cdiv(m, r), triton.cdiv(n // G, c))](x, y, sc, m, n, x.stride(0), y.stride(0), sc.stride(0),
                                                          W=G, R=r, C=c, LIM=lim, E4=e4, num_warps=8)
    else:
        k_b[(m, n // G)](x, y, sc, n, G, x.stride(0), y.stride(0), sc.stride(0), S=8192, LIM=lim, E4=e4,
                         num_warps=8)
    return y, sc
