"""Expert Triton reference for ``topk``: values, indices = torch.topk(x, k, dim=-1) for x [B, V] fp32 or bf16,
values sorted descending, ties taken in increasing index order (the reference's canonical choice).

Guidance implemented (tasks/topk/task.yaml): L1.radix-select, L1.filter-then-sort, L2.candidate-compaction,
L2.rows-to-programs-by-size, L2.passes-hit-l2, L3.order-preserving-keys, L3.smem-histogram-atomics,
L3.tie-exact-count.

Keys. Every comparison runs on integers: skey = b ^ 0x7FFFFFFF for negative float bits b and b otherwise is a
signed int32 in float order (bf16: the 16-bit analogue, shifted to the top half), and u = skey ^ 0x80000000 is the
same order as unsigned bits, from which radix digits are cut. -0 sorts just below +0. Sorting and selection use
packed int64 words (skey << 32) | (V - 1 - index): the word order is the output order (value descending, lower
index first on ties) and unpacking gives the index back.

Three paths, picked from the row length and the row count:

- ``router`` (V <= 1024, e.g. 32768 x 256, k = 8): a program takes a [ROWS, next_pow2(V)] tile of whole rows
  (~4096 elements) and selects with ``tl.topk(words, next_pow2(k), dim=1)``, which returns the words already
  sorted; no radix machinery.
- ``rows`` (long rows, B >= SM count): MSB-first radix selection, one program per row. Pass 1 reads the row (evict_last)
  and builds the histogram of the top 6 key bits (sign + top exponent bits) with ``tl.histogram``; a cumsum over it
  finds the bucket holding the k-th largest key. Pass 2 re-reads the row from L2 (evict_first): keys in higher buckets
  go straight to the selection buffer, keys in the threshold bucket are compacted (cumsum slots) into a candidate buffer
  of CAP words. The remaining key bits are resolved by 8-bit digit histograms over the candidates only, which gives the
  exact k-th key and the number `need` of keys equal to it that are taken; a last pass over the candidates (in index
  order) appends the keys above it and the first `need` keys equal to it (rank = cumsum of the equality mask), so
  exactly k words are selected even with massive bf16 ties. They are sorted with ``tl.sort`` (k <= 2048 words) and
  unpacked; values are gathered from x. If the threshold bucket holds more than CAP keys (adversarial inputs), the
  candidate passes read the row itself instead of the buffer. A refining pass for that case (``_REFINE_OVERFLOW``,
  off: checked in the interpreter, not yet timed on the H200) first splits the bucket by the next 6 key bits, one
  more read of the row from L2, so that only the keys sharing the top 12 bits become candidates.
- ``split`` (long rows, B < SM count): each row is cut into S chunks handled by different programs. Kernel 1 adds
  each chunk's 64-bin histogram to the row's global histogram with one atomic per bin; kernel 2 compacts each
  chunk (above-bucket keys into the row's selection buffer at slots claimed with one atomic per tile, bucket keys
  into the chunk's own candidate segment, in index order); kernel 3 resolves the threshold over the S segments
  and sorts, as in ``rows``.

Digit sizes: tl.histogram lowers to per-warp ballots whose per-key cost grows with bins/32, so the full-row pass
uses 64 bins (6 bits) rather than the 2048 of a shared-memory CUDA histogram; on N(0,1) rows the threshold bucket
for the catalog's k is then [2, 512), about 2.3% of the row, and the 256-bin passes run on those candidates only.
Tiles hold 16 keys per thread: 8 KB on ``rows`` (2048 fp32 keys at 4 warps, 4096 bf16 keys at 8 warps; 4096 fp32
keys at 8 warps compiled to 205 registers for sm_90a and ran 1.3-1.6x slower on the H200), 8192 keys at 16 warps on
``split``.

Roofline floors on H200 (bytes = B*V*elt + B*k*(elt + 8) at the measured copy bandwidth):

======================  =========================  =======  ==================================================
workload                B x V, k, dtype            floor    H200: time, fraction of floor, x best peer
======================  =========================  =======  ==================================================
sampling_k50            256 x 128256, 50, fp32     31.6 us  906 us, 0.04, 0.53x compile
sparse_attention_k2048  1024 x 131072, 2048, fp32  135 us   1.42 ms, 0.10, 1.18x eager
moe_router_k8           32768 x 256, 8, fp32       8.81 us  92.0 us, 0.10, 4.44x eager
bf16_ties_k256          128 x 256000, 256, bf16    15.8 us  449 us, 0.04, 0.75x eager
======================  =========================  =======  ==================================================

Floors use the rates measured on the H200 (copy 4.17 TB/s, bf16 754 TFLOP/s, fp8 1284 TFLOP/s;
benchmarks/data/references_h200.json, 2026-11-30).
The last column is benchmarks/summary.py's row for the workload: the newest evaluation against every baseline
candidate, and the fastest candidate correct in every evaluation (benchmarks/docstring_figures.py writes it).
The last column pools every timed input draw. sampling_k50's pooled median sits on the edge between the normal draw's
0.35 ms and the other draws' 1.47 ms, so it moves between evaluations of the same code: 1.36x and 1.35x compile in
rounds 17 and 18, 0.53x in round 21 (NOTES.md). With a capped persistent grid (an earlier design) sampling_k50 and
sparse_attention_k2048 ran 0.72x and 0.56x. bf16_ties_k256's 256000-key rows hold so many equal bf16 keys that the
threshold bucket can overflow the candidate buffer, and the candidate passes then re-read whole rows; with all 128
rows in flight (no L2 cap) it was slower still (498 us). The time split between the passes was not measured.
Timed draws other than the catalog's (negative, coarse_ties) run 3-5x slower: references/topk/NOTES.md.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

INT_MIN = tl.constexpr(-2147483648)
TOP_SHIFT = tl.constexpr(26)      # pass-1 digit: the top 6 key bits (sign + 5 exponent bits)
NBINS1 = tl.constexpr(64)
MASK1 = tl.constexpr(63)
REFINE_SHIFT = tl.constexpr(20)   # the refining digit: the next 6 key bits, below the top digit

_ROUTER_MAX_V = 1024
_ROUTER_TILE = 4096     # elements per router program
_ROWS_TILE_BYTES = 8192  # bytes of keys per tile on the rows path: 2048 fp32 at 4 warps, 4096 bf16 at 8 warps
_SPLIT_TILE = 8192      # keys per tile on the split path: 16 per thread at 16 warps (<= 128 registers)
_L2_BUDGET = 48 << 20   # bytes of bf16 rows in flight on the rows path (H200 L2: 60 MB)
_MIN_CHUNK = 16384      # keys per chunk on the split path
_REFINE_OVERFLOW = False  # the rows path's refining pass on overflowing rows: off until timed on the H200


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.lru_cache(maxsize=None)
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _sm_count(x: torch.Tensor) -> int:
    if x.is_cuda and not _interpreting():
        return _num_sms(x.device.index if x.device.index is not None else torch.cuda.current_device())
    return 4  # the interpreter runs programs one after another; a small grid still exercises persistence


# ------------------------------------------------------------------------------------------------ helpers


@triton.jit
def _skey(x, IS_BF16: tl.constexpr):
    """Signed int32 keys in the order of the float values (bf16 keys live in the top 16 bits)."""
    if IS_BF16:
        b = x.to(tl.int16, bitcast=True).to(tl.int32)
        return tl.where(b < 0, b ^ 0x7FFF, b) << 16
    else:
        b = x.to(tl.int32, bitcast=True)
        return tl.where(b < 0, b ^ 0x7FFFFFFF, b)


@triton.jit
def _pack(skey, idx, V):
    """int64 words ordered like (value, -index): the output order; unpack with V - 1 - (low 32 bits)."""
    return (skey.to(tl.int64) << 32) | (V - 1 - idx).to(tl.int64)


@triton.jit
def _unpack_index(word, V):
    return V - 1 - (word - ((word >> 32) << 32))


@triton.jit
def _key_prefix(skey, SHIFT: tl.constexpr):
    """The key's unsigned bits above SHIFT: the top digit at TOP_SHIFT, the top two digits at REFINE_SHIFT."""
    return ((skey ^ INT_MIN) >> SHIFT) & ((tl.full([], 1, tl.int32) << (32 - SHIFT)) - 1)


@triton.jit
def _select_bucket(h, need, NBINS: tl.constexpr):
    """Bucket t holding the need-th largest key of histogram h, and the number of keys in buckets above it."""
    bins = tl.arange(0, NBINS)
    suffix = tl.sum(h, axis=0) - (tl.cumsum(h, axis=0) - h)  # keys in buckets >= j
    t = tl.max(tl.where(suffix >= need, bins, -1), axis=0)
    above = tl.sum(tl.where(bins > t, h, 0), axis=0)
    return t, above


@triton.jit
def _source_tile(x_row, src, start, n, V, t1, from_row, TILE: tl.constexpr, IS_BF16: tl.constexpr,
                 SHIFT: tl.constexpr):
    """Keys, indices and validity of one tile of the candidates of the threshold bucket t1 (the key bits above
    SHIFT): from a candidate segment (packed words), or straight from the row when the buffer overflowed."""
    offs = start + tl.arange(0, TILE)
    ok = offs < n
    if from_row:
        skey = _skey(tl.load(x_row + offs, mask=ok, other=0.0), IS_BF16)
        idx = offs
        ok = ok & (_key_prefix(skey, SHIFT) == t1)
    else:
        w = tl.load(src + offs, mask=ok, other=0)
        skey = (w >> 32).to(tl.int32)
        idx = _unpack_index(w, V).to(tl.int32)
    return skey, idx, ok


@triton.jit
def _row_histogram(x_row, lo, hi, TILE: tl.constexpr, IS_BF16: tl.constexpr):
    """Pass 1: histogram of the top key digit over x_row[lo:hi] (evict_last: pass 2 re-reads it from L2)."""
    h = tl.zeros([NBINS1], dtype=tl.int32)
    for start in range(lo, hi, TILE):
        offs = start + tl.arange(0, TILE)
        ok = offs < hi
        xv = tl.load(x_row + offs, mask=ok, other=0.0, eviction_policy="evict_last")
        h += tl.histogram(_key_prefix(_skey(xv, IS_BF16), TOP_SHIFT), NBINS1, mask=ok)
    return h


@triton.jit
def _bucket_histogram(x_row, V, t1, TILE: tl.constexpr, IS_BF16: tl.constexpr):
    """The refining pass: histogram of the 6 key bits below the top digit, over the keys of bucket t1 (from L2)."""
    h = tl.zeros([NBINS1], dtype=tl.int32)
    for start in range(0, V, TILE):
        offs = start + tl.arange(0, TILE)
        skey = _skey(tl.load(x_row + offs, mask=offs < V, other=0.0, eviction_policy="evict_last"), IS_BF16)
        ok = (offs < V) & (_key_prefix(skey, TOP_SHIFT) == t1)
        h += tl.histogram(_key_prefix(skey, REFINE_SHIFT) & MASK1, NBINS1, mask=ok)
    return h


@triton.jit
def _compact(x_row, lo, hi, V, t1, sel, sel_base, cand, cap, SPLIT_SEL: tl.constexpr, sel_count,
             TILE: tl.constexpr, IS_BF16: tl.constexpr, SHIFT: tl.constexpr):
    """Pass 2 over x_row[lo:hi]: keys above bucket t1 (of the key bits above SHIFT) go to the selection buffer, keys
    in t1 to the candidate segment (first cap of them, in index order). Returns the number of bucket keys seen."""
    n_eq = tl.zeros([], dtype=tl.int32)
    sel_base = tl.zeros([], dtype=tl.int32) + sel_base
    for start in range(lo, hi, TILE):
        offs = start + tl.arange(0, TILE)
        ok = offs < hi
        skey = _skey(tl.load(x_row + offs, mask=ok, other=0.0, eviction_policy="evict_first"), IS_BF16)
        d = _key_prefix(skey, SHIFT)
        word = _pack(skey, offs, V)
        gt = ok & (d > t1)
        n_gt = tl.sum(gt.to(tl.int32), axis=0)
        if n_gt > 0:
            if SPLIT_SEL:
                base = tl.atomic_add(sel_count, n_gt)  # one slot claim per tile, shared by the row's chunks
            else:
                base = sel_base
                sel_base += n_gt
            tl.store(sel + base + tl.cumsum(gt.to(tl.int32), axis=0) - 1, word, mask=gt)
        eq = ok & (d == t1)
        slot = n_eq + tl.cumsum(eq.to(tl.int32), axis=0) - 1
        tl.store(cand + slot, word, mask=eq & (slot < cap))
        n_eq += tl.sum(eq.to(tl.int32), axis=0)
    return n_eq


@triton.jit
def _finish(x_row, V, k, t1, above, cand, counts, S, cap, sel, vals_out, idx_out,
            K_P2: tl.constexpr, KEY_LOW: tl.constexpr, TILE: tl.constexpr, IS_BF16: tl.constexpr,
            SHIFT: tl.constexpr):
    """Resolves the exact threshold among the candidates of bucket t1 (the key bits above SHIFT; `above` keys are
    larger) in S segments of up to cap words, or the row; appends the keys above it and the first `need` keys equal
    to it to sel, sorts the k words and stores them."""
    need = k - above
    overflow = tl.zeros([], dtype=tl.int32)
    for s in range(0, S):
        overflow += (tl.load(counts + s) > cap).to(tl.int32)
    from_row = overflow > 0
    n_segs = tl.where(from_row, 1, S)
    # Remaining key bits, 8 per pass (the last pass takes what is left above KEY_LOW).
    prefix = t1
    for p in tl.static_range((SHIFT - KEY_LOW + 7) // 8):
        sh = tl.maximum(tl.full([], SHIFT - 8 * (p + 1), tl.int32), KEY_LOW)  # this digit: bits [sh, sh + wd)
        wd = (SHIFT - 8 * p) - sh
        one = tl.full([], 1, tl.int32)
        h = tl.zeros([256], dtype=tl.int32)
        for s in range(0, n_segs):
            n = tl.where(from_row, V, tl.load(counts + s))
            for start in range(0, n, TILE):
                skey, idx, ok = _source_tile(x_row, cand + s * cap, start, n, V, t1, from_row, TILE, IS_BF16,
                                             SHIFT)
                u = skey ^ INT_MIN
                ok = ok & (((u >> (sh + wd)) & ((one << (32 - sh - wd)) - 1)) == prefix)
                h += tl.histogram((u >> sh) & ((one << wd) - 1), 256, mask=ok)
        t, above_p = _select_bucket(h, need, 256)
        need -= above_p
        prefix = (prefix << wd) | t
    thr = (prefix << KEY_LOW) ^ INT_MIN  # the k-th largest key (signed form)
    # Collection, in index order: every key above thr, then the first `need` keys equal to it.
    taken = above
    seen_eq = tl.zeros([], dtype=tl.int32)
    for s in range(0, n_segs):
        n = tl.where(from_row, V, tl.load(counts + s))
        for start in range(0, n, TILE):
            skey, idx, ok = _source_tile(x_row, cand + s * cap, start, n, V, t1, from_row, TILE, IS_BF16,
                                         SHIFT)
            eq = ok & (skey == thr)
            rank = seen_eq + tl.cumsum(eq.to(tl.int32), axis=0)
            take = (ok & (skey > thr)) | (eq & (rank <= need))
            tl.store(sel + taken + tl.cumsum(take.to(tl.int32), axis=0) - 1, _pack(skey, idx, V), mask=take)
            taken += tl.sum(take.to(tl.int32), axis=0)
            seen_eq += tl.sum(eq.to(tl.int32), axis=0)
    tl.debug_barrier()  # sel was written by other threads of this program
    j = tl.arange(0, K_P2)
    words = tl.load(sel + j, mask=j < k, other=-9223372036854775808)
    words = tl.sort(words, descending=True)
    idx = _unpack_index(words, V)
    tl.store(idx_out + j, idx, mask=j < k)
    tl.store(vals_out + j, tl.load(x_row + idx, mask=j < k), mask=j < k)


@triton.jit
def _rows_select(x_row, V, k, t1, above, cand, counts, cap, sel, vals_out, idx_out,
                 K_P2: tl.constexpr, KEY_LOW: tl.constexpr, TILE: tl.constexpr, IS_BF16: tl.constexpr,
                 SHIFT: tl.constexpr):
    """One row of the rows path once its threshold bucket t1 (the key bits above SHIFT) is known: compaction, then
    the exact threshold among the candidates, selection and sort."""
    n_eq = _compact(x_row, 0, V, V, t1, sel, 0, cand, cap, False, counts, TILE, IS_BF16, SHIFT)
    tl.store(counts, n_eq)
    tl.debug_barrier()  # candidates, selection and counts were written by other threads of this program
    _finish(x_row, V, k, t1, above, cand, counts, 1, cap, sel, vals_out, idx_out, K_P2, KEY_LOW, TILE, IS_BF16,
            SHIFT)


# ------------------------------------------------------------------------------------------------ kernels


@triton.jit
def _topk_router_kernel(
    x_ptr, vals_ptr, idx_ptr,
    B, V, k,
    stride_xb,
    ROWS: tl.constexpr, BLOCK_V: tl.constexpr, K_P2: tl.constexpr, IS_BF16: tl.constexpr,
):
    """Rows [pid*ROWS, +ROWS), each whole in registers: reads ROWS*V*elt bytes, writes ROWS*k*(elt + 8)."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_V)
    row_ok = rows < B
    ok = row_ok[:, None] & (cols[None, :] < V)
    x_rows = x_ptr + rows.to(tl.int64) * stride_xb
    x = tl.load(x_rows[:, None] + cols[None, :], mask=ok, other=0.0, eviction_policy="evict_first")
    words = tl.where(ok, _pack(_skey(x, IS_BF16), cols[None, :], V), -9223372036854775808)
    # The K_P2 largest words of each row, sorted descending: value order, lower index first on ties.
    top = tl.topk(words, K_P2, dim=1)
    j = tl.arange(0, K_P2)
    idx = _unpack_index(top, V)
    out_ok = row_ok[:, None] & (j[None, :] < k)
    out = rows.to(tl.int64)[:, None] * k + j[None, :]
    tl.store(idx_ptr + out, idx, mask=out_ok)
    tl.store(vals_ptr + out, tl.load(x_rows[:, None] + idx, mask=out_ok), mask=out_ok)


@triton.jit
def _topk_rows_kernel(
    x_ptr, vals_ptr, idx_ptr, cand_ptr, count_ptr, sel_ptr,
    B, V, k, cap,
    stride_xb,
    num_progs,
    K_P2: tl.constexpr, KEY_LOW: tl.constexpr, TILE: tl.constexpr, IS_BF16: tl.constexpr, REFINE: tl.constexpr,
):
    """Rows pid, pid + num_progs, ...: radix selection of one row at a time. Reads the row from HBM once (pass 1)
    and from L2 once (pass 2), then only the bucket's candidates; writes k*(elt + 8) bytes per row. The
    candidate (cap words), selection (K_P2 words), histogram and count buffers are this program's own. With
    REFINE, a row whose threshold bucket holds more than cap keys takes one more pass from L2 first: the bucket's
    histogram of the next 6 key bits, so that only the keys sharing the top 12 bits become candidates."""
    pid = tl.program_id(0)
    cand = cand_ptr + pid.to(tl.int64) * cap
    counts = count_ptr + pid
    sel = sel_ptr + pid.to(tl.int64) * K_P2
    for row in tl.range(pid, B, num_progs):
        x_row = x_ptr + tl.cast(row, tl.int64) * stride_xb
        h1 = _row_histogram(x_row, 0, V, TILE, IS_BF16)
        t1, above = _select_bucket(h1, k, NBINS1)
        out = tl.cast(row, tl.int64) * k
        if REFINE:
            if tl.sum(tl.where(tl.arange(0, NBINS1) == t1, h1, 0), axis=0) > cap:
                t2, above2 = _select_bucket(_bucket_histogram(x_row, V, t1, TILE, IS_BF16), k - above, NBINS1)
                t12 = (t1 << (TOP_SHIFT - REFINE_SHIFT)) | t2  # the bucket of the top 12 key bits
                _rows_select(x_row, V, k, t12, above + above2, cand, counts, cap, sel, vals_ptr + out, idx_ptr + out,
                             K_P2, KEY_LOW, TILE, IS_BF16, REFINE_SHIFT)
            else:
                _rows_select(x_row, V, k, t1, above, cand, counts, cap, sel, vals_ptr + out, idx_ptr + out,
                             K_P2, KEY_LOW, TILE, IS_BF16, TOP_SHIFT)
        else:
            _rows_select(x_row, V, k, t1, above, cand, counts, cap, sel, vals_ptr + out, idx_ptr + out,
                         K_P2, KEY_LOW, TILE, IS_BF16, TOP_SHIFT)
        tl.debug_barrier()  # the next row reuses this program's buffers


@triton.jit
def _topk_split_hist_kernel(
    x_ptr, hist_ptr,
    V, chunk,
    stride_xb,
    TILE: tl.constexpr, IS_BF16: tl.constexpr,
):
    """Chunk pid_s of row pid_b: reads chunk*elt bytes, adds its 64-bin histogram to the row's (one atomic per bin)."""
    row = tl.program_id(0)
    lo = tl.program_id(1) * chunk
    x_row = x_ptr + row.to(tl.int64) * stride_xb
    h = _row_histogram(x_row, lo, tl.minimum(lo + chunk, V), TILE, IS_BF16)
    bins = tl.arange(0, NBINS1)
    tl.atomic_add(hist_ptr + row * (NBINS1) + bins, h, mask=h > 0, sem="relaxed")


@triton.jit
def _topk_split_compact_kernel(
    x_ptr, hist_ptr, cand_ptr, count_ptr, sel_ptr, sel_count_ptr,
    V, k, chunk, cap,
    stride_xb,
    K_P2: tl.constexpr, TILE: tl.constexpr, IS_BF16: tl.constexpr,
):
    """Chunk pid_s of row pid_b: re-reads it (chunk*elt bytes) and writes the above-bucket keys to the row's
    selection buffer and the bucket keys to segment pid_s of the row's candidates."""
    row = tl.program_id(0)
    s = tl.program_id(1)
    S = tl.num_programs(1)
    lo = s * chunk
    t1, above = _select_bucket(tl.load(hist_ptr + row * (NBINS1) + tl.arange(0, NBINS1)), k,
                               NBINS1)
    x_row = x_ptr + row.to(tl.int64) * stride_xb
    seg = row * S + s
    n_eq = _compact(x_row, lo, tl.minimum(lo + chunk, V), V, t1, sel_ptr + row.to(tl.int64) * K_P2, 0,
                    cand_ptr + seg.to(tl.int64) * cap, cap, True, sel_count_ptr + row, TILE, IS_BF16, TOP_SHIFT)
    tl.store(count_ptr + seg, n_eq)


@triton.jit
def _topk_split_finish_kernel(
    x_ptr, vals_ptr, idx_ptr, hist_ptr, cand_ptr, count_ptr, sel_ptr,
    V, k, S, cap,
    stride_xb,
    K_P2: tl.constexpr, KEY_LOW: tl.constexpr, TILE: tl.constexpr, IS_BF16: tl.constexpr,
):
    """Row pid: resolves the threshold over the S candidate segments, sorts the k selected words, stores them."""
    row = tl.program_id(0)
    t1, above = _select_bucket(tl.load(hist_ptr + row * (NBINS1) + tl.arange(0, NBINS1)), k, NBINS1)
    out = row.to(tl.int64) * k
    _finish(x_ptr + row.to(tl.int64) * stride_xb, V, k, t1, above, cand_ptr + (row * S).to(tl.int64) * cap,
            count_ptr + row * S, S, cap, sel_ptr + row.to(tl.int64) * K_P2, vals_ptr + out, idx_ptr + out,
            K_P2, KEY_LOW, TILE, IS_BF16, TOP_SHIFT)


# ------------------------------------------------------------------------------------------------ launcher


def _pick_path(B: int, V: int, k: int, num_sms: int) -> str:
    if V <= _ROUTER_MAX_V:
        return "router"
    return "rows" if B >= num_sms else "split"


def _default_cap(V: int, k: int, tile: int) -> int:
    # N(0,1) rows put ~2.3% of their keys in the threshold bucket for the catalog's k; 1/8 of the row leaves room,
    # and a bigger bucket falls back to reading the row.
    return min(triton.cdiv(V, tile) * tile, max(2 * tile, triton.cdiv(max(V // 8, 2 * k), tile) * tile))


def topk(x: torch.Tensor, k: int, *, _path: str | None = None, _tile: int | None = None, _cap: int | None = None,
         _num_progs: int | None = None, _split: int | None = None, _rows: int | None = None,
         _refine: bool | None = None):
    """Row-wise top-k (largest, sorted) of a 2-D fp32/bf16 tensor: (values [B, k], int64 indices [B, k]).

    The underscored arguments override the launcher's choices; tests use them to run every path on small
    inputs (``_cap`` small enough to force the candidate-overflow fallback).
    """
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [B, V], got shape {tuple(x.shape)}")
    if x.dtype not in (torch.float32, torch.bfloat16):
        raise TypeError(f"x must be fp32 or bf16, got {x.dtype}")
    B, V = x.shape
    k = int(k)
    if not 1 <= k <= V:
        raise ValueError(f"k must be in [1, V={V}], got {k}")
    if V >= 2**31:
        raise ValueError("rows longer than 2^31 are not supported")
    if x.stride(1) != 1:
        x = x.contiguous()
    values = torch.empty((B, k), dtype=x.dtype, device=x.device)
    indices = torch.empty((B, k), dtype=torch.int64, device=x.device)
    if B == 0:
        return values, indices
    is_bf16 = x.dtype == torch.bfloat16
    k_p2 = triton.next_power_of_2(k)
    num_sms = _sm_count(x)
    path = _path or _pick_path(B, V, k, num_sms)
    if path == "router":
        block_v = triton.next_power_of_2(V)
        rows = _rows or max(1, min(triton.next_power_of_2(B), _ROUTER_TILE // block_v))
        _topk_router_kernel[(triton.cdiv(B, rows),)](x, values, indices, B, V, k, x.stride(0), ROWS=rows,
                                                     BLOCK_V=block_v, K_P2=k_p2, IS_BF16=is_bf16, num_warps=4)
        return values, indices
    key_low = 16 if is_bf16 else 0
    dev = x.device
    if path == "rows":
        # fp32: one program per row, 8 KB tiles. On the H200 (benchmarks/data/runs/round7/tune_gemms_topk.json) this
        # took 346 us at sampling_k50 and 1.34 ms at sparse_attention_k2048, against 639 us and 2.94 ms for a
        # persistent grid capped at one program per SM and 48 MB of rows in flight: the passes are bound by the
        # histogram and compaction instructions, not by HBM, so what counts is how many programs each SM
        # interleaves. bf16 keeps the cap: its ties overflow the candidate buffer, the candidate passes then
        # re-read the row, and the rows must still be in L2. Through the evaluator's tie-heavy draws bf16_ties_k256
        # took 498 us with all 128 rows in flight against 444 us capped (bench_topk_gemms.json).
        tile = _tile or _ROWS_TILE_BYTES // x.element_size()
        warps = 8 if tile >= 4096 else 4
        cap = _cap or _default_cap(V, k, tile)
        progs = _num_progs or (min(B, max(1, _L2_BUDGET // (V * x.element_size()))) if is_bf16 else B)
        cand = torch.empty((progs, cap), dtype=torch.int64, device=dev)
        counts = torch.empty(progs, dtype=torch.int32, device=dev)
        sel = torch.empty((progs, k_p2), dtype=torch.int64, device=dev)
        refine = _REFINE_OVERFLOW if _refine is None else bool(_refine)
        _topk_rows_kernel[(progs,)](x, values, indices, cand, counts, sel, B, V, k, cap, x.stride(0), progs,
                                    K_P2=k_p2, KEY_LOW=key_low, TILE=tile, IS_BF16=is_bf16, REFINE=refine,
                                    num_warps=warps)
    elif path == "split":
        tile = _tile or _SPLIT_TILE
        warps = 16 if tile >= 8192 else 4
        S = _split or max(1, min(triton.cdiv(2 * num_sms, B), triton.cdiv(V, _MIN_CHUNK)))
        chunk = triton.cdiv(triton.cdiv(V, S), tile) * tile
        S = triton.cdiv(V, chunk)
        cap = _cap or _default_cap(chunk, k, tile)
        ints = torch.zeros(B * 65, dtype=torch.int32, device=dev)  # row histograms and selection counters
        hist, sel_count = ints[:B * 64], ints[B * 64:]
        cand = torch.empty((B * S, cap), dtype=torch.int64, device=dev)
        counts = torch.empty(B * S, dtype=torch.int32, device=dev)
        sel = torch.empty((B, k_p2), dtype=torch.int64, device=dev)
        _topk_split_hist_kernel[(B, S)](x, hist, V, chunk, x.stride(0), TILE=tile, IS_BF16=is_bf16, num_warps=warps)
        _topk_split_compact_kernel[(B, S)](x, hist, cand, counts, sel, sel_count, V, k, chunk, cap, x.stride(0),
                                           K_P2=k_p2, TILE=tile, IS_BF16=is_bf16, num_warps=warps)
        _topk_split_finish_kernel[(B,)](x, values, indices, hist, cand, counts, sel, V, k, S, cap, x.stride(0),
                                        K_P2=k_p2, KEY_LOW=key_low, TILE=tile, IS_BF16=is_bf16, num_warps=warps)
    else:
        raise ValueError(f"unknown path {path!r}")
    return values, indices


def kernel(x: torch.Tensor, *, k: int):
    """Submission entry point: torch.topk(x, k, dim=-1, largest=True, sorted=True)."""
    return topk(x, k)
