"""Partial: every sequence is cut into the same 4 splits whatever its length (a 509-token sequence is split as
much as a 65k one). Program (b*Hkv + h, s) packs the G query heads into a [G_PAD, D] block for tl.dot, loads the
tile's page ids as a vector, addresses K/V with int64 page offsets, runs an exp2 online softmax (qk_scale from the
host) in a 2-stage tl.range with evict_first, but masks every tile at the context length; all sequences write
fp32 partials and the merge kernel combines every one of them."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
NUM_SPLITS = 4


@triton.jit
def _split_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, po_ptr, plse_ptr, Hkv, qk_scale,
                  stride_qb, stride_qh, stride_kp, stride_ks, stride_kh, stride_btb,
                  G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, P: tl.constexpr,
                  BLOCK_N: tl.constexpr, S: tl.constexpr):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    b = pid // Hkv
    h = pid % Hkv
    ctx = tl.load(lens_ptr + b)
    per = tl.cdiv(tl.cdiv(ctx, S), BLOCK_N) * BLOCK_N
    lo = split * per
    hi = tl.minimum(ctx, lo + per)
    offs_g = tl.arange(0, G_PAD)
    offs_d = tl.arange(0, D)
    g_ok = offs_g < G
    q = tl.load(q_ptr + b * stride_qb + (h * G + offs_g)[:, None] * stride_qh + offs_d[None, :],
                mask=g_ok[:, None], other=0.0)
    m_i = tl.full([G_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    for n0 in tl.range(lo, hi, BLOCK_N, num_stages=2):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        n_ok = offs_n < hi
        pages = tl.load(bt_ptr + b * stride_btb + offs_n // P, mask=n_ok, other=0)
        row = pages.to(tl.int64) * stride_kp + (offs_n % P) * stride_ks + h * stride_kh
        k = tl.load(k_ptr + row[:, None] + offs_d[None, :], mask=n_ok[:, None], other=0.0,
                    eviction_policy="evict_first")
        s = tl.dot(q, tl.trans(k)) * qk_scale
        s = tl.where(n_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + row[:, None] + offs_d[None, :], mask=n_ok[:, None], other=0.0,
                    eviction_policy="evict_first")
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    slot = ((b * Hkv + h) * G + offs_g) * S + split
    tl.store(po_ptr + slot[:, None] * D + offs_d[None, :], acc / l_i[:, None], mask=g_ok[:, None])
    tl.store(plse_ptr + slot, m_i + tl.log2(l_i), mask=g_ok)


@triton.jit
def _merge_kernel(po_ptr, plse_ptr, o_ptr, Hq, stride_ob, stride_oh, D: tl.constexpr, S: tl.constexpr):
    row = tl.program_id(0)
    b = row // Hq
    hq = row % Hq
    offs_s = tl.arange(0, S)
    offs_d = tl.arange(0, D)
    lse = tl.load(plse_ptr + row * S + offs_s)
    lse = tl.where(lse == lse, lse, float("-inf"))          # empty splits of short sequences
    w = tl.exp2(lse - tl.max(lse, axis=0))
    po = tl.load(po_ptr + (row * S + offs_s)[:, None] * D + offs_d[None, :])
    po = tl.where(w[:, None] > 0, po, 0.0)
    o = tl.sum(w[:, None] * po, axis=0) / tl.sum(w, axis=0)
    tl.store(o_ptr + b * stride_ob + hq * stride_oh + offs_d, o.to(o_ptr.dtype.element_ty))


def kernel(q, k_cache, v_cache, block_tables, context_lens):
    B, Hq, D = q.shape
    _, P, Hkv, _ = k_cache.shape
    G = Hq // Hkv
    block_n = max(64, P)
    po = torch.empty((B * Hq * NUM_SPLITS, D), dtype=torch.float32, device=q.device)
    plse = torch.empty((B * Hq * NUM_SPLITS,), dtype=torch.float32, device=q.device)
    _split_kernel[(B * Hkv, NUM_SPLITS)](q, k_cache, v_cache, block_tables, context_lens, po, plse, Hkv,
                                         D ** -0.5 * LOG2E, q.stride(0), q.stride(1), k_cache.stride(0),
                                         k_cache.stride(1), k_cache.stride(2), block_tables.stride(0),
                                         G=G, G_PAD=max(16, triton.next_power_of_2(G)), D=D, P=P, BLOCK_N=block_n,
                                         S=NUM_SPLITS, num_warps=4)
    o = torch.empty_like(q)
    _merge_kernel[(B * Hq,)](po, plse, o, Hq, o.stride(0), o.stride(1), D=D, S=NUM_SPLITS, num_warps=4)
    return o
