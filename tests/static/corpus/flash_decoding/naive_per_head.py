"""Naive decode: one program per (batch, query head) walks the whole cache of its KV head in 32-position tiles
with an online softmax (tl.exp, the scale applied to every score), FMA dot products, no split and no hints."""
import torch
import triton
import triton.language as tl


@triton.jit
def _decode_kernel(q_ptr, k_ptr, v_ptr, o_ptr, Hq, Hkv, L, sm_scale,
                   stride_qb, stride_qh, stride_kb, stride_kh, stride_kl, stride_ob, stride_oh,
                   D: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    b = pid // Hq
    hq = pid % Hq
    kvh = hq // (Hq // Hkv)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + b * stride_qb + hq * stride_qh + offs_d).to(tl.float32)
    k_base = k_ptr + b * stride_kb + kvh * stride_kh
    v_base = v_ptr + b * stride_kb + kvh * stride_kh
    m_i = tl.full([], float("-inf"), tl.float32)
    l_i = tl.zeros([], tl.float32)
    acc = tl.zeros([D], dtype=tl.float32)
    for start in range(0, L, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        mask = offs_n < L
        k = tl.load(k_base + offs_n[:, None] * stride_kl + offs_d[None, :], mask=mask[:, None], other=0.0)
        s = tl.sum(q[None, :] * k.to(tl.float32), axis=1) * sm_scale
        s = tl.where(mask, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        v = tl.load(v_base + offs_n[:, None] * stride_kl + offs_d[None, :], mask=mask[:, None], other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), axis=0)
        m_i = m_new
    tl.store(o_ptr + b * stride_ob + hq * stride_oh + offs_d, (acc / l_i).to(o_ptr.dtype.element_ty))


def kernel(q, k_cache, v_cache):
    B, Hq, D = q.shape
    _, Hkv, L, _ = k_cache.shape
    q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
    o = torch.empty_like(q)
    _decode_kernel[(B * Hq,)](q, k_cache, v_cache, o, Hq, Hkv, L, D ** -0.5,
                              q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                              o.stride(0), o.stride(1), D=D, BLOCK_N=32, num_warps=4)
    return o
