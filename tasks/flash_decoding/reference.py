"""flash_decoding: exact semantics (float64), the PyTorch baseline, and the seeded input maker.

o[b, h] = softmax(q[b, h] . K[b, h // G]^T * D^-0.5) V[b, h // G], G = Hq / Hkv, over all L cached positions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# "normal" is the catalog's q, K, V ~ N(0,1): scores ~ N(0,1), so o is an average over ~L positions and
#   |o| ~ 1/sqrt(L) (~0.004 at L = 65536): on its own it barely separates a correct kernel from zeros.
# "sharp" scales q by 2.5: scores ~ N(0, 6.25), a handful of keys dominate each head and |o| ~ 0.3-2, and those
#   keys sit in random splits, so a wrong rescale factor or a dropped or doubled split is an O(1) error. It is also
#   where precision shows: re-rounding the D^-0.5-scaled q to bf16 before q.K fails the tolerance (score errors of
#   ~2^-9 |s|), while an honest kernel (fp32 scores, bf16 P for the PV product) stays at <= ~0.4 of it.
# "offset" draws q and K around a common mean m = sqrt(140 / sqrt(D)) per coordinate: every score is ~140 at any
#   head dim, so exp without subtracting the running max overflows fp32 (and fp16/bf16 probabilities), while the
#   per-key spread sqrt(m^2 + 1) (3.7 at D = 128, 4.3 at D = 64) keeps the softmax about as concentrated as "sharp".
#   (A fixed mean of 3 gave ~100 at D = 128 but ~72 on the D = 64 smoke workload: no fp32 overflow.)
DISTRIBUTIONS = ("normal", "sharp", "offset")

OFFSET_SCORE = 140.0  # the "offset" draw's typical score, past fp32 exp's overflow at 88.7

_REF_CHUNK = 1 << 25  # KV elements per float64 chunk (256 MB per K or V copy)


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    f32 = dict(generator=generator, device=device, dtype=torch.float32)
    q = torch.randn(shapes["q"], **f32)
    k = torch.randn(shapes["k_cache"], **f32)
    v = torch.randn(shapes["v_cache"], **f32)
    if dist == "sharp":
        q = q * 2.5
    elif dist == "offset":
        m = math.sqrt(OFFSET_SCORE / math.sqrt(shapes["q"][-1]))
        q = q + m
        k = k + m
    elif dist != "normal":
        raise ValueError(f"unknown distribution {dist!r}")
    return q.to(dtypes["q"]), k.to(dtypes["k_cache"]), v.to(dtypes["v_cache"])


def reference(q, k_cache, v_cache):
    """float64 attention of each (batch, KV head)'s G query heads over its cache, one batch entry (and, for very
    long caches, one KV head) at a time, without copying K/V G times."""
    B, Hq, D = q.shape
    Hkv, L = k_cache.shape[1], k_cache.shape[2]
    G = Hq // Hkv
    o = torch.empty_like(q)
    heads_per_chunk = max(1, _REF_CHUNK // max(L * D, 1))
    for b in range(B):
        for h0 in range(0, Hkv, heads_per_chunk):
            h1 = min(Hkv, h0 + heads_per_chunk)
            qq = q[b, h0 * G:h1 * G].double().view(h1 - h0, G, D)            # [h, G, D]
            kk = k_cache[b, h0:h1].double()                                  # [h, L, D]
            vv = v_cache[b, h0:h1].double()
            s = torch.einsum("hgd,hld->hgl", qq, kk) * D ** -0.5
            o[b, h0 * G:h1 * G] = torch.einsum("hgl,hld->hgd", torch.softmax(s, dim=-1), vv).reshape(-1, D).to(q.dtype)
    return o


def baseline(q, k_cache, v_cache):
    """F.scaled_dot_product_attention on the [B, Hq, 1, D] query with enable_gqa=True (K/V read in place)."""
    return F.scaled_dot_product_attention(q.unsqueeze(2), k_cache, v_cache, enable_gqa=True).squeeze(2)


# ------------------------------------------------------------------------------------- baseline candidates
# The SDPA backends get the decode query packed per KV head, q.view(B, Hkv, G, D), as G query rows against that
# head's K/V [B, Hkv, L, D]: the same attention (rows are independent without a mask), every backend reads K/V
# once per KV head and no backend needs to support GQA. flash-attn's flash_attn_with_kvcache takes q [B, 1, Hq, D]
# and the cache as [B, L, Hkv, D] (a strided view of this layout; only the last dim must be contiguous). FlashInfer
# sees the cache as B pages of L tokens in its HND layout ([pages, Hkv, page_size, D], this task's layout), planned
# per call (plan copies the page table to the host). Signatures read in the torch 2.13 sources and FlashInfer's and
# flash-attn's docs; no GPU path is run here.


def _sdpa_decode(backend, q, k_cache, v_cache):
    from torch.nn.attention import sdpa_kernel

    B, Hq, D = q.shape
    Hkv = k_cache.shape[1]
    with sdpa_kernel(backend):
        o = F.scaled_dot_product_attention(q.view(B, Hkv, Hq // Hkv, D), k_cache, v_cache)
    return o.reshape(B, Hq, D)


def baseline_sdpa_flash(q, k_cache, v_cache):
    """SDPA forced to FlashAttention-2 (sdpa_kernel), query heads packed per KV head."""
    from torch.nn.attention import SDPBackend

    return _sdpa_decode(SDPBackend.FLASH_ATTENTION, q, k_cache, v_cache)


def baseline_sdpa_efficient(q, k_cache, v_cache):
    """SDPA forced to the memory-efficient (CUTLASS) backend, query heads packed per KV head."""
    from torch.nn.attention import SDPBackend

    return _sdpa_decode(SDPBackend.EFFICIENT_ATTENTION, q, k_cache, v_cache)


def baseline_sdpa_cudnn(q, k_cache, v_cache):
    """SDPA forced to the cuDNN backend, query heads packed per KV head."""
    from torch.nn.attention import SDPBackend

    return _sdpa_decode(SDPBackend.CUDNN_ATTENTION, q, k_cache, v_cache)


_FLEX: dict[str, object] = {}


def baseline_flex_attention(q, k_cache, v_cache):
    """FlexAttention (torch.compile'd; its decoding kernel for short queries) with GQA read in place."""
    from torch.nn.attention.flex_attention import flex_attention

    fn = flex_attention
    if q.is_cuda:
        if "compiled" not in _FLEX:
            _FLEX["compiled"] = torch.compile(flex_attention, dynamic=False)
        fn = _FLEX["compiled"]
    return fn(q.unsqueeze(2), k_cache, v_cache, enable_gqa=True).squeeze(2)


def baseline_flash_attn(q, k_cache, v_cache):
    """flash-attn's flash_attn_with_kvcache over the whole cache (split-KV decode kernel), GQA in place."""
    from flash_attn import flash_attn_with_kvcache

    return flash_attn_with_kvcache(q.unsqueeze(1), k_cache.transpose(1, 2), v_cache.transpose(1, 2)).squeeze(1)


_DECODE: dict[str, object] = {}


def baseline_flashinfer(q, k_cache, v_cache):
    """FlashInfer's batch decode with the cache as one L-token page per sequence (HND layout, as stored)."""
    from flashinfer.decode import BatchDecodeWithPagedKVCacheWrapper

    B, Hq, D = q.shape
    Hkv, L = k_cache.shape[1], k_cache.shape[2]
    key = str(q.device)
    if key not in _DECODE:
        _DECODE[key] = BatchDecodeWithPagedKVCacheWrapper(
            torch.zeros(128 << 20, dtype=torch.uint8, device=q.device), "HND")
    wrapper = _DECODE[key]
    pages = torch.arange(B + 1, dtype=torch.int32, device=q.device)
    wrapper.plan(pages, pages[:B], torch.full((B,), L, dtype=torch.int32, device=q.device), Hq, Hkv, D, L,
                 q_data_type=q.dtype, kv_data_type=k_cache.dtype)
    return wrapper.run(q, (k_cache, v_cache))
