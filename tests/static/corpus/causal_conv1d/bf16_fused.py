"""One program per packed sequence (or per batch row) and 128-channel block walks its tokens in [32, 128]
tiles: W shifted tile loads masked at the sequence start read from cu_seqlens[pid], weights and bias loaded
once with evict_last, y stored with .cs. The FMA chain, the bias and x * sigmoid(x) all run in bf16."""
import torch
import triton
import triton.language as tl


@triton.jit
def _conv_seq(x_ptr, w_ptr, bias_ptr, cu_ptr, y_ptr, L, D, W: tl.constexpr, BLOCK_L: tl.constexpr,
              BLOCK_D: tl.constexpr, VARLEN: tl.constexpr):
    s = tl.program_id(0)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    md = offs_d < D
    if VARLEN:
        start = tl.load(cu_ptr + s)
        end = tl.load(cu_ptr + s + 1)
        base = 0
    else:
        start = 0
        end = L
        base = s.to(tl.int64) * L * D
    bias = tl.load(bias_ptr + offs_d, mask=md, other=0.0, eviction_policy="evict_last")
    for l0 in range(start, end, BLOCK_L):
        offs_l = l0 + tl.arange(0, BLOCK_L)
        ml = offs_l < end
        acc = tl.zeros([BLOCK_L, BLOCK_D], dtype=tl.bfloat16) + bias[None, :]
        for j in tl.static_range(W):
            src = offs_l - (W - 1) + j
            xj = tl.load(x_ptr + base + src[:, None] * D + offs_d[None, :],
                         mask=(ml & (src >= start))[:, None] & md[None, :], other=0.0)
            wj = tl.load(w_ptr + offs_d * W + j, mask=md, other=0.0, eviction_policy="evict_last")
            acc += xj * wj[None, :]
        out = acc * tl.sigmoid(acc)
        tl.store(y_ptr + base + offs_l[:, None] * D + offs_d[None, :], out, mask=ml[:, None] & md[None, :],
                 cache_modifier=".cs")


def kernel(x, w, bias, cu_seqlens):
    x = x.contiguous()
    B, L, D = x.shape
    W = w.shape[1]
    y = torch.empty_like(x)
    varlen = cu_seqlens is not None and cu_seqlens.numel() > 1
    cu = cu_seqlens.to(torch.int32) if varlen else torch.zeros(1, dtype=torch.int32, device=x.device)
    programs = cu.numel() - 1 if varlen else B
    _conv_seq[(programs, triton.cdiv(D, 128))](x, w.contiguous(), bias, cu, y, L, D, W=W, BLOCK_L=32,
                                               BLOCK_D=128, VARLEN=varlen, num_warps=4)
    return y
