"""Radix select in the style of sampling libraries: kernels looked up in a dict by path name, a persistent grid
capped by the L2 budget (rows in flight x row bytes) and the SM count, order-preserving int32 keys, an 11-bit
first digit counted with tl.histogram on a pass loaded evict_last, then one filter pass (evict_first) that writes
the above-bucket keys straight to the selection and compacts the bucket's keys into a candidate buffer at
cumsum slots; the remaining digits are counted on the candidates only, ties ranked by a cumsum in index order,
and the k packed words sorted at the end. Small rows go to a tl.topk router kernel over [ROWS, V] tiles."""
import torch
import triton
import triton.language as tl

L2_BUDGET_BYTES = 40 * 1024 * 1024
NB = 2048


@triton.jit
def _ukey(x):
    b = x.to(tl.float32).to(tl.int32, bitcast=True)
    s = tl.where(b < 0, b ^ 0x7FFFFFFF, b)
    return s ^ -2147483648  # unsigned order in the bits: digits cut with shifts and masks


@triton.jit
def _pick_bucket(hist, need, NBINS: tl.constexpr):
    bins = tl.arange(0, NBINS)
    above = tl.sum(hist, axis=0) - tl.cumsum(hist, axis=0)
    hit = (above < need) & (above + hist >= need)
    b = tl.max(tl.where(hit, bins, -1), axis=0)
    return b, tl.sum(tl.where(bins > b, hist, 0), axis=0)


@triton.jit
def _radix_rows(x_ptr, val_ptr, idx_ptr, sel_ptr, cand_ptr, cidx_ptr, B, V, k, sx, CAND,
                BLOCK: tl.constexpr, NBINS: tl.constexpr, K_P2: tl.constexpr):
    for row in tl.range(tl.program_id(0), B, tl.num_programs(0)):
        x_row = x_ptr + row.to(tl.int64) * sx
        hist = tl.zeros([NBINS], dtype=tl.int32)
        for off in tl.range(0, V, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            ok = cols < V
            u = _ukey(tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_last"))
            hist += tl.histogram((u >> 21) & 0x7FF, NBINS, mask=ok)
        b1, n_gt = _pick_bucket(hist, k, NBINS)
        written = 0
        n_cand = 0
        for off in tl.range(0, V, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            ok = cols < V
            u = _ukey(tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first"))
            d = (u >> 21) & 0x7FF
            gt = ok & (d > b1)
            eq = ok & (d == b1)
            gslot = written + tl.cumsum(gt.to(tl.int32), axis=0) - 1
            word = ((u ^ -2147483648).to(tl.int64) << 32) | (V - 1 - cols).to(tl.int64)
            tl.store(sel_ptr + row * K_P2 + gslot, word, mask=gt)
            cslot = n_cand + tl.cumsum(eq.to(tl.int32), axis=0) - 1
            tl.store(cand_ptr + row * CAND + cslot, u, mask=eq & (cslot < CAND))
            tl.store(cidx_ptr + row * CAND + cslot, cols, mask=eq & (cslot < CAND))
            written += tl.sum(gt.to(tl.int32), axis=0)
            n_cand += tl.sum(eq.to(tl.int32), axis=0)
        need = k - n_gt
        prefix = b1 << 21
        shift = 10
        for _ in tl.static_range(2):
            hist = tl.zeros([NBINS], dtype=tl.int32)
            for off in tl.range(0, n_cand, BLOCK):
                c = off + tl.arange(0, BLOCK)
                u = tl.load(cand_ptr + row * CAND + c, mask=c < n_cand, other=0)
                live = (c < n_cand) & ((u >> (shift + 11)) == (prefix >> (shift + 11)))
                hist += tl.histogram((u >> shift) & 0x7FF, NBINS, mask=live)
            b, n_more = _pick_bucket(hist, need, NBINS)
            need -= n_more
            prefix = prefix | (b << shift)
            shift -= 10
        thr = prefix
        eq_seen = 0
        for off in tl.range(0, n_cand, BLOCK):
            c = off + tl.arange(0, BLOCK)
            u = tl.load(cand_ptr + row * CAND + c, mask=c < n_cand, other=0)
            col = tl.load(cidx_ptr + row * CAND + c, mask=c < n_cand, other=0)
            ok = c < n_cand
            gt = ok & (u.to(tl.uint32) > thr.to(tl.uint32))
            eq = ok & (u == thr)
            rank = eq_seen + tl.cumsum(eq.to(tl.int32), axis=0)
            take = gt | (eq & (rank <= need))
            slot = written + tl.cumsum(take.to(tl.int32), axis=0) - 1
            word = ((u ^ -2147483648).to(tl.int64) << 32) | (V - 1 - col).to(tl.int64)
            tl.store(sel_ptr + row * K_P2 + slot, word, mask=take)
            written += tl.sum(take.to(tl.int32), axis=0)
            eq_seen += tl.sum(eq.to(tl.int32), axis=0)
        kk = tl.arange(0, K_P2)
        words = tl.load(sel_ptr + row * K_P2 + kk, mask=kk < k, other=-9223372036854775808)
        words = tl.sort(words, descending=True)
        key = (words >> 32).to(tl.int32)
        bits = tl.where(key < 0, key ^ 0x7FFFFFFF, key)
        tl.store(val_ptr + row * k + kk, bits.to(tl.float32, bitcast=True).to(val_ptr.dtype.element_ty), mask=kk < k)
        tl.store(idx_ptr + row * k + kk, V - 1 - (words & 0xFFFFFFFF), mask=kk < k)


@triton.jit
def _router(x_ptr, val_ptr, idx_ptr, B, V, sx, K: tl.constexpr, ROWS: tl.constexpr, BV: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BV)[None, :]
    ok = (rows < B) & (cols < V)
    u = _ukey(tl.load(x_ptr + rows * sx + cols, mask=ok, other=0.0))
    words = tl.where(ok, ((u ^ -2147483648).to(tl.int64) << 32) | (V - 1 - cols).to(tl.int64), -9223372036854775808)
    top = tl.topk(words, K, dim=1)
    kk = tl.arange(0, K)[None, :]
    key = (top >> 32).to(tl.int32)
    bits = tl.where(key < 0, key ^ 0x7FFFFFFF, key)
    tl.store(val_ptr + rows * K + kk, bits.to(tl.float32, bitcast=True).to(val_ptr.dtype.element_ty), mask=rows < B)
    tl.store(idx_ptr + rows * K + kk, V - 1 - (top & 0xFFFFFFFF), mask=rows < B)


_PATHS = {"router": _router, "radix": _radix_rows}


def _plan(B: int, V: int, elt: int, sms: int) -> tuple[str, int]:
    if V <= 1024:
        return "router", triton.cdiv(B, 8)
    return "radix", max(1, min(B, sms, L2_BUDGET_BYTES // (V * elt)))


def kernel(x: torch.Tensor, *, k: int):
    B, V = x.shape
    values = torch.empty((B, k), device=x.device, dtype=x.dtype)
    indices = torch.empty((B, k), device=x.device, dtype=torch.int64)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    path, programs = _plan(B, V, x.element_size(), sms)
    if path == "router":
        _PATHS[path][(programs,)](x, values, indices, B, V, x.stride(0), K=k, ROWS=8, BV=triton.next_power_of_2(V))
    else:
        k_p2 = triton.next_power_of_2(k)
        sel = torch.empty((B, k_p2), device=x.device, dtype=torch.int64)
        cand = torch.empty((B, V), device=x.device, dtype=torch.int32)
        cidx = torch.empty((B, V), device=x.device, dtype=torch.int32)
        _PATHS[path][(programs,)](x, values, indices, sel, cand, cidx, B, V, k, x.stride(0), V, BLOCK=4096,
                                  NBINS=NB, K_P2=k_p2, num_warps=8)
    return values, indices
