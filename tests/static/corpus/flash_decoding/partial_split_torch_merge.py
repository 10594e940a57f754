"""Partial: split-KV over a fixed 16 splits, one program per (batch, query head, split) with an exp2 online
softmax (D^-0.5 * log2(e) folded into the fp32 q), evict_first K/V tiles of 64 x D in a 3-stage tl.range; the
normalized partials and base-2 lse go to fp32 workspaces and are merged with PyTorch ops."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
NUM_SPLITS = 16


@triton.jit
def _split_kernel(q_ptr, k_ptr, v_ptr, po_ptr, plse_ptr, Hq, G, L, chunk, qk_scale,
                  stride_qb, stride_qh, stride_kb, stride_kh, stride_kl,
                  D: tl.constexpr, BLOCK_N: tl.constexpr, S: tl.constexpr):
    bh = tl.program_id(0)
    split = tl.program_id(1)
    b = bh // Hq
    hq = bh % Hq
    kvh = hq // G
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + b * stride_qb + hq * stride_qh + offs_d).to(tl.float32) * qk_scale
    lo = split * chunk
    hi = tl.minimum(lo + chunk, L)
    k_base = k_ptr + b.to(tl.int64) * stride_kb + kvh * stride_kh
    v_base = v_ptr + b.to(tl.int64) * stride_kb + kvh * stride_kh
    m_i = tl.full([], float("-inf"), tl.float32)
    l_i = tl.zeros([], tl.float32)
    acc = tl.zeros([D], tl.float32)
    for start in tl.range(lo, hi, BLOCK_N, num_stages=3):
        offs_n = start + tl.arange(0, BLOCK_N)
        mask = offs_n < hi
        k = tl.load(k_base + offs_n[:, None] * stride_kl + offs_d[None, :], mask=mask[:, None], other=0.0,
                    eviction_policy="evict_first")
        s = tl.sum(q[None, :] * k.to(tl.float32), axis=1)
        s = tl.where(mask, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        v = tl.load(v_base + offs_n[:, None] * stride_kl + offs_d[None, :], mask=mask[:, None], other=0.0,
                    eviction_policy="evict_first")
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), axis=0)
        m_i = m_new
    slot = bh * S + split
    tl.store(po_ptr + slot * D + offs_d, acc / l_i)
    tl.store(plse_ptr + slot, m_i + tl.log2(l_i))


def kernel(q, k_cache, v_cache):
    B, Hq, D = q.shape
    _, Hkv, L, _ = k_cache.shape
    q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
    S = NUM_SPLITS
    chunk = triton.cdiv(L, S)
    po = torch.empty((B, Hq, S, D), dtype=torch.float32, device=q.device)
    plse = torch.empty((B, Hq, S), dtype=torch.float32, device=q.device)
    _split_kernel[(B * Hq, S)](q, k_cache, v_cache, po, plse, Hq, Hq // Hkv, L, chunk, D ** -0.5 * LOG2E,
                               q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                               D=D, BLOCK_N=64, S=S, num_warps=4)
    # merge of the splits (base-2 lse weights), in PyTorch
    w = torch.exp2(plse - plse.amax(-1, keepdim=True))
    w = w / w.sum(-1, keepdim=True)
    return (po * w[..., None]).sum(-2).to(q.dtype)
