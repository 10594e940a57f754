"""A tiled convolution kernel ([64 tokens, 32 channels] per program, grid over L-tiles, D-blocks and batch,
W shifted tile loads, fp32 accumulation with bias) that stores the pre-activation in bf16, then a second
element-wise kernel for x * sigmoid(x). cu_seqlens is not used: taps are masked at t < 0 only."""
import torch
import triton
import triton.language as tl


@triton.jit
def _conv_tiles(x_ptr, w_ptr, bias_ptr, out_ptr, L, D, W: tl.constexpr, BLOCK_L: tl.constexpr,
                BLOCK_D: tl.constexpr):
    pid_l = tl.program_id(0)
    pid_d = tl.program_id(1)
    pid_b = tl.program_id(2).to(tl.int64)
    offs_l = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    offs_d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    md = offs_d < D
    bias = tl.load(bias_ptr + offs_d, mask=md, other=0.0).to(tl.float32)
    acc = tl.zeros([BLOCK_L, BLOCK_D], dtype=tl.float32) + bias[None, :]
    base = pid_b * L * D
    for j in tl.static_range(W):
        src = offs_l - (W - 1) + j
        xj = tl.load(x_ptr + base + src[:, None] * D + offs_d[None, :],
                     mask=((src >= 0) & (src < L))[:, None] & md[None, :], other=0.0).to(tl.float32)
        wj = tl.load(w_ptr + offs_d * W + j, mask=md, other=0.0).to(tl.float32)
        acc += xj * wj[None, :]
    tl.store(out_ptr + base + offs_l[:, None] * D + offs_d[None, :], acc.to(tl.bfloat16),
             mask=(offs_l < L)[:, None] & md[None, :])


@triton.jit
def _silu(in_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(in_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (v * tl.sigmoid(v)).to(tl.bfloat16), mask=offs < n)


def kernel(x, w, bias, cu_seqlens):
    x = x.contiguous()
    B, L, D = x.shape
    W = w.shape[1]
    pre = torch.empty_like(x)
    y = torch.empty_like(x)
    grid = (triton.cdiv(L, 64), triton.cdiv(D, 32), B)
    _conv_tiles[grid](x, w, bias, pre, L, D, W=W, BLOCK_L=64, BLOCK_D=32, num_warps=4)
    n = x.numel()
    _silu[(triton.cdiv(n, 1024),)](pre, y, n, BLOCK=1024, num_warps=4)
    return y
