"""Partial: GQA-packed split-KV with a fixed 8 splits. Program (b*Hkv + h, s) takes the G query heads of KV head h
as a [G_PAD, D] block (G padded to 16) and runs tl.dot scores over its chunk with an online softmax in natural
exp (sm_scale on the scores); it stores the unnormalized accumulator, m and l in fp32. A merge kernel, one program
per (batch, query head), reads the S partials of its head contiguously and always runs, also for one split.
No eviction hints, no explicit pipelining; MHA goes through the same 16-row MMA."""
import torch
import triton
import triton.language as tl

NUM_SPLITS = 8


@triton.jit
def _attn_split(q_ptr, k_ptr, v_ptr, acc_ptr, m_ptr, l_ptr, Hkv, L, chunk, sm_scale,
                stride_qb, stride_qh, stride_kb, stride_kh, stride_kl,
                G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr, S: tl.constexpr):
    pid_bh = tl.program_id(0)
    pid_s = tl.program_id(1)
    b = pid_bh // Hkv
    h = pid_bh % Hkv
    offs_g = tl.arange(0, G_PAD)
    offs_d = tl.arange(0, D)
    g_mask = offs_g < G
    q = tl.load(q_ptr + b * stride_qb + (h * G + offs_g)[:, None] * stride_qh + offs_d[None, :],
                mask=g_mask[:, None], other=0.0)
    kv_base = b.to(tl.int64) * stride_kb + h.to(tl.int64) * stride_kh
    start = pid_s * chunk
    end = tl.minimum(start + chunk, L)
    m_i = tl.full([G_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    for n in range(start, end, BLOCK_N):
        offs_n = n + tl.arange(0, BLOCK_N)
        n_mask = offs_n < end
        kv_off = kv_base + offs_n[:, None] * stride_kl + offs_d[None, :]
        k = tl.load(k_ptr + kv_off, mask=n_mask[:, None], other=0.0)
        qk = tl.dot(q, tl.trans(k)) * sm_scale
        qk = tl.where(n_mask[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + kv_off, mask=n_mask[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    row = (b * Hkv * G + h * G + offs_g) * S + pid_s
    tl.store(acc_ptr + row[:, None] * D + offs_d[None, :], acc, mask=g_mask[:, None])
    tl.store(m_ptr + row, m_i, mask=g_mask)
    tl.store(l_ptr + row, l_i, mask=g_mask)


@triton.jit
def _attn_merge(acc_ptr, m_ptr, l_ptr, o_ptr, Hq, stride_ob, stride_oh, D: tl.constexpr, S: tl.constexpr):
    pid = tl.program_id(0)
    b = pid // Hq
    hq = pid % Hq
    offs_s = tl.arange(0, S)
    offs_d = tl.arange(0, D)
    m = tl.load(m_ptr + pid * S + offs_s)
    l = tl.load(l_ptr + pid * S + offs_s)
    acc = tl.load(acc_ptr + (pid * S + offs_s)[:, None] * D + offs_d[None, :])
    m_max = tl.max(m, axis=0)
    w = tl.exp(m - m_max)
    num = tl.sum(w[:, None] * acc, axis=0)
    den = tl.sum(w * l, axis=0)
    tl.store(o_ptr + b * stride_ob + hq * stride_oh + offs_d, (num / den).to(o_ptr.dtype.element_ty))


def kernel(q, k_cache, v_cache):
    B, Hq, D = q.shape
    _, Hkv, L, _ = k_cache.shape
    G = Hq // Hkv
    G_PAD = max(16, triton.next_power_of_2(G))
    q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
    S = NUM_SPLITS
    chunk = triton.cdiv(triton.cdiv(L, S), 64) * 64
    acc = torch.empty((B, Hq, S, D), dtype=torch.float32, device=q.device)
    m = torch.empty((B, Hq, S), dtype=torch.float32, device=q.device)
    l = torch.empty((B, Hq, S), dtype=torch.float32, device=q.device)
    _attn_split[(B * Hkv, S)](q, k_cache, v_cache, acc, m, l, Hkv, L, chunk, D ** -0.5,
                              q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                              G=G, G_PAD=G_PAD, D=D, BLOCK_N=64, S=S, num_warps=4)
    o = torch.empty_like(q)
    _attn_merge[(B * Hq,)](acc, m, l, o, Hq, o.stride(0), o.stride(1), D=D, S=S, num_warps=4)
    return o
