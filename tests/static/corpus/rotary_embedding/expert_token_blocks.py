"""Expert RoPE: one launch; each program owns BLOCK_T tokens and every q and k head, as [BLOCK_T, BH, HALF]
tiles walked in head chunks. cos/sin rows are gathered by position once per program (evict_last) and broadcast
over the heads; q/k are streamed with evict_first and .cs stores. NeoX halves are two contiguous HALF-long
segments (HALF constexpr); GPT-J rows are loaded whole, split into even/odd in registers and re-joined."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rope_heads(src, dst, tok, tok_ok, cos_t, sin_t, n_heads, s_t, s_h, d_t, d_h,
                HALF: tl.constexpr, BT: tl.constexpr, BH: tl.constexpr, BHALF: tl.constexpr, GPTJ: tl.constexpr):
    t3 = tok.to(tl.int64)[:, None, None]
    for h0 in tl.range(0, n_heads, BH):
        h3 = (h0 + tl.arange(0, BH))[None, :, None]
        ok = tok_ok[:, None, None] & (h3 < n_heads)
        src_row = src + t3 * s_t + h3 * s_h
        dst_row = dst + t3 * d_t + h3 * d_h
        if GPTJ:
            d = tl.arange(0, 2 * BHALF)[None, None, :]
            m = ok & (d < 2 * HALF)
            row = tl.load(src_row + d, mask=m, other=0.0, eviction_policy="evict_first").to(tl.float32)
            ev, od = tl.split(tl.reshape(row, [BT, BH, BHALF, 2]))
            res = tl.join(ev * cos_t - od * sin_t, od * cos_t + ev * sin_t)
            tl.store(dst_row + d, tl.reshape(res, [BT, BH, 2 * BHALF]).to(dst.dtype.element_ty), mask=m,
                     cache_modifier=".cs")
        else:
            d = tl.arange(0, BHALF)[None, None, :]
            m = ok & (d < HALF)
            lo = tl.load(src_row + d, mask=m, other=0.0, eviction_policy="evict_first").to(tl.float32)
            hi = tl.load(src_row + HALF + d, mask=m, other=0.0, eviction_policy="evict_first").to(tl.float32)
            tl.store(dst_row + d, (lo * cos_t - hi * sin_t).to(dst.dtype.element_ty), mask=m, cache_modifier=".cs")
            tl.store(dst_row + HALF + d, (hi * cos_t + lo * sin_t).to(dst.dtype.element_ty), mask=m,
                     cache_modifier=".cs")


@triton.jit
def _rope_kernel(q, k, pos_ptr, cos_ptr, sin_ptr, qo, ko, T, HQ, HK,
                 sqt, sqh, skt, skh, soqt, soqh, sokt, sokh, scos,
                 HALF: tl.constexpr, BT: tl.constexpr, BHQ: tl.constexpr, BHK: tl.constexpr,
                 BHALF: tl.constexpr, GPTJ: tl.constexpr):
    tok = tl.program_id(0) * BT + tl.arange(0, BT)
    tok_ok = tok < T
    p = tl.load(pos_ptr + tok, mask=tok_ok, other=0)
    j = tl.arange(0, BHALF)
    off = p[:, None] * scos + j[None, :]
    cm = tok_ok[:, None] & (j < HALF)[None, :]
    cos_t = tl.load(cos_ptr + off, mask=cm, other=0.0, eviction_policy="evict_last")[:, None, :]
    sin_t = tl.load(sin_ptr + off, mask=cm, other=0.0, eviction_policy="evict_last")[:, None, :]
    _rope_heads(q, qo, tok, tok_ok, cos_t, sin_t, HQ, sqt, sqh, soqt, soqh, HALF, BT, BHQ, BHALF, GPTJ)
    _rope_heads(k, ko, tok, tok_ok, cos_t, sin_t, HK, skt, skh, sokt, sokh, HALF, BT, BHK, BHALF, GPTJ)


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    T, Hq, D = q.shape
    Hkv = k.shape[1]
    assert q.stride(2) == 1 and k.stride(2) == 1
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    bhalf = triton.next_power_of_2(D // 2)
    per_token = 2 * (Hq + Hkv) * D * q.element_size()
    bt = max(1, min(16, triton.next_power_of_2(triton.cdiv(32768, per_token))))
    heads = triton.next_power_of_2(max(1, 2048 // (bt * bhalf)))
    _rope_kernel[(triton.cdiv(T, bt),)](
        q, k, positions, cos_cache, sin_cache, qo, ko, T, Hq, Hkv,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), qo.stride(0), qo.stride(1), ko.stride(0), ko.stride(1),
        cos_cache.stride(0), HALF=D // 2, BT=bt, BHQ=min(heads, triton.next_power_of_2(Hq)),
        BHK=min(heads, triton.next_power_of_2(Hkv)), BHALF=bhalf, GPTJ=style == "gptj", num_warps=4)
    return qo, ko
