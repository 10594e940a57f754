"""Expert flash-decoding (written for the corpus): program (b*Hkv + h, s) owns split s of KV head h and the G
query heads that share it ([G_PAD, D] block, G padded to 16 for tl.dot; MHA takes an fp32 FMA path). 64 x D
evict_first K/V tiles stream through a 3-stage tl.range with an exp2 online softmax; D^-0.5 * log2(e) scales the
fp32 score tile after the MMA (or the fp32 q on the FMA path). The host sizes S from the SM count and B*Hkv;
with one split the kernel writes o itself and no merge runs, otherwise a merge kernel per (b, query head)
reads its S x D fp32 partials contiguously and weights them with exp2."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
BLOCK_N = 64
MIN_SPLIT = 256


@triton.jit
def _scores(q, k, qk_scale, USE_MMA: tl.constexpr):
    if USE_MMA:
        return tl.dot(q, tl.trans(k)) * qk_scale                         # fp32 tile, scaled after the MMA
    else:
        return tl.sum(q[:, None, :] * k.to(tl.float32)[None, :, :], axis=2)  # q already scaled in fp32


@triton.jit
def _pv(p, v, acc, USE_MMA: tl.constexpr):
    if USE_MMA:
        return tl.dot(p.to(v.dtype), v, acc)
    else:
        return acc + tl.sum(p[:, :, None] * v.to(tl.float32)[None, :, :], axis=1)


@triton.jit
def _split_kv_kernel(q_ptr, k_ptr, v_ptr, o_ptr, part_o, part_lse,
                     Hkv, L, chunk, n_splits, qk_scale,
                     sq_b, sq_h, sk_b, sk_h, sk_l, so_b, so_h,
                     G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
                     STAGES: tl.constexpr, USE_MMA: tl.constexpr, FINAL: tl.constexpr):
    pair = tl.program_id(0)
    split = tl.program_id(1)
    b = (pair // Hkv).to(tl.int64)
    kvh = pair % Hkv
    rows = tl.arange(0, G_PAD)
    row_ok = rows < G
    cols = tl.arange(0, D)
    q = tl.load(q_ptr + b * sq_b + (kvh * G + rows)[:, None] * sq_h + cols[None, :], mask=row_ok[:, None],
                other=0.0)
    if not USE_MMA:
        q = q.to(tl.float32) * qk_scale
    start = split * chunk
    stop = tl.minimum(start + chunk, L)
    kv_off = b * sk_b + kvh.to(tl.int64) * sk_h
    m = tl.full([G_PAD], float("-inf"), tl.float32)
    l = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    for n0 in tl.range(start, stop, BLOCK_N, num_stages=STAGES):
        pos = n0 + tl.arange(0, BLOCK_N)
        ok = pos < stop
        tile = kv_off + pos.to(tl.int64)[:, None] * sk_l + cols[None, :]
        k = tl.load(k_ptr + tile, mask=ok[:, None], other=0.0, eviction_policy="evict_first")
        s = tl.where(ok[None, :], _scores(q, k, qk_scale, USE_MMA), float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(s - m_new[:, None])
        l = l * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + tile, mask=ok[:, None], other=0.0, eviction_policy="evict_first")
        acc = _pv(p, v, acc * alpha[:, None], USE_MMA)
        m = m_new
    out = acc / l[:, None]
    if FINAL:
        hq = kvh * G + rows
        tl.store(o_ptr + b * so_b + hq[:, None] * so_h + cols[None, :], out.to(o_ptr.dtype.element_ty),
                 mask=row_ok[:, None])
    else:
        idx = ((b * Hkv + kvh) * G + rows) * n_splits + split
        tl.store(part_o + idx[:, None] * D + cols[None, :], out, mask=row_ok[:, None])
        tl.store(part_lse + idx, m + tl.log2(l), mask=row_ok)


@triton.jit
def _merge_kernel(part_o, part_lse, o_ptr, Hq, n_splits, so_b, so_h, D: tl.constexpr, S_PAD: tl.constexpr):
    row = tl.program_id(0)
    b = row // Hq
    h = row % Hq
    s = tl.arange(0, S_PAD)
    s_ok = s < n_splits
    cols = tl.arange(0, D)
    base = row.to(tl.int64) * n_splits
    lse = tl.load(part_lse + base + s, mask=s_ok, other=float("-inf"))
    w = tl.exp2(lse - tl.max(lse, axis=0))
    part = tl.load(part_o + (base + s)[:, None] * D + cols[None, :], mask=s_ok[:, None], other=0.0)
    o = tl.sum(w[:, None] * part, axis=0) / tl.sum(w, axis=0)
    tl.store(o_ptr + b * so_b + h * so_h + cols, o.to(o_ptr.dtype.element_ty))


def _plan(pairs: int, L: int, sms: int) -> tuple[int, int]:
    """(splits, chunk): about two programs per SM, chunks of >= MIN_SPLIT positions, a multiple of BLOCK_N."""
    if pairs >= 2 * sms:
        return 1, L
    s = max(1, min(triton.cdiv(2 * sms, pairs), L // MIN_SPLIT))
    chunk = triton.cdiv(triton.cdiv(L, s), BLOCK_N) * BLOCK_N
    return triton.cdiv(L, chunk), chunk


def kernel(q, k_cache, v_cache):
    B, Hq, D = q.shape
    _, Hkv, L, _ = k_cache.shape
    q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
    G = Hq // Hkv
    use_mma = G > 1
    G_PAD = max(16, triton.next_power_of_2(G)) if use_mma else 1
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    n_splits, chunk = _plan(B * Hkv, L, sms)
    o = torch.empty_like(q)
    strides = (q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
               o.stride(0), o.stride(1))
    meta = dict(G=G, G_PAD=G_PAD, D=D, BLOCK_N=BLOCK_N, STAGES=3, USE_MMA=use_mma, num_warps=4)
    qk_scale = D ** -0.5 * LOG2E
    if n_splits == 1:
        _split_kv_kernel[(B * Hkv, 1)](q, k_cache, v_cache, o, o, o, Hkv, L, chunk, 1, qk_scale, *strides,
                                       FINAL=True, **meta)
        return o
    part_o = torch.empty((B, Hq, n_splits, D), dtype=torch.float32, device=q.device)
    part_lse = torch.empty((B, Hq, n_splits), dtype=torch.float32, device=q.device)
    _split_kv_kernel[(B * Hkv, n_splits)](q, k_cache, v_cache, o, part_o, part_lse, Hkv, L, chunk, n_splits,
                                          qk_scale, *strides, FINAL=False, **meta)
    _merge_kernel[(B * Hq,)](part_o, part_lse, o, Hq, n_splits, o.stride(0), o.stride(1), D=D,
                             S_PAD=triton.next_power_of_2(n_splits), num_warps=4)
    return o
