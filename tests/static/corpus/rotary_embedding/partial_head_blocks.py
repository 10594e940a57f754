"""Partial RoPE: one launch over (token, head block) programs, where the head blocks run over the q heads and
then the k heads, so q and k share a kernel. Each program loads its token's cos/sin again, so a token's cos/sin
are read once per head block rather than once for all heads. The tiles are [BH, HALF] with HALF a constexpr,
evict_first on q/k and evict_last on cos/sin; GPT-J rows are split/joined in registers."""
import torch
import triton
import triton.language as tl


@triton.jit
def rope_hblock_kernel(q, k, pos, cos, sin, qo, ko, HQ, HK, sqt, sqh, skt, skh, scos,
                       HALF: tl.constexpr, BH: tl.constexpr, GPTJ: tl.constexpr):
    t = tl.program_id(0)
    hb = tl.program_id(1)
    nq = tl.cdiv(HQ, BH)
    is_q = hb < nq
    h0 = tl.where(is_q, hb, hb - nq) * BH
    H = tl.where(is_q, HQ, HK)
    h = h0 + tl.arange(0, BH)
    hm = (h < H)[:, None]
    p = tl.load(pos + t)
    j = tl.arange(0, HALF)
    c = tl.load(cos + p * scos + j, eviction_policy="evict_last")[None, :]
    s = tl.load(sin + p * scos + j, eviction_policy="evict_last")[None, :]
    if is_q:
        src = q + t * sqt + h[:, None] * sqh
        dst = qo + t * sqt + h[:, None] * sqh
    else:
        src = k + t * skt + h[:, None] * skh
        dst = ko + t * skt + h[:, None] * skh
    if GPTJ:
        d = tl.arange(0, 2 * HALF)[None, :]
        x = tl.load(src + d, mask=hm, other=0.0, eviction_policy="evict_first").to(tl.float32)
        a, b = tl.split(tl.reshape(x, [BH, HALF, 2]))
        out = tl.reshape(tl.join(a * c - b * s, b * c + a * s), [BH, 2 * HALF])
        tl.store(dst + d, out.to(tl.bfloat16), mask=hm)
    else:
        d = j[None, :]
        a = tl.load(src + d, mask=hm, other=0.0, eviction_policy="evict_first").to(tl.float32)
        b = tl.load(src + HALF + d, mask=hm, other=0.0, eviction_policy="evict_first").to(tl.float32)
        tl.store(dst + d, (a * c - b * s).to(tl.bfloat16), mask=hm)
        tl.store(dst + HALF + d, (b * c + a * s).to(tl.bfloat16), mask=hm)


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    T, Hq, D = q.shape
    Hkv = k.shape[1]
    assert q.stride(2) == 1 and k.stride(2) == 1 and (D // 2) & (D // 2 - 1) == 0
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    BH = 8
    grid = (T, triton.cdiv(Hq, BH) + triton.cdiv(Hkv, BH))
    rope_hblock_kernel[grid](q, k, positions, cos_cache, sin_cache, qo, ko, Hq, Hkv, q.stride(0), q.stride(1),
                             k.stride(0), k.stride(1), cos_cache.stride(0), HALF=D // 2, BH=BH,
                             GPTJ=style == "gptj")
    return qo, ko
