"""Top-k with a hand-written bitonic network (compare-exchange through tl.gather at distance j inside blocks of
size k), no tl.sort / tl.topk: rows of up to 1024 sit in [ROWS, V] register tiles sorted in place; longer rows keep
a running top-K_P2 of packed (order-preserving key, V-1-index) words, merge each new tile into it with the same
network, and skip tiles whose best word is below the current k-th word. One program per row on the long path."""
import torch
import triton
import triton.language as tl

MIN_WORD = -9223372036854775808


@triton.jit
def _compare_exchange(w, J: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    idx = tl.arange(0, N)[None, :]
    partner = tl.broadcast_to(idx ^ J, w.shape)
    other = tl.gather(w, partner, 1)
    keep_max = ((idx & J) == 0) == ((idx & K) == 0)
    return tl.where(keep_max, tl.maximum(w, other), tl.minimum(w, other))


@triton.jit
def _bitonic_desc(w, LOG_N: tl.constexpr):
    N: tl.constexpr = 1 << LOG_N
    for s in tl.static_range(1, LOG_N + 1):
        for t in tl.static_range(s):
            w = _compare_exchange(w, 1 << (s - 1 - t), 1 << s, N)
    return w


@triton.jit
def _pack(x, cols, V):
    bits = x.to(tl.float32).to(tl.int32, bitcast=True)
    key = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
    return (key.to(tl.int64) << 32) | (V - 1 - cols).to(tl.int64)


@triton.jit
def _unpack_store(words, rows_ok, col_ok, val_ptr, idx_ptr, out_offs, V):
    key = (words >> 32).to(tl.int32)
    bits = tl.where(key < 0, key ^ 0x7FFFFFFF, key)
    vals = bits.to(tl.float32, bitcast=True)
    idx = V - 1 - (words & 0xFFFFFFFF)
    m = rows_ok & col_ok
    tl.store(val_ptr + out_offs, vals.to(val_ptr.dtype.element_ty), mask=m)
    tl.store(idx_ptr + out_offs, idx, mask=m)


@triton.jit
def _router_rows(x_ptr, val_ptr, idx_ptr, B, V, k, sx, ROWS: tl.constexpr, LOG_V: tl.constexpr):
    BV: tl.constexpr = 1 << LOG_V
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BV)[None, :]
    ok = (rows < B) & (cols < V)
    x = tl.load(x_ptr + rows.to(tl.int64) * sx + cols, mask=ok, other=0.0)
    words = tl.where(ok, _pack(x, cols, V), MIN_WORD)
    words = _bitonic_desc(words, LOG_V)
    _unpack_store(words, rows < B, cols < k, val_ptr, idx_ptr, rows * k + cols, V)


@triton.jit
def _running_topk(x_ptr, val_ptr, idx_ptr, V, k, sx, LOG_K: tl.constexpr):
    KP: tl.constexpr = 1 << LOG_K
    row = tl.program_id(0)
    best = tl.full([1, KP], MIN_WORD, tl.int64)
    half = tl.arange(0, 2)[:, None]
    for off in tl.range(0, V, KP):
        cols = off + tl.arange(0, KP)[None, :]
        x = tl.load(x_ptr + row.to(tl.int64) * sx + cols, mask=cols < V, other=0.0)
        words = tl.where(cols < V, _pack(x, cols, V), MIN_WORD)
        kth = tl.min(tl.where(tl.arange(0, KP)[None, :] < k, best, 9223372036854775807), axis=1)
        if tl.max(tl.max(words, axis=1) - kth, axis=0) > 0:
            both = tl.reshape(tl.join(best, words), [1, 2 * KP])
            both = _bitonic_desc(both, LOG_K + 1)
            top = tl.reshape(both, [2, KP])
            best = tl.sum(tl.where(half == 0, top, 0), axis=0)[None, :]
    cols = tl.arange(0, KP)[None, :]
    _unpack_store(best, row >= 0, cols < k, val_ptr, idx_ptr, row * k + cols, V)


def kernel(x: torch.Tensor, *, k: int):
    B, V = x.shape
    values = torch.empty((B, k), device=x.device, dtype=x.dtype)
    indices = torch.empty((B, k), device=x.device, dtype=torch.int64)
    if V <= 1024:
        rows = max(1, 2048 // triton.next_power_of_2(V))
        _router_rows[(triton.cdiv(B, rows),)](x, values, indices, B, V, k, x.stride(0), ROWS=rows,
                                               LOG_V=triton.next_power_of_2(V).bit_length() - 1, num_warps=4)
    else:
        log_k = max(triton.next_power_of_2(k), 16).bit_length() - 1
        _running_topk[(B,)](x, values, indices, V, k, x.stride(0), LOG_K=log_k, num_warps=8)
    return values, indices
