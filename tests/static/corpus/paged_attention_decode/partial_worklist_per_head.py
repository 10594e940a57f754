"""Partial: token-balanced work list built on the host (each sequence cut into 1024-token chunks; seq/chunk arrays
indexed by the program id), one program per (chunk, query head) with FMA dot products. Page ids are loaded as a
vector per 64-token tile; full tiles run unmasked and the last partial tile is peeled and masked. A sequence
with one chunk writes o directly; only split sequences write partials, merged by a kernel whose programs for
unsplit sequences exit at once. Natural exp, page offsets multiplied in int32 (the int64 cast comes after the
product), no pipelining hints."""
import torch
import triton
import triton.language as tl

CHUNK = 1024
BLOCK_N = 64


@triton.jit
def _tile(q, m_i, l_i, acc, k_ptr, v_ptr, bt_row, n0, hi, kvh, sm_scale, stride_kp, stride_ks, stride_kh,
          D: tl.constexpr, P: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    offs_n = n0 + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    if MASKED:
        ok = offs_n < hi
        pages = tl.load(bt_row + offs_n // P, mask=ok, other=0)
    else:
        pages = tl.load(bt_row + offs_n // P)
    off = (pages * stride_kp).to(tl.int64) + (offs_n % P) * stride_ks + kvh * stride_kh
    if MASKED:
        k = tl.load(k_ptr + off[:, None] + offs_d[None, :], mask=ok[:, None], other=0.0)
        v = tl.load(v_ptr + off[:, None] + offs_d[None, :], mask=ok[:, None], other=0.0)
    else:
        k = tl.load(k_ptr + off[:, None] + offs_d[None, :])
        v = tl.load(v_ptr + off[:, None] + offs_d[None, :])
    s = tl.sum(q[None, :] * k.to(tl.float32), axis=1) * sm_scale
    if MASKED:
        s = tl.where(ok, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=0))
    alpha = tl.exp(m_i - m_new)
    p = tl.exp(s - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=0)
    acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), axis=0)
    return m_new, l_i, acc


@triton.jit
def _chunk_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, nch_ptr, seq_ptr, cidx_ptr, o_ptr, po_ptr, plse_ptr,
                  G, Hq, sm_scale, stride_qb, stride_qh, stride_kp, stride_ks, stride_kh, stride_btb,
                  D: tl.constexpr, P: tl.constexpr, BLOCK_N: tl.constexpr, CHUNK: tl.constexpr):
    w = tl.program_id(0)
    hq = tl.program_id(1)
    b = tl.load(seq_ptr + w)
    c = tl.load(cidx_ptr + w)
    ctx = tl.load(lens_ptr + b)
    splits = tl.load(nch_ptr + b)
    lo = c * CHUNK
    hi = tl.minimum(ctx, lo + CHUNK)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + b * stride_qb + hq * stride_qh + offs_d).to(tl.float32)
    bt_row = bt_ptr + b * stride_btb
    m_i = tl.full([], float("-inf"), tl.float32)
    l_i = tl.zeros([], tl.float32)
    acc = tl.zeros([D], tl.float32)
    n_full = (hi - lo) // BLOCK_N
    for t in range(0, n_full):
        m_i, l_i, acc = _tile(q, m_i, l_i, acc, k_ptr, v_ptr, bt_row, lo + t * BLOCK_N, hi, hq // G, sm_scale,
                              stride_kp, stride_ks, stride_kh, D, P, BLOCK_N, False)
    if lo + n_full * BLOCK_N < hi:
        m_i, l_i, acc = _tile(q, m_i, l_i, acc, k_ptr, v_ptr, bt_row, lo + n_full * BLOCK_N, hi, hq // G, sm_scale,
                              stride_kp, stride_ks, stride_kh, D, P, BLOCK_N, True)
    if splits == 1:
        tl.store(o_ptr + b * stride_qb + hq * stride_qh + offs_d, (acc / l_i).to(o_ptr.dtype.element_ty))
    else:
        tl.store(po_ptr + (w * Hq + hq) * D + offs_d, acc / l_i)
        tl.store(plse_ptr + w * Hq + hq, m_i + tl.log(l_i))


@triton.jit
def _merge_kernel(po_ptr, plse_ptr, nch_ptr, first_ptr, o_ptr, Hq, stride_qb, stride_qh, D: tl.constexpr):
    b = tl.program_id(0)
    hq = tl.program_id(1)
    splits = tl.load(nch_ptr + b)
    if splits > 1:
        first = tl.load(first_ptr + b)
        offs_d = tl.arange(0, D)
        m = tl.full([], float("-inf"), tl.float32)
        den = tl.zeros([], tl.float32)
        num = tl.zeros([D], tl.float32)
        for j in range(0, splits):
            lse = tl.load(plse_ptr + (first + j) * Hq + hq)
            part = tl.load(po_ptr + ((first + j) * Hq + hq) * D + offs_d)
            m_new = tl.maximum(m, lse)
            scale = tl.exp(m - m_new)
            wj = tl.exp(lse - m_new)
            num = num * scale + wj * part
            den = den * scale + wj
            m = m_new
        tl.store(o_ptr + b * stride_qb + hq * stride_qh + offs_d, (num / den).to(o_ptr.dtype.element_ty))


def kernel(q, k_cache, v_cache, block_tables, context_lens):
    B, Hq, D = q.shape
    _, P, Hkv, _ = k_cache.shape
    dev = q.device
    n_chunks = (context_lens + CHUNK - 1) // CHUNK
    first = torch.cumsum(n_chunks, 0) - n_chunks
    total = int(n_chunks.sum().item())
    seq_idx = torch.repeat_interleave(torch.arange(B, device=dev, dtype=torch.int32), n_chunks)
    chunk_idx = torch.arange(total, device=dev, dtype=torch.int32) - first[seq_idx.long()]
    o = torch.empty_like(q)
    po = torch.empty((total * Hq, D), dtype=torch.float32, device=dev)
    plse = torch.empty((total * Hq,), dtype=torch.float32, device=dev)
    _chunk_kernel[(total, Hq)](q, k_cache, v_cache, block_tables, context_lens, n_chunks, seq_idx, chunk_idx, o,
                               po, plse, Hq // Hkv, Hq, D ** -0.5, q.stride(0), q.stride(1), k_cache.stride(0),
                               k_cache.stride(1), k_cache.stride(2), block_tables.stride(0),
                               D=D, P=P, BLOCK_N=BLOCK_N, CHUNK=CHUNK, num_warps=4)
    _merge_kernel[(B, Hq)](po, plse, n_chunks, first, o, Hq, q.stride(0), q.stride(1), D=D, num_warps=4)
    return o
