"""Radix select under unusual names: 'mark' is the order-preserving key (raw ^ ((raw >> 31) | INT_MIN)), 'tally'
the per-digit tl.histogram, and every prefix sum is a tl.associative_scan with a '_plus' combine (suffix counts to
pick the digit, slots for the compaction, tie ranks in index order). A persistent grid of min(SMs, L2 budget /
row bytes) 'clerks' takes rows; the first sweep reads a row evict_last, the second re-reads it from L2 and moves
the keys above the chosen 'shelf' to the 'tray' and the shelf's keys into the 'pool'; the remaining three 8-bit
digits are cut from the pool only; the tray's k words are ordered with tl.sort. One mapping for all shapes."""
import torch
import triton
import triton.language as tl

INT_MIN = tl.constexpr(-2147483648)
_L2_BYTES = 40 << 20


@triton.jit
def _plus(a, b):
    return a + b


@triton.jit
def _mark(v):
    raw = v.to(tl.float32).to(tl.int32, bitcast=True)
    return raw ^ ((raw >> 31) | INT_MIN)


@triton.jit
def _shelf(tally, need):
    """Digit whose bucket holds the need-th largest mark, and the count above it."""
    rev = tl.flip(tally, 0)
    upto = tl.associative_scan(rev, 0, _plus)
    beyond = tl.sum((upto < need).to(tl.int32), axis=0)
    d = 255 - beyond
    return d, tl.sum(tl.where(tl.arange(0, 256) > d, tally, 0), axis=0)


@triton.jit
def _clerk(src, out_v, out_i, pool_buf, tray_buf, n_rows, V, k, room, s_row, clerks,
           W: tl.constexpr, KP: tl.constexpr):
    me = tl.program_id(0)
    pool = pool_buf + me.to(tl.int64) * room
    tray = tray_buf + me.to(tl.int64) * KP
    lane = tl.arange(0, W)
    for r in tl.range(me, n_rows, clerks):
        line = src + r.to(tl.int64) * s_row
        tally = tl.zeros([256], tl.int32)
        for c0 in range(0, V, W):
            ok = c0 + lane < V
            mk = _mark(tl.load(line + c0 + lane, mask=ok, other=0.0, eviction_policy="evict_last"))
            tally += tl.histogram((mk >> 24) & 255, 256, mask=ok)
        d0, hi0 = _shelf(tally, k)
        need = k - hi0
        n_tray = tl.zeros([], tl.int32)
        n_pool = tl.zeros([], tl.int32)
        for c0 in range(0, V, W):
            at = c0 + lane
            ok = at < V
            mk = _mark(tl.load(line + at, mask=ok, other=0.0, eviction_policy="evict_first"))
            word = ((mk ^ INT_MIN).to(tl.int64) << 32) | (V - 1 - at).to(tl.int64)
            up = ok & (((mk >> 24) & 255) > d0)
            tl.store(tray + n_tray + tl.associative_scan(up.to(tl.int32), 0, _plus) - 1, word, mask=up)
            n_tray += tl.sum(up.to(tl.int32), axis=0)
            same = ok & (((mk >> 24) & 255) == d0)
            spot = n_pool + tl.associative_scan(same.to(tl.int32), 0, _plus) - 1
            tl.store(pool + spot, word, mask=same & (spot < room))
            n_pool += tl.sum(same.to(tl.int32), axis=0)
        tl.debug_barrier()
        head = d0
        for p in tl.static_range(1, 4):
            sh = 24 - 8 * p
            tally = tl.zeros([256], tl.int32)
            for c0 in range(0, n_pool, W):
                ok = c0 + lane < n_pool
                mk = (tl.load(pool + c0 + lane, mask=ok, other=0) >> 32).to(tl.int32) ^ INT_MIN
                ok = ok & (((mk >> (sh + 8)) & ((1 << (8 * p)) - 1)) == head)
                tally += tl.histogram((mk >> sh) & 255, 256, mask=ok)
            d, hi = _shelf(tally, need)
            need -= hi
            head = (head << 8) | d
        bar = head                                         # the k-th largest mark
        eq_seen = tl.zeros([], tl.int32)
        for c0 in range(0, n_pool, W):
            ok = c0 + lane < n_pool
            word = tl.load(pool + c0 + lane, mask=ok, other=0)
            mk = (word >> 32).to(tl.int32) ^ INT_MIN
            tie = ok & (mk == bar)
            order = eq_seen + tl.associative_scan(tie.to(tl.int32), 0, _plus)
            keep = (ok & ((mk ^ INT_MIN) > (bar ^ INT_MIN))) | (tie & (order <= need))
            tl.store(tray + n_tray + tl.associative_scan(keep.to(tl.int32), 0, _plus) - 1, word, mask=keep)
            n_tray += tl.sum(keep.to(tl.int32), axis=0)
            eq_seen += tl.sum(tie.to(tl.int32), axis=0)
        tl.debug_barrier()
        j = tl.arange(0, KP)
        best = tl.sort(tl.load(tray + j, mask=j < k, other=-9223372036854775808), descending=True)
        col = V - 1 - (best & 0xFFFFFFFF)
        dst = r.to(tl.int64) * k + j
        tl.store(out_i + dst, col, mask=j < k)
        tl.store(out_v + dst, tl.load(line + col, mask=j < k), mask=j < k)
        tl.debug_barrier()


def kernel(x, *, k):
    n_rows, V = x.shape
    x = x if x.stride(1) == 1 else x.contiguous()
    out_v = torch.empty((n_rows, k), dtype=x.dtype, device=x.device)
    out_i = torch.empty((n_rows, k), dtype=torch.int64, device=x.device)
    kp = triton.next_power_of_2(k)
    sm = torch.cuda.get_device_properties(x.device).multi_processor_count
    clerks = max(1, min(n_rows, sm, _L2_BYTES // (V * x.element_size())))
    room = triton.cdiv(max(V // 4, 4096), 1024) * 1024
    pool_buf = torch.empty((clerks, room), dtype=torch.int64, device=x.device)
    tray_buf = torch.empty((clerks, kp), dtype=torch.int64, device=x.device)
    _clerk[(clerks,)](x, out_v, out_i, pool_buf, tray_buf, n_rows, V, k, room, x.stride(0), clerks,
                      W=2048, KP=kp, num_warps=8)
    return out_v, out_i
