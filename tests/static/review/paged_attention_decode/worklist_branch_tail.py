"""Paged decode attention with a token-balanced work list (vLLM / SGLang style launcher class).

Work items are (sequence, chunk of CHUNK tokens); a grid of (item upper bound, KV head) programs finds its sequence
by counting the prefix sum of per-sequence chunk counts (tl.cumsum over the context lengths, on the device) that is
<= its item. A program handles the G query heads of its KV head as a [G_PAD, D] tile, q pre-scaled by
D^-0.5 * log2(e). Per 64-token tile the page ids come as one vector load, K/V rows are addressed with int64 page
offsets and read with evict_first in a 3-stage tl.range. Only the tile that reaches the context end takes the
masked branch. Unsplit sequences store o directly; split ones store fp32 partials that a merge kernel combines.
"""
import math

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
CHUNK = 1024
BLOCK_N = 64


@triton.jit
def _decode_chunk(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, o_ptr, part_o_ptr, part_lse_ptr, qk_scale,
                  B, HQ, max_pages, stride_kp, stride_ks, stride_kh, stride_vp, stride_vs, stride_vh,
                  G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, P: tl.constexpr,
                  CHUNK: tl.constexpr, BLOCK_N: tl.constexpr, B_POW2: tl.constexpr, MAX_CHUNKS: tl.constexpr):
    item = tl.program_id(0)
    kvh = tl.program_id(1)
    seqs = tl.arange(0, B_POW2)
    lens = tl.load(lens_ptr + seqs, mask=seqs < B, other=0)
    chunks = tl.cdiv(lens, CHUNK)
    ends = tl.cumsum(chunks, axis=0)
    if item < tl.sum(chunks, axis=0):
        b = tl.sum((ends <= item).to(tl.int32), axis=0)
        first = tl.sum(tl.where(seqs < b, chunks, 0), axis=0)
        c = item - first
        ctx = tl.load(lens_ptr + b)
        n_chunks = tl.cdiv(ctx, CHUNK)
        lo = c * CHUNK
        hi = tl.minimum(lo + CHUNK, ctx)
        heads = kvh * G + tl.arange(0, G_PAD)
        hmask = tl.arange(0, G_PAD) < G
        offs_d = tl.arange(0, D)
        q = tl.load(q_ptr + (b * HQ + heads)[:, None] * D + offs_d[None, :], mask=hmask[:, None], other=0.0)
        q = (q.to(tl.float32) * qk_scale).to(tl.bfloat16)
        m_i = tl.full([G_PAD], float("-inf"), tl.float32)
        l_i = tl.zeros([G_PAD], tl.float32)
        acc = tl.zeros([G_PAD, D], tl.float32)
        offs_n = tl.arange(0, BLOCK_N)
        for n0 in tl.range(lo, hi, BLOCK_N, num_stages=3):
            tok = n0 + offs_n
            pages = tl.load(bt_ptr + b * max_pages + tok // P)
            slot = tok % P
            k_off = pages.to(tl.int64)[:, None] * stride_kp + (slot * stride_ks + kvh * stride_kh)[:, None] + offs_d[None, :]
            v_off = pages.to(tl.int64)[:, None] * stride_vp + (slot * stride_vs + kvh * stride_vh)[:, None] + offs_d[None, :]
            if n0 + BLOCK_N <= hi:
                k = tl.load(k_ptr + k_off, eviction_policy="evict_first")
                v = tl.load(v_ptr + v_off, eviction_policy="evict_first")
                s = tl.dot(q, tl.trans(k))
            else:
                ok = tok < hi
                k = tl.load(k_ptr + k_off, mask=ok[:, None], other=0.0, eviction_policy="evict_first")
                v = tl.load(v_ptr + v_off, mask=ok[:, None], other=0.0, eviction_policy="evict_first")
                s = tl.where(ok[None, :], tl.dot(q, tl.trans(k)), float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp2(s - m_new[:, None])
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = tl.dot(p.to(tl.bfloat16), v, acc * alpha[:, None])
            m_i = m_new
        out = acc / l_i[:, None]
        if n_chunks == 1:
            tl.store(o_ptr + (b * HQ + heads)[:, None] * D + offs_d[None, :], out.to(tl.bfloat16), mask=hmask[:, None])
        else:
            slot_idx = (b * HQ + heads) * MAX_CHUNKS + c
            tl.store(part_o_ptr + slot_idx[:, None] * D + offs_d[None, :], out, mask=hmask[:, None])
            tl.store(part_lse_ptr + slot_idx, m_i + tl.log2(l_i), mask=hmask)


@triton.jit
def _merge(part_o_ptr, part_lse_ptr, lens_ptr, o_ptr, HQ, D: tl.constexpr, CHUNK: tl.constexpr,
           MAX_CHUNKS: tl.constexpr):
    bh = tl.program_id(0)
    b = bh // HQ
    n_chunks = tl.cdiv(tl.load(lens_ptr + b), CHUNK)
    if n_chunks > 1:
        offs_c = tl.arange(0, MAX_CHUNKS)
        offs_d = tl.arange(0, D)
        lse = tl.load(part_lse_ptr + bh * MAX_CHUNKS + offs_c, mask=offs_c < n_chunks, other=float("-inf"))
        m = tl.max(lse, 0)
        w = tl.exp2(lse - m)
        parts = tl.load(part_o_ptr + (bh * MAX_CHUNKS + offs_c)[:, None] * D + offs_d[None, :],
                        mask=(offs_c < n_chunks)[:, None], other=0.0)
        o = tl.sum(parts * w[:, None], 0) / tl.sum(w, 0)
        tl.store(o_ptr + bh * D + offs_d, o.to(tl.bfloat16))


class PagedDecode:
    def __init__(self):
        self._ws = {}

    def _workspace(self, B, HQ, D, max_chunks, device):
        key = (B, HQ, D, max_chunks, device)
        if key not in self._ws:
            self._ws[key] = (torch.empty((B * HQ * max_chunks, D), device=device, dtype=torch.float32),
                             torch.empty((B * HQ * max_chunks,), device=device, dtype=torch.float32))
        return self._ws[key]

    def __call__(self, q, k_cache, v_cache, block_tables, context_lens):
        B, HQ, D = q.shape
        _, P, HKV, _ = k_cache.shape
        G = HQ // HKV
        max_pages = block_tables.shape[1]
        max_chunks = triton.next_power_of_2(triton.cdiv(max_pages * P, CHUNK))
        o = torch.empty_like(q)
        part_o, part_lse = self._workspace(B, HQ, D, max_chunks, q.device)
        items_ub = B * triton.cdiv(max_pages * P, CHUNK)
        _decode_chunk[(items_ub, HKV)](
            q, k_cache, v_cache, block_tables, context_lens, o, part_o, part_lse, LOG2E / math.sqrt(D),
            B, HQ, max_pages, *k_cache.stride()[:3], *v_cache.stride()[:3],
            G=G, G_PAD=max(16, triton.next_power_of_2(G)), D=D, P=P, CHUNK=CHUNK, BLOCK_N=BLOCK_N,
            B_POW2=triton.next_power_of_2(B), MAX_CHUNKS=max_chunks, num_warps=4)
        _merge[(B * HQ,)](part_o, part_lse, context_lens, o, HQ, D=D, CHUNK=CHUNK, MAX_CHUNKS=max_chunks)
        return o


kernel = PagedDecode()
