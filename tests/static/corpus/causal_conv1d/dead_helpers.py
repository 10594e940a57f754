"""A [16 tokens, 64 channels] tile kernel (grid over L-tiles, D-blocks, batch; W shifted loads; per-tap weight
loads; fp32 FMA chain; silu with tl.exp and a division; taps masked at t < 0 only). A binary search over
cu_seqlens, an exp2 SiLU helper, a rolling-window kernel and a streaming-store path are defined but never run
(the varlen launch sits under `if False:`)."""
import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _search_start(cu_ptr, nseq, pos, STEPS: tl.constexpr):
    lo = tl.zeros_like(pos)
    hi = lo + nseq - 1
    for _ in tl.static_range(STEPS):
        mid = (lo + hi + 1) // 2
        ok = tl.load(cu_ptr + mid) <= pos
        lo = tl.where(ok & (lo < hi), mid, lo)
        hi = tl.where(~ok & (lo < hi), mid - 1, hi)
    return tl.load(cu_ptr + lo)


@triton.jit
def _silu_exp2(v):
    return v / (1.0 + tl.exp2(-v * LOG2E))


@triton.jit
def _rolling(x_ptr, w_ptr, y_ptr, L, D, BLOCK_D: tl.constexpr):
    offs_d = tl.program_id(0) * BLOCK_D + tl.arange(0, BLOCK_D)
    c0 = tl.load(w_ptr + offs_d * 4 + 3, eviction_policy="evict_last").to(tl.float32)
    c1 = tl.load(w_ptr + offs_d * 4 + 2, eviction_policy="evict_last").to(tl.float32)
    xm1 = tl.zeros([BLOCK_D], dtype=tl.float32)
    for t in range(L):
        xt = tl.load(x_ptr + t * D + offs_d).to(tl.float32)
        tl.store(y_ptr + t * D + offs_d, _silu_exp2(c0 * xt + c1 * xm1).to(tl.bfloat16), cache_modifier=".cs")
        xm1 = xt


@triton.jit
def _tiles(x_ptr, w_ptr, bias_ptr, y_ptr, L, D, W: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_D: tl.constexpr):
    offs_l = tl.program_id(0) * BLOCK_L + tl.arange(0, BLOCK_L)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    base = tl.program_id(2).to(tl.int64) * L * D
    md = offs_d < D
    acc = tl.zeros([BLOCK_L, BLOCK_D], dtype=tl.float32)
    acc += tl.load(bias_ptr + offs_d, mask=md, other=0.0).to(tl.float32)[None, :]
    for j in tl.static_range(W):
        src = offs_l - (W - 1) + j
        xj = tl.load(x_ptr + base + src[:, None] * D + offs_d[None, :],
                     mask=((src >= 0) & (src < L))[:, None] & md[None, :], other=0.0).to(tl.float32)
        wj = tl.load(w_ptr + offs_d * W + j, mask=md, other=0.0).to(tl.float32)
        acc += xj * wj[None, :]
    out = acc / (1.0 + tl.exp(-acc))
    tl.store(y_ptr + base + offs_l[:, None] * D + offs_d[None, :], out.to(tl.bfloat16),
             mask=(offs_l < L)[:, None] & md[None, :])


def kernel(x, w, bias, cu_seqlens):
    x = x.contiguous()
    B, L, D = x.shape
    W = w.shape[1]
    y = torch.empty_like(x)
    if False:
        _rolling[(triton.cdiv(D, 256),)](x, w, y, L, D, BLOCK_D=256)
        return y
    grid = (triton.cdiv(L, 16), triton.cdiv(D, 64), B)
    _tiles[grid](x, w.contiguous(), bias, y, L, D, W=W, BLOCK_L=16, BLOCK_D=64, num_warps=4)
    return y
