"""Causal depthwise conv1d + SiLU over channel-last x [B, L, D] (bf16), varlen-aware.

One program per [BLOCK_L, BLOCK_D] output tile. The grid is flat (one axis) and decomposed on the device into
(batch, L-tile, D-block), D-blocks fastest so neighbouring programs share the halo rows in L2. The W taps are W
shifted loads of the tile (the halo rows come from L1/L2); weights [BLOCK_D, W] and bias are loaded once with
evict_last. In varlen mode each token's sequence start is found by comparing the token index with the whole
cu_seqlens array, loaded in NSEQ_CHUNK pieces (a vectorized "count of starts <= t"), and every tap before the
start is masked. SiLU is exp2-based in fp32; y is written once with a streaming (evict-first) store.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)

TILE_CONFIGS = [
    triton.Config({"BLOCK_L": 32, "BLOCK_D": 128}, num_warps=4),
    triton.Config({"BLOCK_L": 64, "BLOCK_D": 128}, num_warps=4),
    triton.Config({"BLOCK_L": 32, "BLOCK_D": 256}, num_warps=8),
]


@triton.jit
def _seq_start(cu_ptr, nseq, offs_l, NSEQ_CHUNK: tl.constexpr):
    """max(cu[i] : cu[i] <= t, i < nseq) per token t, scanning cu_seqlens in NSEQ_CHUNK-wide pieces."""
    start = tl.zeros_like(offs_l)
    for s0 in range(0, nseq, NSEQ_CHUNK):
        idx = s0 + tl.arange(0, NSEQ_CHUNK)
        cu = tl.load(cu_ptr + idx, mask=idx < nseq, other=2147483647)
        le = cu[None, :] <= offs_l[:, None]
        start = tl.maximum(start, tl.max(tl.where(le, cu[None, :], 0), axis=1))
    return start


@triton.autotune(configs=TILE_CONFIGS, key=["L", "D", "W"])
@triton.jit
def _conv_silu_kernel(x_ptr, w_ptr, b_ptr, cu_ptr, y_ptr,
                      L, D, nseq,
                      s_xb, s_xl, s_yb, s_yl,
                      W: tl.constexpr, W_P2: tl.constexpr, VARLEN: tl.constexpr, NSEQ_CHUNK: tl.constexpr,
                      BLOCK_L: tl.constexpr, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    n_dblk = tl.cdiv(D, BLOCK_D)
    n_ltile = tl.cdiv(L, BLOCK_L)
    pid_d = pid % n_dblk
    rest = pid // n_dblk
    pid_l = rest % n_ltile
    pid_b = (rest // n_ltile).to(tl.int64)

    offs_l = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    offs_d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    offs_d = tl.max_contiguous(tl.multiple_of(offs_d, BLOCK_D), BLOCK_D)
    lm = offs_l < L
    dm = offs_d < D
    k = tl.arange(0, W_P2)
    wt = tl.load(w_ptr + offs_d[:, None] * W + k[None, :], mask=dm[:, None] & (k[None, :] < W), other=0.0,
                 eviction_policy="evict_last").to(tl.float32)
    bias = tl.load(b_ptr + offs_d, mask=dm, other=0.0, eviction_policy="evict_last").to(tl.float32)
    if VARLEN:
        first = _seq_start(cu_ptr, nseq, offs_l, NSEQ_CHUNK)
    else:
        first = tl.zeros_like(offs_l)

    xb = x_ptr + pid_b * s_xb
    acc = tl.zeros((BLOCK_L, BLOCK_D), dtype=tl.float32) + bias[None, :]
    for j in tl.static_range(W):
        src = offs_l + (j - (W - 1))
        ok = lm & (src >= first)
        xj = tl.load(xb + src[:, None].to(tl.int64) * s_xl + offs_d[None, :], mask=ok[:, None] & dm[None, :],
                     other=0.0).to(tl.float32)
        wj = tl.sum(tl.where(k[None, :] == j, wt, 0.0), axis=1)
        acc = acc + xj * wj[None, :]
    out = acc / (1.0 + tl.exp2(-acc * LOG2E))
    yb = y_ptr + pid_b * s_yb
    tl.store(yb + offs_l[:, None].to(tl.int64) * s_yl + offs_d[None, :], out.to(tl.bfloat16),
             mask=lm[:, None] & dm[None, :], eviction_policy="evict_first")


class CausalConv1dSilu:
    NSEQ_CHUNK = 64

    def __call__(self, x, w, bias, cu_seqlens):
        B, L, D = x.shape
        W = w.shape[1]
        nseq = cu_seqlens.numel() - 1
        varlen = nseq > 0
        y = torch.empty_like(x)

        def grid(meta):
            n_d = triton.cdiv(D, meta["BLOCK_D"])
            n_l = triton.cdiv(L, meta["BLOCK_L"])
            return (B * n_l * n_d,)

        _conv_silu_kernel[grid](x, w, bias, cu_seqlens, y, L, D, nseq,
                                x.stride(0), x.stride(1), y.stride(0), y.stride(1),
                                W=W, W_P2=triton.next_power_of_2(W), VARLEN=varlen, NSEQ_CHUNK=self.NSEQ_CHUNK)
        return y


kernel = CausalConv1dSilu()
