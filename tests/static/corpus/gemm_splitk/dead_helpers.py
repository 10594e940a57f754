"""Split-K on tensor cores with fp32 atomics into a workspace and a cast kernel runs (64x64 tiles, S from the SM
count). The Stream-K kernel, the last-CTA ticket helper, the swap-AB helper and the hinted GEMV kernel are never
used (the GEMV launch sits under `if False:`)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _swapped_dot(a, b, acc):
    return tl.dot(b, tl.trans(a), acc)


@triton.jit
def _last_cta_cast(ws_ptr, c_ptr, cnt_ptr, offs, mask, tile, S):
    ticket = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel")
    if ticket == S - 1:
        v = tl.load(ws_ptr + offs, mask=mask, cache_modifier=".cg")
        tl.store(c_ptr + offs, v.to(tl.bfloat16), mask=mask)
        tl.store(ws_ptr + offs, tl.zeros_like(v), mask=mask)
        tl.atomic_xchg(cnt_ptr + tile, 0)


@triton.jit
def splitk_tiles(a_ptr, b_ptr, ws_ptr, M, N, K, KPS, stride_am, stride_bn,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    tile = tl.program_id(0)
    split = tl.program_id(1)
    tn = tl.cdiv(N, BN)
    rm = (tile // tn) * BM + tl.arange(0, BM)
    rn = (tile % tn) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    k_lo = split * KPS
    k_hi = tl.minimum(K, k_lo + KPS)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BK):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < k_hi),
                    other=0.0)
        b = tl.load(b_ptr + rn[:, None] * stride_bn + kk[None, :], mask=(rn[:, None] < N) & (kk[None, :] < k_hi),
                    other=0.0)
        acc = tl.dot(a, tl.trans(b), acc)
    tl.atomic_add(ws_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def cast_out(ws_ptr, c_ptr, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(c_ptr + offs, tl.load(ws_ptr + offs, mask=offs < numel).to(tl.bfloat16), mask=offs < numel)


@triton.jit
def gemv_hinted(a_ptr, b_ptr, c_ptr, N, K, BN: tl.constexpr, BK: tl.constexpr):
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    acc = tl.zeros((BN,), dtype=tl.float32)
    for k0 in tl.range(0, K, BK, num_stages=5):
        kk = k0 + tl.arange(0, BK)
        w = tl.load(b_ptr + rn[:, None] * K + kk[None, :], mask=rn[:, None] < N, eviction_policy="evict_first")
        x = tl.load(a_ptr + kk, eviction_policy="evict_last")
        acc += tl.sum(w.to(tl.float32) * x.to(tl.float32)[None, :], axis=1)
    tl.store(c_ptr + rn, acc.to(tl.bfloat16), mask=rn < N)


@triton.jit
def streamk_tiles(a_ptr, b_ptr, ws_ptr, M, N, K, P, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    p = tl.program_id(0)
    kit = tl.cdiv(K, BK)
    total = tl.cdiv(M, BM) * tl.cdiv(N, BN) * kit
    it = p * total // P
    end = (p + 1) * total // P
    while it < end:
        tile = it // kit
        last = tl.minimum(kit, it % kit + end - it)
        rm = (tile // tl.cdiv(N, BN)) * BM + tl.arange(0, BM)
        rn = (tile % tl.cdiv(N, BN)) * BN + tl.arange(0, BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(it % kit, last):
            kk = kt * BK + tl.arange(0, BK)
            acc = tl.dot(tl.load(a_ptr + rm[:, None] * K + kk[None, :]), tl.trans(tl.load(b_ptr + rn[:, None] * K + kk[None, :])), acc)
        tl.atomic_add(ws_ptr + rm[:, None] * N + rn[None, :], acc)
        it += last - it % kit


def kernel(A, B):
    M, K = A.shape
    N = B.shape[0]
    C = torch.empty((M, N), device=A.device, dtype=A.dtype)
    if False:
        gemv_hinted[(triton.cdiv(N, 64),)](A, B, C, N, K, BN=64, BK=256)
        return C
    sms = torch.cuda.get_device_properties(A.device).multi_processor_count
    BM, BN, BK = 64, 64, 64
    tiles = triton.cdiv(M, BM) * triton.cdiv(N, BN)
    S = max(1, min(triton.cdiv(2 * sms, tiles), K // 1024))
    kps = triton.cdiv(triton.cdiv(K, S), BK) * BK
    ws = torch.zeros((M, N), device=A.device, dtype=torch.float32)
    splitk_tiles[(tiles, triton.cdiv(K, kps))](A, B, ws, M, N, K, kps, A.stride(0), B.stride(0), BM=BM, BN=BN, BK=BK,
                                              num_warps=4, num_stages=3)
    cast_out[(triton.cdiv(M * N, 1024),)](ws, C, M * N, BLOCK=1024)
    return C
