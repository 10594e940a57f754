"""Program = [BLOCK_L tokens, BLOCK_D channels] of one batch row, grid (L-tiles, D-blocks, B). Weights
[BLOCK_D, W] and bias loaded once with evict_last; W shifted tile loads (the W-1 halo rows hit L1); each
output token's sequence start from a vectorised binary search of cu_seqlens masks the taps; fp32 FMA chain,
silu as x / (1 + exp2(-x log2 e)), one bf16 store with .cs; channel offsets carry contiguity hints."""
import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _seq_start(cu_ptr, nseq, pos, STEPS: tl.constexpr):
    lo = tl.zeros_like(pos)
    hi = lo + nseq - 1
    for _ in tl.static_range(STEPS):
        active = lo < hi
        mid = (lo + hi + 1) // 2
        c = tl.load(cu_ptr + mid, mask=active, other=0)
        lo = tl.where(active & (c <= pos), mid, lo)
        hi = tl.where(active & (c > pos), mid - 1, hi)
    return tl.load(cu_ptr + lo)


@triton.jit
def _conv_tile(x_ptr, w_ptr, bias_ptr, cu_ptr, y_ptr, L, D, nseq,
               W: tl.constexpr, WP: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_D: tl.constexpr,
               VARLEN: tl.constexpr, STEPS: tl.constexpr):
    pid_l = tl.program_id(0)
    pid_d = tl.program_id(1)
    pid_b = tl.program_id(2).to(tl.int64)
    offs_l = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    offs_d = tl.max_contiguous(tl.multiple_of(pid_d * BLOCK_D + tl.arange(0, BLOCK_D), BLOCK_D), BLOCK_D)
    ml = offs_l < L
    md = offs_d < D
    taps = tl.arange(0, WP)
    w = tl.load(w_ptr + offs_d[:, None] * W + taps[None, :], mask=md[:, None] & (taps[None, :] < W), other=0.0,
                eviction_policy="evict_last").to(tl.float32)
    bias = tl.load(bias_ptr + offs_d, mask=md, other=0.0, eviction_policy="evict_last").to(tl.float32)
    if VARLEN:
        start = _seq_start(cu_ptr, nseq, offs_l, STEPS)
    else:
        start = tl.zeros_like(offs_l)
    xb = x_ptr + pid_b * L * D
    acc = tl.zeros([BLOCK_L, BLOCK_D], dtype=tl.float32) + bias[None, :]
    for j in tl.static_range(W):
        src = offs_l - (W - 1) + j
        keep = ml & (src >= start)
        xj = tl.load(xb + src[:, None].to(tl.int64) * D + offs_d[None, :], mask=keep[:, None] & md[None, :],
                     other=0.0).to(tl.float32)
        wj = tl.sum(tl.where(taps[None, :] == j, w, 0.0), axis=1)
        acc += xj * wj[None, :]
    out = acc / (1.0 + tl.exp2(-acc * LOG2E))
    tl.store(y_ptr + pid_b * L * D + offs_l[:, None].to(tl.int64) * D + offs_d[None, :], out.to(tl.bfloat16),
             mask=ml[:, None] & md[None, :], cache_modifier=".cs")


def kernel(x, w, bias, cu_seqlens):
    x = x.contiguous()
    B, L, D = x.shape
    W = w.shape[1]
    y = torch.empty_like(x)
    varlen = cu_seqlens is not None and cu_seqlens.numel() > 1
    cu = cu_seqlens.to(device=x.device, dtype=torch.int32) if varlen else torch.zeros(1, dtype=torch.int32,
                                                                                        device=x.device)
    nseq = cu.numel() - 1 if varlen else 1
    block_l, block_d = 32, 128
    grid = (triton.cdiv(L, block_l), triton.cdiv(D, block_d), B)
    _conv_tile[grid](x, w.contiguous(), bias, cu, y, L, D, nseq, W=W, WP=triton.next_power_of_2(W),
                     BLOCK_L=block_l, BLOCK_D=block_d, VARLEN=varlen, STEPS=max(1, nseq.bit_length()),
                     num_warps=4)
    return y
