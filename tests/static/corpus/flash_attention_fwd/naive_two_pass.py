"""Naive attention: 32 x 32 tiles; a first loop over every key block finds the row max, a second recomputes
QK^T and accumulates exp(qk - m) @ V in fp32 (P not converted), masking every block when causal."""
import torch
import triton
import triton.language as tl


@triton.jit
def attn_two_pass_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, S, scale, HQ, HKV,
                         D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // HQ
    h = bh % HQ
    kvh = h // (HQ // HKV)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q_base = q_ptr + (b * HQ + h) * S * D
    kv_base = (b * HKV + kvh) * S * D
    q = tl.load(q_base + offs_m[:, None] * D + offs_d[None, :], mask=offs_m[:, None] < S, other=0.0)
    m = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    for start_n in range(0, S, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + kv_base + cols[:, None] * D + offs_d[None, :], mask=cols[:, None] < S, other=0.0)
        qk = tl.dot(q, tl.trans(k)) * scale
        qk = tl.where(cols[None, :] < S, qk, -float("inf"))
        if CAUSAL:
            qk = tl.where(offs_m[:, None] >= cols[None, :], qk, -float("inf"))
        m = tl.maximum(m, tl.max(qk, axis=1))
    l = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    for start_n in range(0, S, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + kv_base + cols[:, None] * D + offs_d[None, :], mask=cols[:, None] < S, other=0.0)
        v = tl.load(v_ptr + kv_base + cols[:, None] * D + offs_d[None, :], mask=cols[:, None] < S, other=0.0)
        qk = tl.dot(q, tl.trans(k)) * scale
        qk = tl.where(cols[None, :] < S, qk, -float("inf"))
        if CAUSAL:
            qk = tl.where(offs_m[:, None] >= cols[None, :], qk, -float("inf"))
        p = tl.exp(qk - m[:, None])
        l += tl.sum(p, axis=1)
        acc += tl.dot(p, v.to(tl.float32))
    tl.store(o_ptr + (b * HQ + h) * S * D + offs_m[:, None] * D + offs_d[None, :], (acc / l[:, None]).to(tl.bfloat16),
             mask=offs_m[:, None] < S)
    tl.store(lse_ptr + (b * HQ + h) * S + offs_m, m + tl.log(l), mask=offs_m < S)


def kernel(q, k, v, *, causal):
    B, Hq, S, D = q.shape
    Hkv = k.shape[1]
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    lse = torch.empty((B, Hq, S), dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(S, 32), B * Hq)
    attn_two_pass_kernel[grid](q, k, v, o, lse, S, D ** -0.5, Hq, Hkv, D=D, BLOCK_M=32, BLOCK_N=32, CAUSAL=causal)
    return o, lse
