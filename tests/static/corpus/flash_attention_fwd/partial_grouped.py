"""Partial attention: online softmax in the log2 domain with bf16 P in the accumulating dot, the G query heads
of a KV head fastest in the program id, and BLOCK_N picked per head dim by autotuning (8 warps, 2-3 stages,
pointer loads). Causal: the key range stops at the diagonal, but the one loop applies the causal tl.where in
every iteration; query tiles run in ascending order."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.autotune(
    configs=[triton.Config({"BLOCK_M": 128, "BLOCK_N": bn}, num_warps=8, num_stages=s)
             for bn in (64, 128) for s in (2, 3)],
    key=["S", "HEAD_DIM", "CAUSAL"],
)
@triton.jit
def attn_grouped_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, S, qk_scale,
                        HQ: tl.constexpr, HKV: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    GROUP: tl.constexpr = HQ // HKV
    pid = tl.program_id(0)
    n_m = tl.cdiv(S, BLOCK_M)
    g = pid % GROUP
    start_m = (pid // GROUP) % n_m
    bkv = pid // (GROUP * n_m)
    b = bkv // HKV
    kvh = bkv % HKV
    h = kvh * GROUP + g
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    qo_base = (b * HQ + h).to(tl.int64) * S * HEAD_DIM
    kv_base = (b * HKV + kvh).to(tl.int64) * S * HEAD_DIM
    q = tl.load(q_ptr + qo_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=(offs_m < S)[:, None],
                other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    hi = tl.minimum((start_m + 1) * BLOCK_M, S) if CAUSAL else S
    for start_n in tl.range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + kv_base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=(cols < S)[:, None],
                    other=0.0)
        v = tl.load(v_ptr + kv_base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=(cols < S)[:, None],
                    other=0.0)
        qk = tl.dot(q, tl.trans(k))
        keep = (cols < S)[None, :]
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(keep, qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(tl.bfloat16), v, acc * alpha[:, None])
        m_i = m_new
    tl.store(o_ptr + qo_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], (acc / l_i[:, None]).to(tl.bfloat16),
             mask=(offs_m < S)[:, None])
    tl.store(lse_ptr + (b * HQ + h).to(tl.int64) * S + offs_m, (m_i + tl.log2(l_i)) * 0.6931471805599453,
             mask=offs_m < S)


def kernel(q, k, v, *, causal):
    B, Hq, S, D = q.shape
    Hkv = k.shape[1]
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    lse = torch.empty((B, Hq, S), dtype=torch.float32, device=q.device)
    grid = lambda meta: (B * Hq * triton.cdiv(S, meta["BLOCK_M"]),)
    attn_grouped_kernel[grid](q, k, v, o, lse, S, D ** -0.5 * LOG2E, HQ=Hq, HKV=Hkv, HEAD_DIM=D, CAUSAL=causal)
    return o, lse
