"""Block-scaled fp8 GEMM under terse names: tl.swizzle2d tile order in a flattened persistent loop over device
descriptors (5 stages), promotion as tl.fma(fresh_dot, scale, acc), tl.permute for the K-major B view, and for
M <= 64 a K-sliced variant whose fp32 slabs are folded by a second kernel."""
import functools

import torch
import triton
import triton.language as tl

KB = tl.constexpr(128)


@triton.jit
def q(x, y, z, sx, sy, m, n, k, hx, hy, P: tl.constexpr, TM: tl.constexpr, TN: tl.constexpr, G: tl.constexpr):
    gx = tl.make_tensor_descriptor(x, shape=[m, k], strides=[k, 1], block_shape=[TM, KB])
    gy = tl.make_tensor_descriptor(y, shape=[n, k], strides=[k, 1], block_shape=[TN, KB])
    u = tl.cdiv(m, TM)
    v = tl.cdiv(n, TN)
    for w in tl.range(tl.program_id(0), u * v, P, flatten=True):
        i, j = tl.swizzle2d(w // v, w % v, u, v, G)
        r = i * TM + tl.arange(0, TM)
        h = tl.zeros((TM, TN), dtype=tl.float32)
        for e in range(k // KB):
            xa = gx.load([i * TM, e * KB])
            yb = gy.load([j * TN, e * KB])
            f = tl.load(sx + (r % m) * hx + e)[:, None] * tl.load(sy + (j * TN // KB) * hy + e)
            h = tl.fma(tl.dot(xa, tl.permute(yb, (1, 0))), f, h)
        c = j * TN + tl.arange(0, TN)
        tl.store(z + r[:, None] * n + c[None, :], h.to(tl.bfloat16), mask=(r[:, None] < m) & (c[None, :] < n))


@triton.jit
def p(x, y, slab, sx, sy, m, n, k, hx, hy, L, TM: tl.constexpr, TN: tl.constexpr):
    j = tl.program_id(0)
    s = tl.program_id(1)
    r = tl.arange(0, TM)
    c = j * TN + tl.arange(0, TN)
    d = tl.arange(0, KB)
    h = tl.zeros((TM, TN), dtype=tl.float32)
    for e in tl.range(s * L, tl.minimum(k // KB, s * L + L), num_stages=5):
        xa = tl.load(x + (r % m)[:, None] * k + (e * KB + d)[None, :])
        yb = tl.load(y + c[:, None] * k + (e * KB + d)[None, :])
        f = tl.load(sx + (r % m) * hx + e)[:, None] * tl.load(sy + (j * TN // KB) * hy + e)
        h = tl.fma(tl.dot(xa, tl.permute(yb, (1, 0))), f, h)
    tl.store(slab + s * m * n + r[:, None] * n + c[None, :], h, mask=r[:, None] < m)


@triton.jit
def o(slab, z, mn, S, T: tl.constexpr):
    t = tl.program_id(0) * T + tl.arange(0, T)
    g = tl.zeros((T,), dtype=tl.float32)
    for s in range(S):
        g += tl.load(slab + s * mn + t, mask=t < mn, other=0.0)
    tl.store(z + t, g.to(tl.bfloat16), mask=t < mn)


def _mem(size, alignment, stream, dev=None):
    return torch.empty(size, dtype=torch.int8, device=dev)


def kernel(A, B, a_s, b_s):
    m, k = A.shape
    n = B.shape[0]
    z = torch.empty((m, n), device=A.device, dtype=torch.bfloat16)
    lanes = torch.cuda.get_device_properties(A.device).multi_processor_count
    if m <= 64:
        S = max(1, min(4, triton.cdiv(2 * lanes, n // 64), (k // 128) // 4))
        L = triton.cdiv(k // 128, S)
        S = triton.cdiv(k // 128, L)
        slab = torch.empty((S, m, n), device=A.device, dtype=torch.float32)
        p[(n // 64, S)](A, B, slab, a_s, b_s, m, n, k, a_s.stride(0), b_s.stride(0), L,
                        TM=max(16, triton.next_power_of_2(m)), TN=64, num_warps=4)
        o[(triton.cdiv(m * n, 1024),)](slab, z, m * n, S, T=1024)
        return z
    triton.set_allocator(functools.partial(_mem, dev=A.device))
    P = min(lanes, triton.cdiv(m, 128) * (n // 128))
    q[(P,)](A, B, z, a_s, b_s, m, n, k, a_s.stride(0), b_s.stride(0), P=P, TM=128, TN=128, G=8, num_warps=8,
            num_stages=5)
    return z
