"""Causal / non-causal flash attention forward, FA2-style single K/V loop.

One program per (q block, batch x head), q blocks launched heaviest first. Q is pre-scaled once by
D^-0.5 * log2(e), so the scores are already in the log2 domain and both p and the rescale use exp2. The causal
loop stops at the diagonal; the mask is applied only on the blocks that cross it (a uniform branch), every other
block runs mask-free. Q/K/V come through host TensorDescriptors; configs are autotuned (BLOCK_N 64 for D = 256).
"""
import math

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

LOG2E = 1.4426950408889634
ATTN_CONFIGS = [
    triton.Config({"BLOCK_M": 128, "BLOCK_N": bn}, num_warps=8, num_stages=st) for bn in (64, 128) for st in (2, 3)
]


def _prune(configs, named_args, **kwargs):
    if named_args["HEAD_DIM"] >= 256:
        return [c for c in configs if c.kwargs["BLOCK_N"] == 64]
    return configs


def _set_blocks(nargs):
    bm, bn = nargs["BLOCK_M"], nargs["BLOCK_N"]
    nargs["q_desc"].block_shape = [bm, nargs["HEAD_DIM"]]
    nargs["k_desc"].block_shape = [bn, nargs["HEAD_DIM"]]
    nargs["v_desc"].block_shape = [bn, nargs["HEAD_DIM"]]
    nargs["o_desc"].block_shape = [bm, nargs["HEAD_DIM"]]


for _c in ATTN_CONFIGS:
    _c.pre_hook = _set_blocks


@triton.autotune(configs=ATTN_CONFIGS, key=["S", "HEAD_DIM", "CAUSAL"], prune_configs_by={"early_config_prune": _prune})
@triton.jit
def _attn_fwd(q_desc, k_desc, v_desc, o_desc, lse_ptr, qk_scale, S, HQ, HKV,
              HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    off_hz = tl.program_id(1)
    b = off_hz // HQ
    h = off_hz % HQ
    kvh = h // (HQ // HKV)
    q_row = (b * HQ + h) * S + start_m * BLOCK_M
    kv_row = (b * HKV + kvh) * S
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)

    q = q_desc.load([q_row, 0])
    q = (q * qk_scale).to(q_desc.dtype)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    hi = (start_m + 1) * BLOCK_M if CAUSAL else S
    diag_lo = start_m * BLOCK_M
    for start_n in tl.range(0, hi, BLOCK_N):
        k = k_desc.load([kv_row + start_n, 0])
        qk = tl.dot(q, k.T)
        if CAUSAL:
            if start_n + BLOCK_N > diag_lo:
                qk = tl.where(offs_m[:, None] >= (start_n + offs_n)[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = v_desc.load([kv_row + start_n, 0])
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(tl.bfloat16), v, acc)
        m_i = m_new
    inv_l = 1.0 / l_i
    o_desc.store([q_row, 0], (acc * inv_l[:, None]).to(tl.bfloat16))
    tl.store(lse_ptr + off_hz * S + offs_m, (m_i + tl.log2(l_i)) / LOG2E, mask=offs_m < S)


class FlashAttention:
    def __init__(self, causal_default=True):
        self.causal_default = causal_default

    def __call__(self, q, k, v, causal=None):
        causal = self.causal_default if causal is None else causal
        B, HQ, S, D = q.shape
        HKV = k.shape[1]
        o = torch.empty_like(q)
        lse = torch.empty((B, HQ, S), device=q.device, dtype=torch.float32)
        dummy = [1, D]
        q_desc = TensorDescriptor(q, [B * HQ * S, D], [D, 1], dummy)
        k_desc = TensorDescriptor(k, [B * HKV * S, D], [D, 1], dummy)
        v_desc = TensorDescriptor(v, [B * HKV * S, D], [D, 1], dummy)
        o_desc = TensorDescriptor(o, [B * HQ * S, D], [D, 1], dummy)
        qk_scale = LOG2E / math.sqrt(D)
        grid = lambda meta: (triton.cdiv(S, meta["BLOCK_M"]), B * HQ)
        _attn_fwd[grid](q_desc, k_desc, v_desc, o_desc, lse, qk_scale, S, HQ, HKV, HEAD_DIM=D, CAUSAL=causal)
        return o, lse


kernel = FlashAttention()
