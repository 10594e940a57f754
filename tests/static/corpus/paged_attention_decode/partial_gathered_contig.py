"""Partial: a first kernel copies every sequence's pages into a contiguous [B, Hkv, L_pad, D] buffer (page ids
gathered per token, int64 page offsets), and a second kernel runs flash-decoding over the copy: one program per
(sequence, KV head) with the G query heads in a [G_PAD, D] tl.dot block, an exp2 online softmax on fp32 scores
scaled by D^-0.5 * log2(e), full tiles unmasked in a 3-stage evict_first tl.range and the tail tile peeled. The
copy doubles the traffic; nothing is split."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _gather_pages(src_ptr, bt_ptr, lens_ptr, dst_ptr, Hkv, L_pad, stride_sp, stride_ss, stride_sh, stride_btb,
                  D: tl.constexpr, P: tl.constexpr, BLOCK_N: tl.constexpr):
    bh = tl.program_id(0)
    t0 = tl.program_id(1) * BLOCK_N
    b = bh // Hkv
    h = bh % Hkv
    ctx = tl.load(lens_ptr + b)
    if t0 < ctx:
        tok = t0 + tl.arange(0, BLOCK_N)
        ok = tok < ctx
        d = tl.arange(0, D)
        page = tl.load(bt_ptr + b * stride_btb + tok // P, mask=ok, other=0)
        src = page.to(tl.int64) * stride_sp + (tok % P) * stride_ss + h * stride_sh
        x = tl.load(src_ptr + src[:, None] + d[None, :], mask=ok[:, None], other=0.0)
        dst = (bh.to(tl.int64) * L_pad + tok) * D
        tl.store(dst_ptr + dst[:, None] + d[None, :], x, mask=ok[:, None])


@triton.jit
def _tile_step(q, m_i, l_i, acc, k_row, v_row, n0, hi, qk_scale, D: tl.constexpr, BLOCK_N: tl.constexpr,
               MASK: tl.constexpr):
    offs_n = n0 + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    ptrs = offs_n.to(tl.int64)[:, None] * D + offs_d[None, :]
    if MASK:
        ok = offs_n < hi
        k = tl.load(k_row + ptrs, mask=ok[:, None], other=0.0, eviction_policy="evict_first")
        v = tl.load(v_row + ptrs, mask=ok[:, None], other=0.0, eviction_policy="evict_first")
        s = tl.where(ok[None, :], tl.dot(q, tl.trans(k)) * qk_scale, float("-inf"))
    else:
        k = tl.load(k_row + ptrs, eviction_policy="evict_first")
        v = tl.load(v_row + ptrs, eviction_policy="evict_first")
        s = tl.dot(q, tl.trans(k)) * qk_scale
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return m_new, l_i, acc


@triton.jit
def _decode_contig(q_ptr, kc_ptr, vc_ptr, lens_ptr, o_ptr, Hkv, L_pad, qk_scale, stride_qb, stride_qh,
                   G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr):
    bh = tl.program_id(0)
    b = bh // Hkv
    h = bh % Hkv
    ctx = tl.load(lens_ptr + b)
    g = tl.arange(0, G_PAD)
    g_ok = g < G
    offs_d = tl.arange(0, D)
    q_off = b * stride_qb + (h * G + g)[:, None] * stride_qh + offs_d[None, :]
    q = tl.load(q_ptr + q_off, mask=g_ok[:, None], other=0.0)
    k_row = kc_ptr + bh.to(tl.int64) * L_pad * D
    v_row = vc_ptr + bh.to(tl.int64) * L_pad * D
    m_i = tl.full([G_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    n_full = ctx // BLOCK_N
    for t in tl.range(0, n_full, num_stages=3):
        m_i, l_i, acc = _tile_step(q, m_i, l_i, acc, k_row, v_row, t * BLOCK_N, ctx, qk_scale, D, BLOCK_N, False)
    if n_full * BLOCK_N < ctx:
        m_i, l_i, acc = _tile_step(q, m_i, l_i, acc, k_row, v_row, n_full * BLOCK_N, ctx, qk_scale, D, BLOCK_N, True)
    tl.store(o_ptr + q_off, (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=g_ok[:, None])


def kernel(q, k_cache, v_cache, block_tables, context_lens):
    B, Hq, D = q.shape
    _, P, Hkv, _ = k_cache.shape
    G = Hq // Hkv
    L_pad = block_tables.shape[1] * P
    kc = torch.empty((B, Hkv, L_pad, D), dtype=k_cache.dtype, device=q.device)
    vc = torch.empty_like(kc)
    grid = (B * Hkv, triton.cdiv(L_pad, 64))
    for src, dst in ((k_cache, kc), (v_cache, vc)):
        _gather_pages[grid](src, block_tables, context_lens, dst, Hkv, L_pad, src.stride(0), src.stride(1),
                            src.stride(2), block_tables.stride(0), D=D, P=P, BLOCK_N=64, num_warps=4)
    o = torch.empty_like(q)
    _decode_contig[(B * Hkv,)](q, kc, vc, context_lens, o, Hkv, L_pad, D ** -0.5 * LOG2E, q.stride(0), q.stride(1),
                               G=G, G_PAD=max(16, triton.next_power_of_2(G)), D=D, BLOCK_N=64, num_warps=4)
    return o
