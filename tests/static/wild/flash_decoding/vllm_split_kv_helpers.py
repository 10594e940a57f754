"""Split-KV decode in the style of vLLM's decode_attention: ``kernel`` calls a public op that calls two private
launch helpers. Stage 1 (grid B x Hkv x S) packs the G query heads of a KV head into a [BLOCK_H, D] block for
tl.dot, runs an online softmax over its split with tl.exp and a D^-0.5 scale, and stores fp32 partial outputs
with their log-sum-exp in an extra column; stage 2 (grid B x Hq) merges the S partials. S is a fixed 8."""
import torch
import triton
import triton.language as tl

NUM_KV_SPLITS = 8


@triton.jit
def _fwd_grouped_kernel_stage1(Q, K_Buffer, V_Buffer, sm_scale, Att_Out, stride_qb, stride_qh, stride_kb, stride_kh,
                               stride_kl, stride_ob, stride_oh, stride_os, kv_group_num, q_head_num, seq_len,
                               BLOCK_DMODEL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr,
                               NUM_KV_SPLITS: tl.constexpr):
    cur_batch = tl.program_id(0)
    cur_kv_head = tl.program_id(1)
    split_kv_id = tl.program_id(2)
    cur_head = cur_kv_head * kv_group_num + tl.arange(0, BLOCK_H)
    mask_h = (cur_head < (cur_kv_head + 1) * kv_group_num) & (cur_head < q_head_num)
    offs_d = tl.arange(0, BLOCK_DMODEL)
    q = tl.load(Q + cur_batch * stride_qb + cur_head[:, None] * stride_qh + offs_d[None, :], mask=mask_h[:, None],
                other=0.0)
    kv_len_per_split = tl.cdiv(seq_len, NUM_KV_SPLITS)
    split_start = kv_len_per_split * split_kv_id
    split_end = tl.minimum(split_start + kv_len_per_split, seq_len)
    e_max = tl.zeros([BLOCK_H], dtype=tl.float32) - float("inf")
    e_sum = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_DMODEL], dtype=tl.float32)
    if split_end > split_start:
        for start_n in range(split_start, split_end, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            kv_off = cur_batch * stride_kb + cur_kv_head * stride_kh + offs_n[:, None] * stride_kl + offs_d[None, :]
            k = tl.load(K_Buffer + kv_off, mask=offs_n[:, None] < split_end, other=0.0)
            qk = tl.dot(q, k.to(q.dtype).T)
            qk *= sm_scale
            qk = tl.where(mask_h[:, None] & (offs_n[None, :] < split_end), qk, float("-inf"))
            v = tl.load(V_Buffer + kv_off, mask=offs_n[:, None] < split_end, other=0.0)
            n_e_max = tl.maximum(tl.max(qk, 1), e_max)
            re_scale = tl.exp(e_max - n_e_max)
            p = tl.exp(qk - n_e_max[:, None])
            acc *= re_scale[:, None]
            acc += tl.dot(p.to(v.dtype), v)
            e_sum = e_sum * re_scale + tl.sum(p, 1)
            e_max = n_e_max
        offs_out = cur_batch * stride_ob + cur_head[:, None] * stride_oh + split_kv_id * stride_os + offs_d[None, :]
        tl.store(Att_Out + offs_out, acc / e_sum[:, None], mask=mask_h[:, None])
        offs_lse = cur_batch * stride_ob + cur_head * stride_oh + split_kv_id * stride_os + BLOCK_DMODEL
        tl.store(Att_Out + offs_lse, e_max + tl.log(e_sum), mask=mask_h)


@triton.jit
def _fwd_kernel_stage2(Mid_O, O, stride_mid_ob, stride_mid_oh, stride_mid_os, stride_obs, stride_oh,
                       NUM_KV_SPLITS: tl.constexpr, BLOCK_DV: tl.constexpr):
    cur_batch = tl.program_id(0)
    cur_head = tl.program_id(1)
    offs_d = tl.arange(0, BLOCK_DV)
    e_sum = 0.0
    e_max = -float("inf")
    acc = tl.zeros([BLOCK_DV], dtype=tl.float32)
    base = cur_batch * stride_mid_ob + cur_head * stride_mid_oh
    for split_kv_id in range(0, NUM_KV_SPLITS):
        tv = tl.load(Mid_O + base + split_kv_id * stride_mid_os + offs_d)
        tlogic = tl.load(Mid_O + base + split_kv_id * stride_mid_os + BLOCK_DV)
        n_e_max = tl.maximum(tlogic, e_max)
        old_scale = tl.exp(e_max - n_e_max)
        acc *= old_scale
        exp_logic = tl.exp(tlogic - n_e_max)
        acc += exp_logic * tv
        e_sum = e_sum * old_scale + exp_logic
        e_max = n_e_max
    tl.store(O + cur_batch * stride_obs + cur_head * stride_oh + offs_d, (acc / e_sum).to(O.dtype.element_ty))


def _decode_att_m_fwd(q, k_cache, v_cache, att_out, sm_scale, num_kv_splits):
    B, Hq, D = q.shape
    Hkv, L = k_cache.shape[1], k_cache.shape[2]
    kv_group_num = Hq // Hkv
    BLOCK_H = max(16, triton.next_power_of_2(kv_group_num))
    grid = (B, Hkv, num_kv_splits)
    _fwd_grouped_kernel_stage1[grid](q, k_cache, v_cache, sm_scale, att_out, q.stride(0), q.stride(1),
                                     k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), att_out.stride(0),
                                     att_out.stride(1), att_out.stride(2), kv_group_num, Hq, L, BLOCK_DMODEL=D,
                                     BLOCK_N=32, BLOCK_H=BLOCK_H, NUM_KV_SPLITS=num_kv_splits, num_warps=4,
                                     num_stages=2)


def _decode_softmax_reducev_fwd(att_out, o, num_kv_splits):
    B, Hq, D = o.shape
    _fwd_kernel_stage2[(B, Hq)](att_out, o, att_out.stride(0), att_out.stride(1), att_out.stride(2), o.stride(0),
                                o.stride(1), NUM_KV_SPLITS=num_kv_splits, BLOCK_DV=D, num_warps=4)


def decode_attention_fwd(q, k_cache, v_cache, num_kv_splits=NUM_KV_SPLITS):
    B, Hq, D = q.shape
    o = torch.empty_like(q)
    att_out = torch.empty((B, Hq, num_kv_splits, D + 1), dtype=torch.float32, device=q.device)
    _decode_att_m_fwd(q, k_cache, v_cache, att_out, D ** -0.5, num_kv_splits)
    _decode_softmax_reducev_fwd(att_out, o, num_kv_splits)
    return o


def kernel(q, k_cache, v_cache):
    return decode_attention_fwd(q, k_cache, v_cache)
