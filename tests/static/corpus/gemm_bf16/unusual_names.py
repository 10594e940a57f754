"""Persistent grouped GEMM with an unmasked fast path, under terse names (no autotuning, no descriptors)."""
import torch
import triton
import triton.language as tl


@triton.jit
def g(x, y, z, m, n, k, sxm, syn, szm, T: tl.constexpr, U: tl.constexpr, V: tl.constexpr, G: tl.constexpr,
      S: tl.constexpr, FULL: tl.constexpr):
    nm = tl.cdiv(m, T)
    nb = tl.cdiv(n, U)
    kv = tl.arange(0, V)
    for w in tl.range(tl.program_id(0), nm * nb, S):
        band = w // (G * nb)
        h = tl.minimum(nm - band * G, G)
        i = band * G + (w % (G * nb)) % h
        j = (w % (G * nb)) // h
        ri = (i * T + tl.arange(0, T)) % m
        rj = (j * U + tl.arange(0, U)) % n
        px = x + ri[:, None] * sxm + kv[None, :]
        py = y + rj[:, None] * syn + kv[None, :]
        o = tl.zeros((T, U), dtype=tl.float32)
        for q in tl.range(0, tl.cdiv(k, V), num_stages=4):
            if FULL:
                p = tl.load(px)
                r = tl.load(py)
            else:
                p = tl.load(px, mask=kv[None, :] < k - q * V, other=0.0)
                r = tl.load(py, mask=kv[None, :] < k - q * V, other=0.0)
            o += tl.dot(p, tl.trans(r))
            px += V
            py += V
        tl.store(z + (i * T + tl.arange(0, T))[:, None] * szm + (j * U + tl.arange(0, U))[None, :],
                 o.to(tl.bfloat16), mask=((i * T + tl.arange(0, T))[:, None] < m) & ((j * U + tl.arange(0, U))[None, :] < n))


def kernel(A, B):
    m, k = A.shape
    n = B.shape[0]
    out = torch.empty((m, n), device=A.device, dtype=torch.bfloat16)
    u = torch.cuda.get_device_properties(A.device).multi_processor_count
    tiles = triton.cdiv(m, 128) * triton.cdiv(n, 256)
    g[(min(u, tiles),)](A, B, out, m, n, k, A.stride(0), B.stride(0), out.stride(0), T=128, U=256, V=64, G=8, S=min(u, tiles),
                        FULL=k % 64 == 0, num_warps=8)
    return out
