"""Partial: a prefill kernel reused for decode. Program (b*Hkv + h, s) pads the group's query heads to a 64-row
BLOCK_M and pre-scales q by D^-0.5 * log2(e) but rounds it back to bf16 for tl.dot; exp2 online softmax over
evict_first tiles in a 4-stage tl.range. The split count follows the SM count, but partials are written in the
input dtype and the merge (one program per output element, strided over the splits) is always launched."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
BLOCK_M = 64


@triton.jit
def _prefill_like(q_ptr, k_ptr, v_ptr, po_ptr, plse_ptr, Hkv, L, chunk, S, qk_scale,
                  stride_qb, stride_qh, stride_kb, stride_kh, stride_kl,
                  G: tl.constexpr, BLOCK_M: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_bh = tl.program_id(0)
    pid_s = tl.program_id(1)
    b = pid_bh // Hkv
    h = pid_bh % Hkv
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    m_ok = offs_m < G
    q = tl.load(q_ptr + b * stride_qb + (h * G + offs_m)[:, None] * stride_qh + offs_d[None, :],
                mask=m_ok[:, None], other=0.0)
    q = (q.to(tl.float32) * qk_scale).to(tl.bfloat16)
    base = b.to(tl.int64) * stride_kb + h.to(tl.int64) * stride_kh
    lo = pid_s * chunk
    hi = tl.minimum(lo + chunk, L)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for n0 in tl.range(lo, hi, BLOCK_N, num_stages=4):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        n_ok = offs_n < hi
        ptrs = base + offs_n[:, None] * stride_kl + offs_d[None, :]
        k = tl.load(k_ptr + ptrs, mask=n_ok[:, None], other=0.0, eviction_policy="evict_first")
        s = tl.dot(q, tl.trans(k))
        s = tl.where(n_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + ptrs, mask=n_ok[:, None], other=0.0, eviction_policy="evict_first")
        acc = tl.dot(p.to(tl.bfloat16), v, acc * alpha[:, None])
        m_i = m_new
    row = (b * Hkv + h) * G + offs_m
    tl.store(po_ptr + (row * S + pid_s)[:, None] * D + offs_d[None, :],
             (acc / l_i[:, None]).to(po_ptr.dtype.element_ty), mask=m_ok[:, None])
    tl.store(plse_ptr + row * S + pid_s, m_i + tl.log2(l_i), mask=m_ok)


@triton.jit
def _merge_elementwise(po_ptr, plse_ptr, o_ptr, S, D: tl.constexpr, S_PAD: tl.constexpr):
    e = tl.program_id(0)               # one output element: (b*Hq + hq) * D + d
    bh = e // D
    d = e % D
    offs_s = tl.arange(0, S_PAD)
    ok = offs_s < S
    lse = tl.load(plse_ptr + bh * S + offs_s, mask=ok, other=float("-inf"))
    w = tl.exp2(lse - tl.max(lse, axis=0))
    part = tl.load(po_ptr + (bh * S + offs_s) * D + d, mask=ok, other=0.0).to(tl.float32)
    tl.store(o_ptr + e, (tl.sum(w * part, axis=0) / tl.sum(w, axis=0)).to(o_ptr.dtype.element_ty))


def kernel(q, k_cache, v_cache):
    B, Hq, D = q.shape
    _, Hkv, L, _ = k_cache.shape
    G = Hq // Hkv
    q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    S = max(1, min(triton.cdiv(2 * sms, B * Hkv), L // 256))
    chunk = triton.cdiv(triton.cdiv(L, S), 64) * 64
    S = triton.cdiv(L, chunk)
    po = torch.empty((B, Hq, S, D), dtype=q.dtype, device=q.device)
    plse = torch.empty((B, Hq, S), dtype=torch.float32, device=q.device)
    _prefill_like[(B * Hkv, S)](q, k_cache, v_cache, po, plse, Hkv, L, chunk, S, D ** -0.5 * LOG2E,
                                q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                                G=G, BLOCK_M=BLOCK_M, D=D, BLOCK_N=64, num_warps=4)
    o = torch.empty_like(q)
    _merge_elementwise[(B * Hq * D,)](po, plse, o, S, D=D, S_PAD=triton.next_power_of_2(S), num_warps=1)
    return o
