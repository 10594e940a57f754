"""Paged decode attention: host-planned work list, GQA heads on CUDA cores (FMA dot products), peeled tail.

The plan is built with torch ops on the device (no sync): per-sequence chunk counts, their cumsum, and for each
of an upper bound of work items its sequence and chunk (searchsorted). A program takes one (item, KV head), holds
the G query heads as a [G, D] fp32 tile pre-scaled by D^-0.5 * log2(e), and scores a tile of keys for all of them
with one broadcast multiply and a sum over D (no tensor cores: G <= 8 rows would waste an m16 MMA). Full tiles
are unmasked in a 3-stage tl.range, the partial last tile is peeled after the loop. Every item writes an fp32
partial and lse; a merge kernel combines them for every sequence.
"""
import math

import torch
import triton
import triton.language as tl

CHUNK = 2048
TILE = 32


@triton.jit
def _partial(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, item_seq_ptr, item_chunk_ptr, po_ptr, plse_ptr, qk_scale,
             HQ, max_pages, max_chunks, stride_kp, stride_ks, stride_kh,
             G: tl.constexpr, D: tl.constexpr, P: tl.constexpr, CHUNK: tl.constexpr, TILE: tl.constexpr):
    item = tl.program_id(0)
    kvh = tl.program_id(1)
    b = tl.load(item_seq_ptr + item)
    if b >= 0:
        c = tl.load(item_chunk_ptr + item)
        ctx = tl.load(lens_ptr + b)
        lo = c * CHUNK
        hi = tl.minimum(lo + CHUNK, ctx)
        full_hi = lo + ((hi - lo) // TILE) * TILE
        gs = tl.arange(0, G)
        offs_d = tl.arange(0, D)
        offs_t = tl.arange(0, TILE)
        q = tl.load(q_ptr + (b * HQ + kvh * G + gs)[:, None] * D + offs_d[None, :]).to(tl.float32) * qk_scale
        m_i = tl.full([G], float("-inf"), tl.float32)
        l_i = tl.zeros([G], tl.float32)
        acc = tl.zeros([G, D], tl.float32)
        for n0 in tl.range(lo, full_hi, TILE, num_stages=3):
            tok = n0 + offs_t
            pid_pages = tl.load(bt_ptr + b * max_pages + tok // P)
            row = pid_pages.to(tl.int64) * stride_kp + (tok % P) * stride_ks + kvh * stride_kh
            k = tl.load(k_ptr + row[:, None] + offs_d[None, :], eviction_policy="evict_first").to(tl.float32)
            v = tl.load(v_ptr + row[:, None] + offs_d[None, :], eviction_policy="evict_first").to(tl.float32)
            s = tl.sum(q[:, None, :] * k[None, :, :], axis=2)
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp2(s - m_new[:, None])
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
            m_i = m_new
        if full_hi < hi:
            tok = full_hi + offs_t
            ok = tok < hi
            pid_pages = tl.load(bt_ptr + b * max_pages + tok // P, mask=ok, other=0)
            row = pid_pages.to(tl.int64) * stride_kp + (tok % P) * stride_ks + kvh * stride_kh
            k = tl.load(k_ptr + row[:, None] + offs_d[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
            v = tl.load(v_ptr + row[:, None] + offs_d[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
            s = tl.where(ok[None, :], tl.sum(q[:, None, :] * k[None, :, :], axis=2), float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp2(s - m_new[:, None])
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
            m_i = m_new
        slot = (b * HQ + kvh * G + gs) * max_chunks + c
        tl.store(po_ptr + slot[:, None] * D + offs_d[None, :], acc / l_i[:, None])
        tl.store(plse_ptr + slot, m_i + tl.log2(l_i))


@triton.jit
def _combine(po_ptr, plse_ptr, lens_ptr, o_ptr, HQ, max_chunks, D: tl.constexpr, CHUNK: tl.constexpr,
             C_POW2: tl.constexpr):
    bh = tl.program_id(0)
    n = tl.cdiv(tl.load(lens_ptr + bh // HQ), CHUNK)
    cs = tl.arange(0, C_POW2)
    offs_d = tl.arange(0, D)
    lse = tl.load(plse_ptr + bh * max_chunks + cs, mask=cs < n, other=float("-inf"))
    w = tl.exp2(lse - tl.max(lse, 0))
    part = tl.load(po_ptr + (bh * max_chunks + cs)[:, None] * D + offs_d[None, :], mask=(cs < n)[:, None], other=0.0)
    tl.store(o_ptr + bh * D + offs_d, (tl.sum(part * w[:, None], 0) / tl.sum(w, 0)).to(tl.bfloat16))


def _plan(context_lens, max_items):
    chunks = (context_lens + CHUNK - 1) // CHUNK
    ends = torch.cumsum(chunks, 0)
    items = torch.arange(max_items, device=context_lens.device)
    seq = torch.searchsorted(ends, items, right=True)
    starts = ends - chunks
    valid = seq < context_lens.numel()
    seq_c = seq.clamp(max=context_lens.numel() - 1)
    chunk = items - starts[seq_c]
    return torch.where(valid, seq_c, -1).int(), chunk.int()


def kernel(q, k_cache, v_cache, block_tables, context_lens):
    B, HQ, D = q.shape
    _, P, HKV, _ = k_cache.shape
    G = HQ // HKV
    max_pages = block_tables.shape[1]
    max_chunks = triton.cdiv(max_pages * P, CHUNK)
    max_items = B * max_chunks
    item_seq, item_chunk = _plan(context_lens, max_items)
    po = torch.empty((B * HQ * max_chunks, D), device=q.device, dtype=torch.float32)
    plse = torch.empty((B * HQ * max_chunks,), device=q.device, dtype=torch.float32)
    o = torch.empty_like(q)
    _partial[(max_items, HKV)](q, k_cache, v_cache, block_tables, context_lens, item_seq, item_chunk, po, plse,
                               1.4426950408889634 / math.sqrt(D), HQ, max_pages, max_chunks, *k_cache.stride()[:3],
                               G=G, D=D, P=P, CHUNK=CHUNK, TILE=TILE, num_warps=4)
    _combine[(B * HQ,)](po, plse, context_lens, o, HQ, max_chunks, D=D, CHUNK=CHUNK,
                        C_POW2=triton.next_power_of_2(max_chunks))
    return o
