"""Expert Triton reference for ``paged_attention_decode``: o[b, h] = softmax(q[b, h] . K_b^T * D^-0.5) V_b over the
c_b tokens of sequence b, token t at k_cache/v_cache[block_tables[b, t // P], t % P], query head h reading KV head
h // G (G = Hq / Hkv).

Guidance implemented (tasks/paged_attention_decode/task.yaml): L1.token-balanced-split, L1.gqa-head-packing,
L2.page-table-prefetch, L2.merge-only-when-split, L2.online-softmax-over-pages, L3.int64-page-addressing,
L3.gather-pipelining, L3.exp2-fold.

Decode streams the used pages once (2*Hkv*sum_ctx*D*2 bytes); the design keeps every SM streaming whatever the
lengths and never copies K/V:

- Token-balanced work: each sequence's tokens are cut into chunks of CHUNK = 1024 tokens (16 pages of 64-token
  tiles); a work item is (sequence, chunk, KV head). The plan is computed on the device by every program, in
  registers: chunks per sequence cdiv(c_b, CHUNK) and their prefix sum (``tl.cumsum`` over the B context
  lengths), so there is no host synchronization; a persistent grid of 2 programs per SM walks the items
  ``for it in tl.range(pid, items, NUM_PROGS)`` and finds its sequence by counting prefix entries <= item.
  skewed_lengths becomes (60 + 4*64) chunks x 8 heads = 2528 items of <= 1024 tokens instead of 512 programs of
  which 32 stream 65k tokens each.
- GQA packing: an item covers all G query heads of its KV head: q is a [G_PAD = 16, D] block (an m16 MMA row
  block for G = 4 or 8), so each gathered K/V tile is read once per KV head and the G GEMVs are one small GEMM.
- Page-table gather: per 64-token tile (4 pages of 16) the table entries are loaded as a vector inside the loop
  (so the software pipeliner prefetches them with the tiles, 3 stages), and each K/V row address is
  page.to(int64) * stride_page + slot * stride_slot + kv_head * stride_head: 64-bit, since page ids up to 262143
  times a 32768-element page pass 2^31. K/V rows are 256 B (D = 128 bf16) read with evict_first.
- Online softmax in fp32 registers over the chunk's tiles; the full tiles run unmasked, and only the last tile
  of a sequence (c_b is never a multiple of 64 in skewed_lengths) is peeled and masked at c_b, so no token past
  the context (whose table entries are random valid pages) is ever read.
- Merge only when split: an item whose sequence has one chunk writes o normalized, in the output dtype; items of
  split sequences write a normalized fp32 partial and its base-2 lse, and a second kernel merges the partials of
  split sequences only (programs of unsplit sequences exit at once), with exp2 weights.
- exp2 throughout, with D^-0.5 * log2(e) folded into one multiply of the fp32 scores rather than into q: q
  pre-scaled and rounded back to bf16 changes every score by up to 2^-9 relative, and on the "sharp" and
  "offset" inputs (scores of ~5-100 log2 units) that moves 1-2% of the outputs past the catalog's [1e-3, 2e-2] tolerance
  (a float64 emulation of this kernel's numerics, D = 128, 509 and 4096 tokens, 20 draws each). For the same
  reason the P @ V product keeps P in fp32 and runs in TF32 (10-bit mantissa) instead of rounding P to bf16
  (which leaves ~1e-4 of the "sharp" outputs just past the tolerance); with both, the worst excess over rtol is
  1.3e-4, 7x inside the 1e-3 atol. Decode is memory-bound, so the TF32 MMA and the fp32 V operand cost no time.
  The task's tolerance is now [2e-3, 4e-2]; on the H200 (benchmarks/data/tolerance_audit_h200.json) the kernel's worst
  element uses <= 0.19 of it on every workload, PyTorch's SDPA up to 0.85 (skewed_lengths, "sharp").

``_chunk`` / ``_block_n`` / ``_num_progs`` override the launcher's choices (tests force many splits and small tiles
under the interpreter). Every c_b must be >= 1 (softmax over no token is undefined).

Roofline floors on H200 (bytes from the cost model at the measured copy bandwidth; flops are negligible):

==============  ========================================  =========  ==================================================
workload        B, Hq, Hkv, D, P, context lengths         HBM floor  H200: time, fraction of floor, x best peer
==============  ========================================  =========  ==================================================
uniform_b64_4k  64, 32, 8, 128, 16, 64 x 4096             258 us     336 us, 0.76, 3.29x compile
skewed_lengths  64, 32, 8, 128, 16, 60 x 509 + 4 x 65519  288 us     407 us, 0.70, 3.20x eager
long_b8_32k     8, 64, 8, 128, 16, 8 x 32768              258 us     342 us, 0.75, 3.14x compile_max_autotune
==============  ========================================  =========  ==================================================

Floors use the rates measured on the H200 (copy 4.17 TB/s, bf16 754 TFLOP/s, fp8 1284 TFLOP/s;
benchmarks/data/references_h200.json, 2026-11-30).

Registers (sm_90a ptxas, 4 warps): 213-242, no spills, 41 KB of shared memory: 2 programs per SM fit.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
_CHUNK = 1024        # tokens per work item: 16 tiles of 64 (2 x 1024 x 256 B = 512 KB of K/V per item)
_BLOCK_N = 64        # tokens per tile: 4 pages of 16; 64 x 128 x 2 B = 16 KB per K (or V) tile and stage
_G_DOT = 16          # the smallest tl.dot M: G = 2..16 query heads are padded to 16 rows
_PROGS_PER_SM = 2


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.lru_cache(maxsize=None)
def _sms_of_device(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _sm_count(t: torch.Tensor) -> int:
    if t.is_cuda and not _interpreting():
        return _sms_of_device(t.device.index if t.device.index is not None else torch.cuda.current_device())
    return 2  # the interpreter runs programs one after another; a small grid still exercises persistence


# ------------------------------------------------------------------------------------------------ kernels


@triton.jit
def _attend_tile(q, qk_scale, m_i, l_i, acc, k_base, v_base, bt_row, n0, hi,
                 stride_kp, stride_ks, stride_vp, stride_vs,
                 D: tl.constexpr, P: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    """One BLOCK_N-token tile of one sequence: gather its K/V rows through the page table, update (m, l, acc).

    Scores are in log2 units (qk_scale = D^-0.5 * log2(e)). MASKED: tokens at or past ``hi`` (the context end)
    are neither read nor counted."""
    offs_n = n0 + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    if MASKED:
        n_ok = offs_n < hi
        pages = tl.load(bt_row + offs_n // P, mask=n_ok, other=0)
        k_off = pages.to(tl.int64) * stride_kp + (offs_n % P) * stride_ks
        k = tl.load(k_base + k_off[:, None] + offs_d[None, :], mask=n_ok[:, None], other=0.0,
                    eviction_policy="evict_first")
    else:
        pages = tl.load(bt_row + offs_n // P)
        k_off = pages.to(tl.int64) * stride_kp + (offs_n % P) * stride_ks
        k = tl.load(k_base + k_off[:, None] + offs_d[None, :], eviction_policy="evict_first")
    # Scores in fp32 from the exact bf16/fp16 operands, then D^-0.5 * log2(e) in one multiply (log2 units).
    s = tl.dot(q, tl.trans(k)) * qk_scale                                   # [G_PAD, BLOCK_N]
    if MASKED:
        s = tl.where(n_ok[None, :], s, -float("inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    v_off = pages.to(tl.int64) * stride_vp + (offs_n % P) * stride_vs
    if MASKED:
        v = tl.load(v_base + v_off[:, None] + offs_d[None, :], mask=n_ok[:, None], other=0.0,
                    eviction_policy="evict_first")
    else:
        v = tl.load(v_base + v_off[:, None] + offs_d[None, :], eviction_policy="evict_first")
    # P stays fp32 and the MMA runs in TF32 (10-bit mantissa): P rounded to bf16 puts ~1e-4 of the outputs of
    # the "sharp" inputs past the 1e-3 tolerance (emulation in the module docstring).
    acc = tl.dot(p, v.to(tl.float32), acc * alpha[:, None], input_precision="tf32")
    return m_new, l_i, acc


@triton.jit
def _paged_decode_kernel(
    q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, o_ptr, po_ptr, plse_ptr,
    B, Hkv, CHUNK,
    stride_qb, stride_qh, stride_kp, stride_ks, stride_kh, stride_vp, stride_vs, stride_vh, stride_btb,
    stride_ob, stride_oh,
    qk_scale,
    G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, P: tl.constexpr, BLOCK_N: tl.constexpr,
    B_PAD: tl.constexpr, NUM_PROGS: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    """Persistent: a program takes work items pid, pid + NUM_PROGS, ... ; item = (sequence, chunk, KV head).

    Per item it reads the chunk's page-table entries and 2 * chunk * D * elt bytes of K/V (once, evict_first) and
    G * D * elt bytes of q; it writes G rows of o, or G fp32 partial rows plus G lse values.
    """
    # The plan, in registers: chunks per sequence and their inclusive prefix sum.
    offs_b = tl.arange(0, B_PAD)
    lens = tl.load(lens_ptr + offs_b, mask=offs_b < B, other=0)
    n_chunks = tl.cdiv(lens, CHUNK)
    chunk_end = tl.cumsum(n_chunks, axis=0)
    total = tl.sum(n_chunks, axis=0)
    g = tl.arange(0, G_PAD)
    g_ok = g < G
    offs_d = tl.arange(0, D)
    for it in tl.range(tl.program_id(0), total * Hkv, NUM_PROGS):
        w = it // Hkv                  # chunk index over all sequences
        h = it % Hkv                   # the KV heads of one chunk run side by side (same pages, other columns)
        b = tl.sum((chunk_end <= w).to(tl.int32), axis=0)
        sel = offs_b == b
        ctx = tl.sum(tl.where(sel, lens, 0), axis=0)
        splits = tl.sum(tl.where(sel, n_chunks, 0), axis=0)
        lo = (w - tl.sum(tl.where(sel, chunk_end - n_chunks, 0), axis=0)) * CHUNK
        hi = tl.minimum(ctx, lo + CHUNK)
        b64 = b.to(tl.int64)
        # q block of the group (G rows padded to G_PAD), the MMA operand as given: exact.
        q_rows = q_ptr + b64 * stride_qb + (h * G + g)[:, None] * stride_qh + offs_d[None, :]
        q = tl.load(q_rows, mask=g_ok[:, None], other=0.0)
        k_base = k_ptr + h.to(tl.int64) * stride_kh
        v_base = v_ptr + h.to(tl.int64) * stride_vh
        bt_row = bt_ptr + b64 * stride_btb
        m_i = tl.full((G_PAD,), -float("inf"), tl.float32)
        l_i = tl.zeros((G_PAD,), tl.float32)
        acc = tl.zeros((G_PAD, D), tl.float32)
        # Full tiles without masks (pipelined: page ids and K/V rows of the next tiles in flight) ...
        n_full = (hi - lo) // BLOCK_N
        for t in tl.range(0, n_full, num_stages=NUM_STAGES):
            m_i, l_i, acc = _attend_tile(q, qk_scale, m_i, l_i, acc, k_base, v_base, bt_row, lo + t * BLOCK_N, hi,
                                         stride_kp, stride_ks, stride_vp, stride_vs, D, P, BLOCK_N, False)
        # ... and the sequence's partial last tile, peeled and masked at the context end.
        if lo + n_full * BLOCK_N < hi:
            m_i, l_i, acc = _attend_tile(q, qk_scale, m_i, l_i, acc, k_base, v_base, bt_row, lo + n_full * BLOCK_N, hi,
                                         stride_kp, stride_ks, stride_vp, stride_vs, D, P, BLOCK_N, True)
        out = acc / l_i[:, None]
        if splits == 1:
            # Unsplit sequence: the final rows, normalized, in the output dtype (no merge for it).
            o_rows = o_ptr + b64 * stride_ob + (h * G + g)[:, None] * stride_oh + offs_d[None, :]
            tl.store(o_rows, out.to(o_ptr.dtype.element_ty), mask=g_ok[:, None])
        else:
            slot = (w.to(tl.int64) * Hkv + h) * G + g                        # partial rows [items, Hkv, G]
            tl.store(po_ptr + slot[:, None] * D + offs_d[None, :], out, mask=g_ok[:, None])
            tl.store(plse_ptr + slot, m_i + tl.log2(l_i), mask=g_ok)


@triton.jit
def _paged_merge_kernel(
    po_ptr, plse_ptr, lens_ptr, o_ptr,
    B, Hkv, CHUNK,
    stride_ob, stride_oh,
    G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, B_PAD: tl.constexpr,
):
    """Program (b, KV head): merge the chunk partials of a split sequence's G query heads with exp2 weights:
    lse = log2(sum_j 2^lse_j), o = sum_j 2^(lse_j - lse) o_j. Unsplit sequences (written directly) exit at once.

    Reads splits * G * (D + 1) * 4 bytes, writes G * D * elt bytes."""
    b = tl.program_id(0)
    h = tl.program_id(1)
    offs_b = tl.arange(0, B_PAD)
    lens = tl.load(lens_ptr + offs_b, mask=offs_b < B, other=0)
    n_chunks = tl.cdiv(lens, CHUNK)
    splits = tl.sum(tl.where(offs_b == b, n_chunks, 0), axis=0)
    if splits > 1:
        first = tl.sum(tl.where(offs_b < b, n_chunks, 0), axis=0)
        g = tl.arange(0, G_PAD)
        g_ok = g < G
        offs_d = tl.arange(0, D)
        m_i = tl.full((G_PAD,), -float("inf"), tl.float32)
        l_i = tl.zeros((G_PAD,), tl.float32)
        acc = tl.zeros((G_PAD, D), tl.float32)
        for j in range(splits):
            slot = ((first + j).to(tl.int64) * Hkv + h) * G + g
            lse = tl.load(plse_ptr + slot, mask=g_ok, other=0.0)
            part = tl.load(po_ptr + slot[:, None] * D + offs_d[None, :], mask=g_ok[:, None], other=0.0)
            m_new = tl.maximum(m_i, lse)
            alpha = tl.exp2(m_i - m_new)
            wj = tl.exp2(lse - m_new)
            acc = acc * alpha[:, None] + wj[:, None] * part
            l_i = l_i * alpha + wj
            m_i = m_new
        o_rows = o_ptr + b.to(tl.int64) * stride_ob + (h * G + g)[:, None] * stride_oh + offs_d[None, :]
        tl.store(o_rows, (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=g_ok[:, None])


# ------------------------------------------------------------------------------------------------ launcher


def paged_attention_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_tables: torch.Tensor, context_lens: torch.Tensor, *, _chunk: int | None = None,
                           _block_n: int | None = None, _num_progs: int | None = None) -> torch.Tensor:
    """Paged decode attention: q [B, Hq, D]; k_cache, v_cache [num_pages, P, Hkv, D] (bf16/fp16); block_tables
    [B, max_pages] and context_lens [B] int32 (every length >= 1) -> o [B, Hq, D]."""
    if q.dim() != 3 or k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        raise ValueError(f"expected q [B, Hq, D] and k/v [num_pages, P, Hkv, D], got {tuple(q.shape)}, "
                         f"{tuple(k_cache.shape)}, {tuple(v_cache.shape)}")
    B, Hq, D = q.shape
    _, P, Hkv, Dk = k_cache.shape
    if Dk != D or Hkv == 0 or Hq % Hkv:
        raise ValueError(f"q {tuple(q.shape)} does not match the cache {tuple(k_cache.shape)} (Hq % Hkv must be 0)")
    if block_tables.dim() != 2 or block_tables.shape[0] != B or context_lens.shape != (B,):
        raise ValueError(f"block_tables must be [B, max_pages] and context_lens [B] for B = {B}")
    if block_tables.dtype != torch.int32 or context_lens.dtype != torch.int32:
        raise TypeError("block_tables and context_lens must be int32")
    if q.dtype not in (torch.bfloat16, torch.float16) or k_cache.dtype != q.dtype or v_cache.dtype != q.dtype:
        raise TypeError(f"q, k_cache and v_cache must all be bf16 or all fp16, got {q.dtype}, {k_cache.dtype}, "
                        f"{v_cache.dtype}")
    if D & (D - 1) or P & (P - 1):
        raise ValueError(f"D and P must be powers of two, got D={D}, P={P}")
    if k_cache.stride(3) != 1 or v_cache.stride(3) != 1:
        k_cache, v_cache = k_cache.contiguous(), v_cache.contiguous()
    q = q if q.stride(2) == 1 else q.contiguous()
    block_tables = block_tables if block_tables.stride(1) == 1 else block_tables.contiguous()
    o = torch.empty_like(q)
    if o.numel() == 0:
        return o
    interp = _interpreting()
    G = Hq // Hkv
    G_PAD = max(_G_DOT, triton.next_power_of_2(G))
    block_n = _block_n or (32 if interp else max(_BLOCK_N, P))
    if block_n % P or block_n < 16 or D < 16:
        raise ValueError(f"BLOCK_N ({block_n}) must be a multiple of the page size ({P}), and BLOCK_N and D ({D}) "
                         "at least 16 (the smallest tl.dot dimension)")
    max_tokens = block_tables.shape[1] * P
    # Under the interpreter 128-token chunks, so the smoke workload's long sequences are split and merged.
    chunk = _chunk or min(128 if interp else _CHUNK, triton.cdiv(max_tokens, block_n) * block_n)
    if chunk % block_n:
        raise ValueError(f"the chunk ({chunk}) must be a multiple of BLOCK_N ({block_n})")
    num_progs = _num_progs or _PROGS_PER_SM * _sm_count(q)
    B_PAD = triton.next_power_of_2(B)
    # Partials for the largest possible plan (every sequence at max_pages): sized on the host without reading
    # context_lens; torch.empty costs no traffic.
    max_items = B * triton.cdiv(max_tokens, chunk)
    po = torch.empty((max_items * Hkv * G, D), dtype=torch.float32, device=q.device)
    plse = torch.empty((max_items * Hkv * G,), dtype=torch.float32, device=q.device)
    _paged_decode_kernel[(num_progs,)](
        q, k_cache, v_cache, block_tables, context_lens, o, po, plse,
        B, Hkv, chunk,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_tables.stride(0), o.stride(0), o.stride(1),
        D ** -0.5 * LOG2E,
        G=G, G_PAD=G_PAD, D=D, P=P, BLOCK_N=block_n, B_PAD=B_PAD, NUM_PROGS=num_progs,
        NUM_STAGES=3, num_warps=4)
    if max_tokens > chunk:  # some sequence may be split: merge (programs of unsplit sequences exit at once)
        _paged_merge_kernel[(B, Hkv)](po, plse, context_lens, o, B, Hkv, chunk, o.stride(0), o.stride(1),
                                      G=G, G_PAD=G_PAD, D=D, B_PAD=B_PAD, num_warps=4)
    return o


def kernel(q, k_cache, v_cache, block_tables, context_lens):
    """Submission entry point: paged decode attention."""
    return paged_attention_decode(q, k_cache, v_cache, block_tables, context_lens)
