"""Expert paged decode (written for the corpus). The host plans work items of <= 1024 tokens per sequence
(item -> (sequence, first token)); a program takes one item for one KV head and all G query heads of it (a
[G_PAD, D] block for tl.dot). Per 64-token tile the page ids are loaded as a vector inside a 3-stage tl.range, K/V
rows are addressed as page.to(int64) * page_stride + slot * slot_stride and read evict_first; full tiles run
unmasked and the last partial tile is peeled and masked. Scores are scaled by D^-0.5 * log2(e) once, in fp32,
and exp2 is used throughout. Unsplit sequences write o directly; the merge kernel's grid covers only the split
sequences and weights their chunk partials with exp2."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
CHUNK = 1024
BLOCK_N = 64


@triton.jit
def _gather_update(q, m_i, l_i, acc, k_head, v_head, bt_row, n0, end, qk_scale, stride_kp, stride_ks,
                   D: tl.constexpr, P: tl.constexpr, BLOCK_N: tl.constexpr, TAIL: tl.constexpr):
    tok = n0 + tl.arange(0, BLOCK_N)
    dd = tl.arange(0, D)
    if TAIL:
        live = tok < end
        page = tl.load(bt_row + tok // P, mask=live, other=0)
    else:
        page = tl.load(bt_row + tok // P)
    rows = page.to(tl.int64) * stride_kp + (tok % P) * stride_ks
    if TAIL:
        k = tl.load(k_head + rows[:, None] + dd[None, :], mask=live[:, None], other=0.0,
                    eviction_policy="evict_first")
    else:
        k = tl.load(k_head + rows[:, None] + dd[None, :], eviction_policy="evict_first")
    s = tl.dot(q, tl.trans(k)) * qk_scale
    if TAIL:
        s = tl.where(live[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    if TAIL:
        v = tl.load(v_head + rows[:, None] + dd[None, :], mask=live[:, None], other=0.0,
                    eviction_policy="evict_first")
    else:
        v = tl.load(v_head + rows[:, None] + dd[None, :], eviction_policy="evict_first")
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return m_new, l_i, acc


@triton.jit
def _paged_items_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, nch_ptr, item_seq, item_tok, o_ptr, po_ptr, plse_ptr,
                        Hkv, qk_scale, stride_qb, stride_qh, stride_kp, stride_ks, stride_kh, stride_btb,
                        G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, P: tl.constexpr,
                        BLOCK_N: tl.constexpr, CHUNK: tl.constexpr, STAGES: tl.constexpr):
    item = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.load(item_seq + item)
    lo = tl.load(item_tok + item)
    ctx = tl.load(lens_ptr + b)
    hi = tl.minimum(ctx, lo + CHUNK)
    g = tl.arange(0, G_PAD)
    g_ok = g < G
    dd = tl.arange(0, D)
    b64 = b.to(tl.int64)
    heads = h * G + g
    q = tl.load(q_ptr + b64 * stride_qb + heads[:, None] * stride_qh + dd[None, :], mask=g_ok[:, None], other=0.0)
    k_head = k_ptr + h.to(tl.int64) * stride_kh
    v_head = v_ptr + h.to(tl.int64) * stride_kh
    bt_row = bt_ptr + b64 * stride_btb
    m_i = tl.full([G_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    n_full = (hi - lo) // BLOCK_N
    for t in tl.range(0, n_full, num_stages=STAGES):
        m_i, l_i, acc = _gather_update(q, m_i, l_i, acc, k_head, v_head, bt_row, lo + t * BLOCK_N, hi, qk_scale,
                                       stride_kp, stride_ks, D, P, BLOCK_N, False)
    tail = lo + n_full * BLOCK_N
    if tail < hi:
        m_i, l_i, acc = _gather_update(q, m_i, l_i, acc, k_head, v_head, bt_row, tail, hi, qk_scale,
                                       stride_kp, stride_ks, D, P, BLOCK_N, True)
    out = acc / l_i[:, None]
    if tl.load(nch_ptr + b) == 1:
        tl.store(o_ptr + b64 * stride_qb + heads[:, None] * stride_qh + dd[None, :], out.to(o_ptr.dtype.element_ty),
                 mask=g_ok[:, None])
    else:
        slot = (item.to(tl.int64) * Hkv + h) * G + g
        tl.store(po_ptr + slot[:, None] * D + dd[None, :], out, mask=g_ok[:, None])
        tl.store(plse_ptr + slot, m_i + tl.log2(l_i), mask=g_ok)


@triton.jit
def _merge_split_seqs(po_ptr, plse_ptr, split_seq, nch_ptr, first_ptr, o_ptr, Hkv, stride_qb, stride_qh,
                      G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr):
    b = tl.load(split_seq + tl.program_id(0)).to(tl.int64)
    h = tl.program_id(1)
    n = tl.load(nch_ptr + b)
    first = tl.load(first_ptr + b)
    g = tl.arange(0, G_PAD)
    g_ok = g < G
    dd = tl.arange(0, D)
    m_i = tl.full([G_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    for j in range(0, n):
        slot = ((first + j).to(tl.int64) * Hkv + h) * G + g
        lse = tl.load(plse_ptr + slot, mask=g_ok, other=0.0)
        part = tl.load(po_ptr + slot[:, None] * D + dd[None, :], mask=g_ok[:, None], other=0.0)
        m_new = tl.maximum(m_i, lse)
        alpha = tl.exp2(m_i - m_new)
        wj = tl.exp2(lse - m_new)
        acc = acc * alpha[:, None] + wj[:, None] * part
        l_i = l_i * alpha + wj
        m_i = m_new
    tl.store(o_ptr + b * stride_qb + (h * G + g)[:, None] * stride_qh + dd[None, :],
             (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=g_ok[:, None])


def kernel(q, k_cache, v_cache, block_tables, context_lens):
    B, Hq, D = q.shape
    _, P, Hkv, _ = k_cache.shape
    assert BLOCK_N % P == 0 and CHUNK % BLOCK_N == 0
    G = Hq // Hkv
    G_PAD = max(16, triton.next_power_of_2(G))
    dev = q.device
    n_chunks = (context_lens + CHUNK - 1) // CHUNK
    first = (torch.cumsum(n_chunks, 0) - n_chunks).to(torch.int32)
    items = int(n_chunks.sum().item())
    item_seq = torch.repeat_interleave(torch.arange(B, device=dev, dtype=torch.int32), n_chunks)
    item_tok = ((torch.arange(items, device=dev) - first.long()[item_seq.long()]) * CHUNK).to(torch.int32)
    o = torch.empty_like(q)
    po = torch.empty((items * Hkv * G, D), dtype=torch.float32, device=dev)
    plse = torch.empty((items * Hkv * G,), dtype=torch.float32, device=dev)
    _paged_items_kernel[(items, Hkv)](q, k_cache, v_cache, block_tables, context_lens, n_chunks, item_seq, item_tok,
                                      o, po, plse, Hkv, D ** -0.5 * LOG2E, q.stride(0), q.stride(1),
                                      k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), block_tables.stride(0),
                                      G=G, G_PAD=G_PAD, D=D, P=P, BLOCK_N=BLOCK_N, CHUNK=CHUNK, STAGES=3,
                                      num_warps=4)
    split_seq = torch.nonzero(n_chunks > 1).flatten().to(torch.int32)
    if split_seq.numel() > 0:
        _merge_split_seqs[(split_seq.numel(), Hkv)](po, plse, split_seq, n_chunks, first, o, Hkv, q.stride(0),
                                                    q.stride(1), G=G, G_PAD=G_PAD, D=D, num_warps=4)
    return o
