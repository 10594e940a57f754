"""Flash attention forward, FA3-flavoured Triton: persistent programs, PackGQA, longest-tile-first work claiming.

- PackGQA: a work tile is (batch, KV head, q block of BLOCK_M // G query rows) for all G query heads of that KV
  head at once: the G heads' rows are stacked in the tile's M dimension, so each K/V block is loaded once for them.
- Scheduling: NUM_SMS programs claim tiles from an atomic counter; tile ids are handed out with the q block
  reversed (the costliest causal blocks first), so the last wave has the cheap blocks.
- Causal: a mask-free stage over blocks left of the diagonal band, then a masked stage over the band (the same
  inner helper with STAGE = 1 / 2). exp2 with sm_scale * log2(e); P as bf16 straight into tl.dot with the fp32 acc.
- K/V through device tensor descriptors (Q gathered once per tile, O stored once, by pointers); autotuned
  stages (2-3).
"""
import torch
import triton
import triton.language as tl

RCP_LN2 = 1.4426950408889634
CONFIGS = [triton.Config({"BLOCK_M": 128, "BLOCK_N": bn}, num_warps=8, num_stages=s) for bn in (64, 128) for s in (2, 3)]


@triton.jit
def _inner(acc, l_i, m_i, q, k_desc, v_desc, kv_row, q_pos, lo, hi, qk_scale,
           STAGE: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N):
        k = k_desc.load([kv_row + start_n, 0])
        qk = tl.dot(q, k.T) * qk_scale
        if STAGE == 2:
            qk = tl.where(q_pos[:, None] >= (start_n + offs_n)[None, :], qk, -1.0e38)
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_ij[:, None])
        alpha = tl.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = v_desc.load([kv_row + start_n, 0])
        acc = tl.dot(p.to(tl.bfloat16), v, acc * alpha[:, None])
        m_i = m_ij
    return acc, l_i, m_i


@triton.autotune(configs=CONFIGS, key=["S", "D", "G", "CAUSAL"])
@triton.jit
def _attn_persistent(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, counter_ptr, sm_scale, B, HKV, S,
                     D: tl.constexpr, G: tl.constexpr, CAUSAL: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    ROWS: tl.constexpr = BLOCK_M // G
    HQ = HKV * G
    k_desc = tl.make_tensor_descriptor(k_ptr, shape=[B * HKV * S, D], strides=[D, 1], block_shape=[BLOCK_N, D])
    v_desc = tl.make_tensor_descriptor(v_ptr, shape=[B * HKV * S, D], strides=[D, 1], block_shape=[BLOCK_N, D])
    qk_scale = sm_scale * RCP_LN2
    num_m = tl.cdiv(S, ROWS)
    total = num_m * B * HKV
    tile = tl.atomic_add(counter_ptr, 1)
    while tile < total:
        m_blk = num_m - 1 - tile // (B * HKV)
        bh = tile % (B * HKV)
        b = bh // HKV
        kvh = bh % HKV
        q0 = m_blk * ROWS
        kv_row = (b * HKV + kvh) * S
        r = tl.arange(0, BLOCK_M)
        q_pos = q0 + r % ROWS
        q_rows = (b * HQ + kvh * G + r // ROWS).to(tl.int64) * S + q_pos
        offs_d = tl.arange(0, D)
        q = tl.load(q_ptr + q_rows[:, None] * D + offs_d[None, :], mask=q_pos[:, None] < S, other=0.0)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, D], tl.float32)
        if CAUSAL:
            band = (q0 // BLOCK_N) * BLOCK_N
            acc, l_i, m_i = _inner(acc, l_i, m_i, q, k_desc, v_desc, kv_row, q_pos, 0, band, qk_scale, 1, BLOCK_N)
            acc, l_i, m_i = _inner(acc, l_i, m_i, q, k_desc, v_desc, kv_row, q_pos, band,
                                   tl.minimum(q0 + ROWS, S), qk_scale, 2, BLOCK_N)
        else:
            acc, l_i, m_i = _inner(acc, l_i, m_i, q, k_desc, v_desc, kv_row, q_pos, 0, S, qk_scale, 1, BLOCK_N)
        out = acc / l_i[:, None]
        lse = (m_i + tl.log2(l_i)) / RCP_LN2
        tl.store(o_ptr + q_rows[:, None] * D + offs_d[None, :], out.to(tl.bfloat16), mask=q_pos[:, None] < S)
        tl.store(lse_ptr + q_rows, lse, mask=q_pos < S)
        tile = tl.atomic_add(counter_ptr, 1)


def kernel(q, k, v, *, causal):
    B, HQ, S, D = q.shape
    HKV = k.shape[1]
    G = HQ // HKV
    o = torch.empty_like(q)
    lse = torch.empty((B, HQ, S), device=q.device, dtype=torch.float32)
    counter = torch.zeros(1, device=q.device, dtype=torch.int32)
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=q.device))
    _attn_persistent[(sms,)](q, k, v, o, lse, counter, D ** -0.5, B, HKV, S, D=D, G=G, CAUSAL=causal)
    return o, lse
