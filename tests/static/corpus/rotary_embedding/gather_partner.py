"""Partial RoPE: one launch, one program per token covering its q and k heads, cos/sin loaded once per token.
But the rotation is the rotate_half formula done with a per-element partner address: each element loads its
partner from global memory ((d + D/2) % D for NeoX, d ^ 1 for GPT-J) and a sign vector, so every element is read
twice and the pair is never held as two register tensors."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rot(x, y, t, stride_t, H, c, s, d, D: tl.constexpr, BH: tl.constexpr, GPTJ: tl.constexpr):
    h = tl.arange(0, BH)[:, None]
    m = h < H
    row = x + t * stride_t + h * D
    v = tl.load(row + d[None, :], mask=m, other=0.0).to(tl.float32)
    if GPTJ:
        partner = d ^ 1
        sign = tl.where(d % 2 == 0, -1.0, 1.0)
    else:
        partner = (d + D // 2) % D
        sign = tl.where(d < D // 2, -1.0, 1.0)
    w = tl.load(row + partner[None, :], mask=m, other=0.0).to(tl.float32)
    out = v * c + sign[None, :] * w * s
    tl.store(y + t * stride_t + h * D + d[None, :], out.to(tl.bfloat16), mask=m)


@triton.jit
def rope_gather_kernel(q, k, pos, cos, sin, qo, ko, HQ, HK, sqt, skt, D: tl.constexpr, BH: tl.constexpr,
                       GPTJ: tl.constexpr):
    t = tl.program_id(0)
    p = tl.load(pos + t)
    d = tl.arange(0, D)
    j = d // 2 if GPTJ else d % (D // 2)
    c = tl.load(cos + p * (D // 2) + j)[None, :]
    s = tl.load(sin + p * (D // 2) + j)[None, :]
    _rot(q, qo, t, sqt, HQ, c, s, d, D, BH, GPTJ)
    _rot(k, ko, t, skt, HK, c, s, d, D, BH, GPTJ)


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    T, Hq, D = q.shape
    Hkv = k.shape[1]
    q, k = q.contiguous(), k.contiguous()
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    rope_gather_kernel[(T,)](q, k, positions, cos_cache, sin_cache, qo, ko, Hq, Hkv, q.stride(0), k.stride(0),
                             D=D, BH=triton.next_power_of_2(max(Hq, Hkv)), GPTJ=style == "gptj")
    return qo, ko
