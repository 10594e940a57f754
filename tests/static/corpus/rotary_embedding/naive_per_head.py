"""Naive RoPE: one program per (token, head), separate launches for q and for k, cos/sin reloaded by every
program and rounded to bf16 before the products; GPT-J handled with two stride-2 loads."""
import torch
import triton
import triton.language as tl


@triton.jit
def rope_head_kernel(x_ptr, out_ptr, pos_ptr, cos_ptr, sin_ptr, H, half, stride_t, stride_h, stride_cos,
                     interleaved, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    i = tl.arange(0, BLOCK)
    m = i < half
    p = tl.load(pos_ptr + t)
    c = tl.load(cos_ptr + p * stride_cos + i, mask=m, other=0.0).to(tl.bfloat16)
    s = tl.load(sin_ptr + p * stride_cos + i, mask=m, other=0.0).to(tl.bfloat16)
    base = x_ptr + t * stride_t + h * stride_h
    obase = out_ptr + t * stride_t + h * stride_h
    if interleaved:
        x1 = tl.load(base + 2 * i, mask=m, other=0.0)
        x2 = tl.load(base + 2 * i + 1, mask=m, other=0.0)
        tl.store(obase + 2 * i, x1 * c - x2 * s, mask=m)
        tl.store(obase + 2 * i + 1, x2 * c + x1 * s, mask=m)
    else:
        x1 = tl.load(base + i, mask=m, other=0.0)
        x2 = tl.load(base + half + i, mask=m, other=0.0)
        tl.store(obase + i, x1 * c - x2 * s, mask=m)
        tl.store(obase + half + i, x2 * c + x1 * s, mask=m)


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    T, Hq, D = q.shape
    Hkv = k.shape[1]
    q, k = q.contiguous(), k.contiguous()
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    block = triton.next_power_of_2(D // 2)
    for x, out, H in ((q, q_out, Hq), (k, k_out, Hkv)):
        rope_head_kernel[(T, H)](x, out, positions, cos_cache, sin_cache, H, D // 2, x.stride(0), x.stride(1),
                                 cos_cache.stride(0), style == "gptj", BLOCK=block)
    return q_out, k_out
