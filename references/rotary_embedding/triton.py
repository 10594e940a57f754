"""Fused rotary position embedding for q and k in Triton (NeoX and GPT-J styles), one read and one write each.

Guidance implemented (tasks/rotary_embedding/task.yaml): L1.fused-qk-single-pass, L1.pairwise-register-rotation,
L2.token-block-all-heads, L2.interleaved-deinterleave, L2.position-gather, L3.vectorized-io, L3.fp32-fma,
L3.cache-hints.

One program owns BLOCK_T tokens and all their heads, q and k. It gathers the tokens' cos/sin rows from the fp32
caches once (by position: [BLOCK_T, D/2] fp32), then walks the q heads and the k heads in [BLOCK_T, BLOCK_H, D/2]
chunks, rotating each pair in fp32 registers and rounding to bf16 once, at the store.

* NeoX: the pair of element i is i + D/2, so the two halves of a head are loaded as two contiguous [.., D/2]
  tiles (128 B each at D = 128) and stored back the same way.
* GPT-J: the pair is (2i, 2i+1). The whole contiguous [.., D] head row is loaded (coalesced), split into even and
  odd elements in registers (reshape to [.., D/2, 2] and tl.split), rotated, re-interleaved with tl.join, and
  stored as a contiguous row; no stride-2 or gathered accesses.

Per program: reads BLOCK_T*(Hq + Hkv)*D bf16 of q/k, BLOCK_T*D fp32 of cos/sin and BLOCK_T positions; writes
BLOCK_T*(Hq + Hkv)*D bf16. BLOCK_T is chosen so that is >= 32 KB. q/k are streamed (evict_first loads, .cs
stores); cos/sin rows are kept (evict_last), since batched decode repeats positions.

Roofline floors on the H200 (cost model bytes at the measured copy bandwidth):

==================  ===========  ======  ==================================================
workload            bytes        floor   H200: time, fraction of floor, x best peer
==================  ===========  ======  ==================================================
llama_prefill_neox  688,128,000  165 us  190 us, 0.86, 1.02x compile_max_autotune
interleaved_gptj    612,499,456  147 us  166 us, 0.88, 2.69x compile_max_autotune
mla_rope_d64        545,390,592  131 us  143 us, 0.91, 2.80x compile_max_autotune
==================  ===========  ======  ==================================================

Floors use the rates measured on the H200 (copy 4.17 TB/s, bf16 754 TFLOP/s, fp8 1284 TFLOP/s;
benchmarks/data/references_h200.json, 2026-11-30).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

CHUNK_ELEMS = 2048  # pairs per head chunk: 16 per thread for each member at 4 warps


@triton.jit
def _rotate_heads(
    X, OUT, offs_t, t_ok, c, s,
    H, stride_xt, stride_xh, stride_ot, stride_oh,
    HALF: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr,
    INTERLEAVED: tl.constexpr,
):
    """Rotate all H heads of the program's tokens, BLOCK_H heads at a time (c, s: [BLOCK_T, 1, BLOCK_HALF])."""
    t3 = offs_t.to(tl.int64)[:, None, None]
    h_range = tl.arange(0, BLOCK_H)
    for h0 in tl.range(0, H, BLOCK_H):
        h3 = (h0 + h_range)[None, :, None]
        row_ok = t_ok[:, None, None] & (h3 < H)
        x_row = X + t3 * stride_xt + h3 * stride_xh
        o_row = OUT + t3 * stride_ot + h3 * stride_oh
        if INTERLEAVED:
            # GPT-J: one contiguous [.., D] load, de-interleaved in registers.
            d3 = tl.arange(0, 2 * BLOCK_HALF)[None, None, :]
            mask = row_ok & (d3 < 2 * HALF)
            x = tl.load(x_row + d3, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            x1, x2 = tl.split(tl.reshape(x, [BLOCK_T, BLOCK_H, BLOCK_HALF, 2]))
            o1 = x1 * c - x2 * s
            o2 = x2 * c + x1 * s
            out = tl.reshape(tl.join(o1, o2), [BLOCK_T, BLOCK_H, 2 * BLOCK_HALF])
            tl.store(o_row + d3, out.to(OUT.dtype.element_ty), mask=mask, cache_modifier=".cs")
        else:
            # NeoX: the two halves are two contiguous segments.
            d3 = tl.arange(0, BLOCK_HALF)[None, None, :]
            mask = row_ok & (d3 < HALF)
            x1 = tl.load(x_row + d3, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            x2 = tl.load(x_row + HALF + d3, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            o1 = x1 * c - x2 * s
            o2 = x2 * c + x1 * s
            tl.store(o_row + d3, o1.to(OUT.dtype.element_ty), mask=mask, cache_modifier=".cs")
            tl.store(o_row + HALF + d3, o2.to(OUT.dtype.element_ty), mask=mask, cache_modifier=".cs")


@triton.jit
def _rotary_kernel(
    Q, K, POS, COS, SIN, QO, KO,
    T, HQ, HKV,
    stride_qt, stride_qh, stride_kt, stride_kh,
    stride_qot, stride_qoh, stride_kot, stride_koh,
    stride_cos,
    HALF: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr,
    BLOCK_HALF: tl.constexpr, INTERLEAVED: tl.constexpr,
):
    """One program rotates every q and k head of tokens [pid*BLOCK_T, (pid+1)*BLOCK_T)."""
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = offs_t < T
    # cos/sin: one fp32 row per token, gathered by position, loaded once and broadcast over all heads.
    pos = tl.load(POS + offs_t, mask=t_ok, other=0)
    d = tl.arange(0, BLOCK_HALF)
    cs_off = pos[:, None] * stride_cos + d[None, :]
    cs_ok = t_ok[:, None] & (d < HALF)[None, :]
    c = tl.load(COS + cs_off, mask=cs_ok, other=0.0, eviction_policy="evict_last")[:, None, :]
    s = tl.load(SIN + cs_off, mask=cs_ok, other=0.0, eviction_policy="evict_last")[:, None, :]
    _rotate_heads(Q, QO, offs_t, t_ok, c, s, HQ, stride_qt, stride_qh, stride_qot, stride_qoh,
                  HALF, BLOCK_T, BLOCK_HQ, BLOCK_HALF, INTERLEAVED)
    _rotate_heads(K, KO, offs_t, t_ok, c, s, HKV, stride_kt, stride_kh, stride_kot, stride_koh,
                  HALF, BLOCK_T, BLOCK_HK, BLOCK_HALF, INTERLEAVED)


def _plan(Hq: int, Hkv: int, D: int, elt: int, *, block_t: int | None = None,
          chunk_elems: int = CHUNK_ELEMS) -> tuple[int, int, int, int]:
    """(BLOCK_T, BLOCK_HQ, BLOCK_HK, BLOCK_HALF): tokens per program and heads per chunk of q and of k."""
    block_half = triton.next_power_of_2(D // 2)
    # >= 32 KB of q/k traffic per program: 2 tokens at 40 heads x 128, 1 token at 72 x 128 or 129 x 64.
    bytes_per_token = 2 * (Hq + Hkv) * D * elt
    block_t = block_t or max(1, min(16, triton.next_power_of_2(triton.cdiv(32768, bytes_per_token))))
    per_chunk = triton.next_power_of_2(max(1, chunk_elems // (block_t * block_half)))
    return (block_t, min(triton.next_power_of_2(Hq), per_chunk), min(triton.next_power_of_2(Hkv), per_chunk),
            block_half)


def rotary_embedding(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_cache: torch.Tensor,
                     sin_cache: torch.Tensor, style: str = "neox", *, inplace: bool = False,
                     _block_t: int | None = None, _chunk_elems: int = CHUNK_ELEMS):
    """Apply RoPE to q [T, Hq, D] and k [T, Hkv, D]; returns (q_out, k_out), which are q and k when ``inplace``.

    ``_block_t`` and ``_chunk_elems`` override the tiling so tests can reach the head-chunk loop and masking.
    """
    if style not in ("neox", "gptj"):
        raise ValueError(f"style must be 'neox' or 'gptj', not {style!r}")
    T, Hq, D = q.shape
    Hkv = k.shape[1]
    half = D // 2
    assert D % 2 == 0 and k.shape == (T, Hkv, D) and positions.shape == (T,)
    assert cos_cache.shape == sin_cache.shape and cos_cache.shape[1] == half
    assert q.stride(2) == 1 and k.stride(2) == 1 and cos_cache.is_contiguous() and sin_cache.is_contiguous()
    q_out = q if inplace else torch.empty_like(q)
    k_out = k if inplace else torch.empty_like(k)
    if T == 0:
        return q_out, k_out
    block_t, block_hq, block_hk, block_half = _plan(Hq, Hkv, D, q.element_size(), block_t=_block_t,
                                                    chunk_elems=_chunk_elems)
    _rotary_kernel[(triton.cdiv(T, block_t),)](
        q, k, positions, cos_cache, sin_cache, q_out, k_out,
        T, Hq, Hkv,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        q_out.stride(0), q_out.stride(1), k_out.stride(0), k_out.stride(1),
        cos_cache.stride(0),
        HALF=half, BLOCK_T=block_t, BLOCK_HQ=block_hq, BLOCK_HK=block_hk, BLOCK_HALF=block_half,
        INTERLEAVED=style == "gptj", num_warps=4)
    return q_out, k_out


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    return rotary_embedding(q, k, positions, cos_cache, sin_cache, style)
