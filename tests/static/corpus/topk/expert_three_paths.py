"""Expert top-k (written for the corpus), three mappings picked from V and B:
- router (V <= 1024): [ROWS, next_pow2(V)] tiles of whole rows, tl.topk on packed (key, V-1-index) int64 words;
- rows (long rows, B >= SMs): a persistent grid capped by the L2 budget; pass 1 histograms the top 11 key bits
  (evict_last), pass 2 re-reads the row from L2 and compacts (cumsum slots) the keys above the bucket into a
  selection buffer and the bucket's keys into a candidate buffer; two more digit histograms over the candidates
  give the exact k-th key; the keys above it and the first `need` keys equal to it (rank = cumsum of the
  equality mask, index order) are appended and the k words sorted with tl.sort;
- split (long rows, B < SMs): chunks of a row histogram in parallel and add their histograms to the row's with
  one atomic per bin; the per-row kernel then starts at pass 2.
Keys: fp32 bits b -> b ^ 0x7FFFFFFF for negatives (signed order), bf16 widened in registers first."""
import torch
import triton
import triton.language as tl

_L2_BUDGET = 48 << 20
MIN_WORD = tl.constexpr(-9223372036854775808)


@triton.jit
def _skey(x):
    b = x.to(tl.float32).to(tl.int32, bitcast=True)
    return tl.where(b < 0, b ^ 0x7FFFFFFF, b)


@triton.jit
def _word(sk, idx, V):
    return (sk.to(tl.int64) << 32) | (V - 1 - idx).to(tl.int64)


@triton.jit
def _digit(sk, LEVEL: tl.constexpr):
    if LEVEL == 0:
        d = (sk >> 21) + 1024          # top 11 bits, signed -> [0, 2048)
    elif LEVEL == 1:
        d = (sk >> 10) & 2047
    else:
        d = sk & 1023
    return d


@triton.jit
def _pick(h, need, NB: tl.constexpr):
    """Bucket holding the need-th largest key and the number of keys in higher buckets."""
    ge = tl.sum(h, axis=0) - tl.cumsum(h, axis=0) + h
    j = tl.arange(0, NB)
    t = tl.max(tl.where(ge >= need, j, 0), axis=0)
    return t, tl.sum(tl.where(j > t, h, 0), axis=0)


@triton.jit
def _src(xr, cand, n_c, cap, s, t, V, TILE: tl.constexpr):
    """A tile of the threshold bucket's keys: candidate words, or the row itself after a buffer overflow."""
    offs = s + tl.arange(0, TILE)
    if n_c > cap:
        ok = offs < V
        sk = _skey(tl.load(xr + offs, mask=ok, other=0.0))
        ok = ok & (_digit(sk, 0) == t)
        ix = offs
    else:
        ok = offs < n_c
        w = tl.load(cand + offs, mask=ok, other=0)
        sk = (w >> 32).to(tl.int32)
        ix = (V - 1 - (w & 0xFFFFFFFF)).to(tl.int32)
    return sk, ix, ok


@triton.jit
def _finish(xr, cand, n_c, cap, sel, n_sel, need, t, V, k, vals, idxs, TILE: tl.constexpr, K_P2: tl.constexpr):
    n_src = tl.where(n_c > cap, V, n_c)
    h = tl.zeros([2048], tl.int32)
    for s in range(0, n_src, TILE):
        sk, ix, ok = _src(xr, cand, n_c, cap, s, t, V, TILE)
        h += tl.histogram(_digit(sk, 1), 2048, mask=ok)
    t2, a2 = _pick(h, need, 2048)
    need -= a2
    pre = ((t - 1024) << 11) | t2                       # sk >> 10 of the k-th key
    h3 = tl.zeros([1024], tl.int32)
    for s in range(0, n_src, TILE):
        sk, ix, ok = _src(xr, cand, n_c, cap, s, t, V, TILE)
        h3 += tl.histogram(_digit(sk, 2), 1024, mask=ok & ((sk >> 10) == pre))
    t3, a3 = _pick(h3, need, 1024)
    need -= a3
    thr = (pre << 10) | t3
    seen = tl.zeros([], tl.int32)
    for s in range(0, n_src, TILE):
        sk, ix, ok = _src(xr, cand, n_c, cap, s, t, V, TILE)
        eq = ok & (sk == thr)
        rank = seen + tl.cumsum(eq.to(tl.int32), axis=0)
        take = (ok & (sk > thr)) | (eq & (rank <= need))
        tl.store(sel + n_sel + tl.cumsum(take.to(tl.int32), axis=0) - 1, _word(sk, ix, V), mask=take)
        n_sel += tl.sum(take.to(tl.int32), axis=0)
        seen += tl.sum(eq.to(tl.int32), axis=0)
    tl.debug_barrier()
    j = tl.arange(0, K_P2)
    w = tl.sort(tl.load(sel + j, mask=j < k, other=MIN_WORD), descending=True)
    ix = V - 1 - (w & 0xFFFFFFFF)
    tl.store(idxs + j, ix, mask=j < k)
    tl.store(vals + j, tl.load(xr + ix, mask=j < k), mask=j < k)


@triton.jit
def _router_kernel(x_ptr, val_ptr, idx_ptr, B, V, k, stride_x, ROWS: tl.constexpr, BV: tl.constexpr,
                   K_P2: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, BV)
    ok = (r < B)[:, None] & (c < V)[None, :]
    xr = x_ptr + r.to(tl.int64)[:, None] * stride_x
    x = tl.load(xr + c[None, :], mask=ok, other=0.0, eviction_policy="evict_first")
    top = tl.topk(tl.where(ok, _word(_skey(x), c[None, :], V), MIN_WORD), K_P2, dim=1)
    j = tl.arange(0, K_P2)
    ix = V - 1 - (top & 0xFFFFFFFF)
    m = (r < B)[:, None] & (j < k)[None, :]
    o = r.to(tl.int64)[:, None] * k + j[None, :]
    tl.store(idx_ptr + o, ix, mask=m)
    tl.store(val_ptr + o, tl.load(xr + ix, mask=m), mask=m)


@triton.jit
def _chunk_hist_kernel(x_ptr, hist_ptr, V, chunk, stride_x, TILE: tl.constexpr):
    row = tl.program_id(0)
    lo = tl.program_id(1) * chunk
    hi = tl.minimum(lo + chunk, V)
    xr = x_ptr + row.to(tl.int64) * stride_x
    h = tl.zeros([2048], tl.int32)
    for s in range(lo, hi, TILE):
        offs = s + tl.arange(0, TILE)
        ok = offs < hi
        sk = _skey(tl.load(xr + offs, mask=ok, other=0.0, eviction_policy="evict_last"))
        h += tl.histogram(_digit(sk, 0), 2048, mask=ok)
    tl.atomic_add(hist_ptr + row * 2048 + tl.arange(0, 2048), h, mask=h > 0, sem="relaxed")


@triton.jit
def _rows_kernel(x_ptr, val_ptr, idx_ptr, hist_ptr, cand_ptr, sel_ptr, B, V, k, cap, stride_x, progs,
                 TILE: tl.constexpr, K_P2: tl.constexpr, HIST_GIVEN: tl.constexpr):
    pid = tl.program_id(0)
    cand = cand_ptr + pid.to(tl.int64) * cap
    sel = sel_ptr + pid.to(tl.int64) * K_P2
    lanes = tl.arange(0, TILE)
    for row in tl.range(pid, B, progs):
        xr = x_ptr + row.to(tl.int64) * stride_x
        if HIST_GIVEN:
            h = tl.load(hist_ptr + row * 2048 + tl.arange(0, 2048))
        else:
            h = tl.zeros([2048], tl.int32)
            for s in range(0, V, TILE):
                ok = s + lanes < V
                sk = _skey(tl.load(xr + s + lanes, mask=ok, other=0.0, eviction_policy="evict_last"))
                h += tl.histogram(_digit(sk, 0), 2048, mask=ok)
        t, above = _pick(h, k, 2048)
        n_sel = tl.zeros([], tl.int32)
        n_c = tl.zeros([], tl.int32)
        for s in range(0, V, TILE):
            offs = s + lanes
            ok = offs < V
            sk = _skey(tl.load(xr + offs, mask=ok, other=0.0, eviction_policy="evict_first"))
            d = _digit(sk, 0)
            w = _word(sk, offs, V)
            hi = ok & (d > t)
            tl.store(sel + n_sel + tl.cumsum(hi.to(tl.int32), axis=0) - 1, w, mask=hi)
            n_sel += tl.sum(hi.to(tl.int32), axis=0)
            eq = ok & (d == t)
            slot = n_c + tl.cumsum(eq.to(tl.int32), axis=0) - 1
            tl.store(cand + slot, w, mask=eq & (slot < cap))
            n_c += tl.sum(eq.to(tl.int32), axis=0)
        tl.debug_barrier()
        out = row.to(tl.int64) * k
        _finish(xr, cand, n_c, cap, sel, n_sel, k - above, t, V, k, val_ptr + out, idx_ptr + out, TILE, K_P2)
        tl.debug_barrier()


def kernel(x, *, k):
    B, V = x.shape
    x = x if x.stride(1) == 1 else x.contiguous()
    vals = torch.empty((B, k), dtype=x.dtype, device=x.device)
    idx = torch.empty((B, k), dtype=torch.int64, device=x.device)
    k_p2 = triton.next_power_of_2(k)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    if V <= 1024:
        bv = triton.next_power_of_2(V)
        rows = max(1, 4096 // bv)
        _router_kernel[(triton.cdiv(B, rows),)](x, vals, idx, B, V, k, x.stride(0), ROWS=rows, BV=bv, K_P2=k_p2,
                                                num_warps=4)
        return vals, idx
    cap = max(4096, triton.cdiv(V, 8 * 4096) * 4096)
    if B >= sms:
        progs = max(1, min(B, sms, _L2_BUDGET // (V * x.element_size())))
        hist = torch.empty(1, dtype=torch.int32, device=x.device)
        given = False
    else:
        S = max(1, min(triton.cdiv(2 * sms, B), triton.cdiv(V, 16384)))
        chunk = triton.cdiv(triton.cdiv(V, S), 4096) * 4096
        hist = torch.zeros((B, 2048), dtype=torch.int32, device=x.device)
        _chunk_hist_kernel[(B, triton.cdiv(V, chunk))](x, hist, V, chunk, x.stride(0), TILE=4096, num_warps=8)
        progs, given = B, True
    cand = torch.empty((progs, cap), dtype=torch.int64, device=x.device)
    sel = torch.empty((progs, k_p2), dtype=torch.int64, device=x.device)
    _rows_kernel[(progs,)](x, vals, idx, hist, cand, sel, B, V, k, cap, x.stride(0), progs, TILE=4096, K_P2=k_p2,
                           HIST_GIVEN=given, num_warps=8)
    return vals, idx
