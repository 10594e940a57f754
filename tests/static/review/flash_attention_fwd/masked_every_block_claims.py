"""Flash attention forward, "causal block skipping, exp2-folded scale, GQA-aware order" per its docstrings.

What runs: the loop visits every K/V block and applies the causal mask (tl.where) on each of them; scores are
scaled by sm_scale and exponentiated with tl.exp; P is cast to bf16 but its product is added to the
accumulator outside the dot; the grid runs q blocks fastest in launch order, forward; one stage, pointer loads.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _causal_skip_exp2_fold(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, sm_scale, S, HQ, HKV,
                           D: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    b = off_hz // HQ
    h = off_hz % HQ
    kv = h // (HQ // HKV)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q_base = q_ptr + (b * HQ + h).to(tl.int64) * S * D
    kv_off = (b * HKV + kv).to(tl.int64) * S * D
    q = tl.load(q_base + offs_m[:, None] * D + offs_d[None, :], mask=offs_m[:, None] < S, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    # block skipping: blocks right of the diagonal are fully masked below
    for start_n in range(0, S, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + kv_off + cols[None, :] * D + offs_d[:, None], mask=cols[None, :] < S, other=0.0)
        qk = tl.dot(q, k) * sm_scale
        valid = cols[None, :] < S
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(valid, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp(qk - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + kv_off + cols[:, None] * D + offs_d[None, :], mask=cols[:, None] < S, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(o_ptr + (b * HQ + h).to(tl.int64) * S * D + offs_m[:, None] * D + offs_d[None, :], acc.to(tl.bfloat16),
             mask=offs_m[:, None] < S)
    tl.store(lse_ptr + off_hz * S + offs_m, m_i + tl.log(l_i), mask=offs_m < S)


def kernel(q, k, v, *, causal):
    B, HQ, S, D = q.shape
    HKV = k.shape[1]
    o = torch.empty_like(q)
    lse = torch.empty((B, HQ, S), device=q.device, dtype=torch.float32)
    grid = (triton.cdiv(S, 128), B * HQ)
    _causal_skip_exp2_fold[grid](q, k, v, o, lse, D ** -0.5, S, HQ, HKV, D=D, CAUSAL=causal, BLOCK_M=128,
                                 BLOCK_N=64 if D > 128 else 128, num_warps=8, num_stages=1)
    return o, lse
