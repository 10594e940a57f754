"""'Online-softmax flash attention with exp2, causal block skipping, GQA-grouped L2 reuse and heaviest-first
scheduling' -- say the names. The loop visits every key block and masks it; the accumulator is renormalised by
the running denominator with a division in every iteration (no alpha rescale of an unnormalised accumulator);
tl.exp is used (LOG2E is never applied); K/V are expanded to Hq heads with repeat_interleave before the launch;
`reversed_m` is the plain program id; P stays fp32 in the dot. One fixed 64 x 64, 4-warp, 2-stage config."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634  # exp2 fold


@triton.jit
def flash_online_exp2_causal_skip_gqa(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, S, sm_scale,
                                      D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                      CAUSAL: tl.constexpr):
    reversed_m = tl.program_id(0)  # heaviest-first
    gqa_group_head = tl.program_id(1)
    offs_m = reversed_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    base = gqa_group_head.to(tl.int64) * S * D
    q = tl.load(q_ptr + base + offs_m[:, None] * D + offs_d[None, :], mask=(offs_m < S)[:, None], other=0.0)
    running_max = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    running_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    causal_hi = S  # causal block skipping
    for start_n in range(0, causal_hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + base + cols[:, None] * D + offs_d[None, :], mask=(cols < S)[:, None], other=0.0)
        v = tl.load(v_ptr + base + cols[:, None] * D + offs_d[None, :], mask=(cols < S)[:, None], other=0.0)
        qk = tl.dot(q, tl.trans(k)) * sm_scale
        keep = cols[None, :] < S
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(keep, qk, -float("inf"))
        new_max = tl.maximum(running_max, tl.max(qk, axis=1))
        p = tl.exp(qk - new_max[:, None])
        new_sum = running_sum * tl.exp(running_max - new_max) + tl.sum(p, axis=1)
        exp2_factor = running_sum * tl.exp(running_max - new_max) / new_sum
        acc = acc * exp2_factor[:, None] + tl.dot(p / new_sum[:, None], v.to(tl.float32))
        running_max = new_max
        running_sum = new_sum
    tl.store(o_ptr + base + offs_m[:, None] * D + offs_d[None, :], acc.to(tl.bfloat16), mask=(offs_m < S)[:, None])
    tl.store(lse_ptr + gqa_group_head.to(tl.int64) * S + offs_m, running_max + tl.log(running_sum), mask=offs_m < S)


def kernel(q, k, v, *, causal):
    B, Hq, S, D = q.shape
    G = Hq // k.shape[1]
    k = k.repeat_interleave(G, dim=1).contiguous()  # GQA grouping
    v = v.repeat_interleave(G, dim=1).contiguous()
    q = q.contiguous()
    o = torch.empty_like(q)
    lse = torch.empty((B, Hq, S), dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(S, 64), B * Hq)
    flash_online_exp2_causal_skip_gqa[grid](q, k, v, o, lse, S, D ** -0.5, D=D, BLOCK_M=64, BLOCK_N=64,
                                            CAUSAL=causal, num_warps=4, num_stages=2)
    return o, lse
