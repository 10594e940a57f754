"""Fused RoPE for q and k: one program per BLOCK_T tokens, a static loop over the heads.

The program gathers its tokens' cos/sin rows once ([BLOCK_T, D/2] fp32, evict_last) and then walks the q heads
and the k heads with [BLOCK_T, D/2] tiles (NeoX: the two halves; GPT-J: the full [BLOCK_T, D] row split into
even/odd in registers). q/k are streamed with evict_first and rewritten in place with .cs stores. The launcher
class sets the style as a constexpr and BLOCK_T from the bytes per token (>= 32 KB per program).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rotate_head(ptr, offs_t, stride_t, h, stride_h, offs_d, c, s, t_mask,
                 HALF: tl.constexpr, NEOX: tl.constexpr):
    base = ptr + offs_t[:, None].to(tl.int64) * stride_t + h * stride_h
    if NEOX:
        p1 = base + offs_d[None, :]
        x1 = tl.load(p1, mask=t_mask[:, None], eviction_policy="evict_first").to(tl.float32)
        x2 = tl.load(p1 + HALF, mask=t_mask[:, None], eviction_policy="evict_first").to(tl.float32)
        tl.store(p1, (x1 * c - x2 * s).to(tl.bfloat16), mask=t_mask[:, None], cache_modifier=".cs")
        tl.store(p1 + HALF, (x2 * c + x1 * s).to(tl.bfloat16), mask=t_mask[:, None], cache_modifier=".cs")
    else:
        full = base + tl.arange(0, 2 * HALF)[None, :]
        x = tl.load(full, mask=t_mask[:, None], eviction_policy="evict_first").to(tl.float32)
        xe, xo = tl.split(tl.reshape(x, [x.shape[0], HALF, 2]))
        oe = xe * c - xo * s
        oo = xo * c + xe * s
        out = tl.reshape(tl.join(oe, oo), [x.shape[0], 2 * HALF])
        tl.store(full, out.to(tl.bfloat16), mask=t_mask[:, None], cache_modifier=".cs")


@triton.jit
def _rope_tokens(q_ptr, k_ptr, pos_ptr, cos_ptr, sin_ptr, T,
                 stride_qt, stride_qh, stride_kt, stride_kh, stride_c,
                 HQ: tl.constexpr, HKV: tl.constexpr, HALF: tl.constexpr,
                 BLOCK_T: tl.constexpr, NEOX: tl.constexpr):
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    t_mask = offs_t < T
    offs_d = tl.arange(0, HALF)
    pos = tl.load(pos_ptr + offs_t, mask=t_mask, other=0)
    cs_off = pos[:, None] * stride_c + offs_d[None, :]
    c = tl.load(cos_ptr + cs_off, mask=t_mask[:, None], other=0.0, eviction_policy="evict_last")
    s = tl.load(sin_ptr + cs_off, mask=t_mask[:, None], other=0.0, eviction_policy="evict_last")
    for h in tl.static_range(HQ):
        _rotate_head(q_ptr, offs_t, stride_qt, h, stride_qh, offs_d, c, s, t_mask, HALF, NEOX)
    for h in tl.static_range(HKV):
        _rotate_head(k_ptr, offs_t, stride_kt, h, stride_kh, offs_d, c, s, t_mask, HALF, NEOX)


class RotaryEmbedding:
    MIN_BYTES = 32 * 1024

    def block_t(self, hq, hkv, d):
        per_token = (hq + hkv) * d * 2 * 2
        bt = 1
        while bt * per_token < self.MIN_BYTES and bt < 64:
            bt *= 2
        return bt

    def __call__(self, q, k, positions, cos_cache, sin_cache, style):
        T, HQ, D = q.shape
        HKV = k.shape[1]
        assert q.stride(-1) == 1 and k.stride(-1) == 1
        bt = self.block_t(HQ, HKV, D)
        _rope_tokens[(triton.cdiv(T, bt),)](
            q, k, positions, cos_cache, sin_cache, T,
            q.stride(0), q.stride(1), k.stride(0), k.stride(1), cos_cache.stride(0),
            HQ=HQ, HKV=HKV, HALF=D // 2, BLOCK_T=bt, NEOX=(style == "neox"), num_warps=4)
        return q, k


_rope = RotaryEmbedding()


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    return _rope(q, k, positions, cos_cache, sin_cache, style)
