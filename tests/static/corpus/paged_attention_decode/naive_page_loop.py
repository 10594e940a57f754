"""Naive paged decode: one program per (sequence, query head) walks the sequence one page at a time, loading that
page's id as a scalar from the block table and its P tokens as a [P, D] tile (int32 page * stride), masking every
page at the context length, with a natural-exp online softmax and FMA dot products; no split."""
import torch
import triton
import triton.language as tl


@triton.jit
def _paged_attn_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, o_ptr, Hq, G, sm_scale,
                       stride_qb, stride_qh, stride_kp, stride_ks, stride_kh, stride_btb,
                       D: tl.constexpr, P: tl.constexpr):
    b = tl.program_id(0)
    hq = tl.program_id(1)
    kvh = hq // G
    ctx = tl.load(lens_ptr + b)
    offs_d = tl.arange(0, D)
    offs_s = tl.arange(0, P)
    q = tl.load(q_ptr + b * stride_qb + hq * stride_qh + offs_d).to(tl.float32)
    m_i = tl.full([], float("-inf"), tl.float32)
    l_i = tl.zeros([], tl.float32)
    acc = tl.zeros([D], tl.float32)
    n_pages = tl.cdiv(ctx, P)
    for i in range(0, n_pages):
        page = tl.load(bt_ptr + b * stride_btb + i)
        tok = i * P + offs_s
        valid = tok < ctx
        off = page * stride_kp + offs_s[:, None] * stride_ks + kvh * stride_kh + offs_d[None, :]
        k = tl.load(k_ptr + off, mask=valid[:, None], other=0.0).to(tl.float32)
        s = tl.sum(q[None, :] * k, axis=1) * sm_scale
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        v = tl.load(v_ptr + off, mask=valid[:, None], other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m_i = m_new
    tl.store(o_ptr + b * stride_qb + hq * stride_qh + offs_d, (acc / l_i).to(o_ptr.dtype.element_ty))


def kernel(q, k_cache, v_cache, block_tables, context_lens):
    B, Hq, D = q.shape
    _, P, Hkv, _ = k_cache.shape
    o = torch.empty_like(q)
    _paged_attn_kernel[(B, Hq)](q, k_cache, v_cache, block_tables, context_lens, o, Hq, Hq // Hkv, D ** -0.5,
                                q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                                block_tables.stride(0), D=D, P=P, num_warps=4)
    return o
