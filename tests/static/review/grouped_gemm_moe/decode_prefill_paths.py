"""MoE grouped GEMM with a decode and a prefill kernel, chosen on the host from the average rows per expert.

- decode (T / E <= 16): grid (E, cdiv(N, BN)); a program reads its expert's row count, skips the expert when it
  has no rows, and computes all of them in one 16-row tile, swap-AB (the weight panel is the MMA's M side), so each
  touched expert's weights are streamed once. 5 stages, BK 128.
- prefill: a 1-D grid sized from an upper bound on the tile count, (cdiv(T, BM) + E) * n_tiles; each program
  recomputes the per-expert tile counts from the offsets (tl.cumsum), finds its expert by counting tile ends <= its
  tile, and exits past the real count. BM 64 or 128 by rows per expert.
W[e] is based at w + e.to(int64) * stride_we, hoisted out of the K loop.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _moe_decode(x_ptr, w_ptr, y_ptr, offsets_ptr, N, K, stride_we,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    e = tl.program_id(0)
    n0 = tl.program_id(1) * BN
    lo = tl.load(offsets_ptr + e)
    rows_e = tl.load(offsets_ptr + e + 1) - lo
    if rows_e > 0:
        w_base = w_ptr + e.to(tl.int64) * stride_we
        toks = lo + tl.arange(0, BM)
        cols = n0 + tl.arange(0, BN)
        ks = tl.arange(0, BK)
        acc = tl.zeros((BN, BM), dtype=tl.float32)
        for k0 in tl.range(0, K, BK, num_stages=5):
            w = tl.load(w_base + cols[:, None] * K + (k0 + ks)[None, :], mask=cols[:, None] < N, other=0.0)
            x = tl.load(x_ptr + toks[:, None] * K + (k0 + ks)[None, :], mask=toks[:, None] < lo + rows_e, other=0.0)
            acc = tl.dot(w, tl.trans(x), acc)
        tl.store(y_ptr + toks[None, :] * N + cols[:, None], acc.to(tl.bfloat16),
                 mask=(toks[None, :] < lo + rows_e) & (cols[:, None] < N))


@triton.jit
def _moe_prefill(x_ptr, w_ptr, y_ptr, offsets_ptr, E, N, K, stride_we,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, E_POW2: tl.constexpr):
    num_n = tl.cdiv(N, BN)
    tile = tl.program_id(0) // num_n
    n0 = (tl.program_id(0) % num_n) * BN
    es = tl.arange(0, E_POW2)
    lo_all = tl.load(offsets_ptr + es, mask=es < E, other=0)
    hi_all = tl.load(offsets_ptr + es + 1, mask=es < E, other=0)
    tile_end = tl.cumsum(tl.cdiv(hi_all - lo_all, BM), axis=0)
    total = tl.max(tl.where(es < E, tile_end, 0), axis=0)
    if tile < total:
        e = tl.sum((tile_end <= tile) & (es < E), axis=0)
        first = tl.sum(tl.where(es < e, tl.cdiv(hi_all - lo_all, BM), 0), axis=0)
        row_lo = tl.load(offsets_ptr + e)
        row_hi = tl.load(offsets_ptr + e + 1)
        rows = row_lo + (tile - first) * BM + tl.arange(0, BM)
        cols = n0 + tl.arange(0, BN)
        ks = tl.arange(0, BK)
        w_base = w_ptr + e.to(tl.int64) * stride_we
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            x = tl.load(x_ptr + rows[:, None] * K + (k0 + ks)[None, :], mask=rows[:, None] < row_hi, other=0.0)
            w = tl.load(w_base + cols[:, None] * K + (k0 + ks)[None, :], mask=cols[:, None] < N, other=0.0)
            acc = tl.dot(x, tl.trans(w), acc)
        tl.store(y_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.bfloat16),
                 mask=(rows[:, None] < row_hi) & (cols[None, :] < N))


def kernel(X, W, expert_offsets):
    T, K = X.shape
    E, N, _ = W.shape
    Y = torch.empty((T, N), device=X.device, dtype=X.dtype)
    per_expert = T // E
    if per_expert <= 16:
        grid = (E, triton.cdiv(N, 128))
        _moe_decode[grid](X, W, Y, expert_offsets, N, K, W.stride(0), BM=16, BN=128, BK=128, num_warps=4)
        return Y
    BM, BN, warps, stages = (64, 128, 4, 4) if per_expert <= 512 else (128, 128, 8, 3)
    grid = ((triton.cdiv(T, BM) + E) * triton.cdiv(N, BN),)
    _moe_prefill[grid](X, W, Y, expert_offsets, E, N, K, W.stride(0), BM=BM, BN=BN, BK=64,
                       E_POW2=triton.next_power_of_2(E), num_warps=warps, num_stages=stages)
    return Y
