"""Block-scaled fp8 GEMM with a split-K decode path (vLLM-style launcher helpers).

One kernel, grid (tiles, SPLIT_K): tiles in grouped order, each program a contiguous range of 128-wide scale
blocks. Device tensor descriptors feed tl.dot the fp8 tiles as loaded; every block's fresh product is promoted
with one FMA, acc = fma(dot, a_s * b_s, acc). The host picks SPLIT_K from the SM count when M <= 64 (decode) and
1 otherwise; split partials go to an fp32 workspace by atomics and a small kernel casts it.
"""
import torch
import triton
import triton.language as tl

_BK = 128


@triton.jit
def _blockscaled_fp8(a_ptr, b_ptr, as_ptr, bs_ptr, out_ptr, M, N, K, stride_as, stride_bs,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                     SPLIT_K: tl.constexpr):
    tl.static_assert(BK == 128)
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    width = GROUP_M * num_pid_n
    group = pid // width
    first_m = group * GROUP_M
    gsize = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % gsize
    pid_n = (pid % width) // gsize
    m0 = pid_m * BM
    n0 = pid_n * BN
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    blocks = K // BK
    per = tl.cdiv(blocks, SPLIT_K)
    kb_lo = pid_k * per
    kb_hi = tl.minimum(kb_lo + per, blocks)
    rows = m0 + tl.arange(0, BM)
    cols = n0 + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in tl.range(kb_lo, kb_hi, num_stages=5):
        a = a_desc.load([m0, kb * BK])
        b = b_desc.load([n0, kb * BK])
        s_a = tl.load(as_ptr + rows * stride_as + kb, mask=rows < M, other=0.0)
        s_b = tl.load(bs_ptr + (n0 // 128) * stride_bs + kb)
        acc = tl.fma(tl.dot(a, b.T), s_a[:, None] * s_b, acc)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None] * N + cols[None, :]
    if SPLIT_K == 1:
        tl.store(out_ptr + offs, acc.to(tl.bfloat16), mask=mask)
    else:
        tl.atomic_add(out_ptr + offs, acc, mask=mask, sem="relaxed")


@triton.jit
def _cast_bf16(ws_ptr, c_ptr, total, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(ws_ptr + offs, mask=offs < total)
    tl.store(c_ptr + offs, v.to(tl.bfloat16), mask=offs < total)


def _split_for(M, N, K, sms):
    if M > 64:
        return 1, 128, 128, 8
    tiles = triton.cdiv(N, 64)
    return max(1, min(4, triton.cdiv(2 * sms, tiles), K // (8 * _BK))), 64, 64, 4


def _launch(A, B, a_s, b_s, C, split, bm, bn, warps):
    M, K = A.shape
    N = B.shape[0]
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), split)
    if split == 1:
        _blockscaled_fp8[grid](A, B, a_s, b_s, C, M, N, K, a_s.stride(0), b_s.stride(0),
                               BM=bm, BN=bn, BK=_BK, GROUP_M=8, SPLIT_K=1, num_warps=warps)
        return C
    ws = torch.zeros((M, N), device=A.device, dtype=torch.float32)
    _blockscaled_fp8[grid](A, B, a_s, b_s, ws, M, N, K, a_s.stride(0), b_s.stride(0),
                           BM=bm, BN=bn, BK=_BK, GROUP_M=8, SPLIT_K=split, num_warps=warps)
    _cast_bf16[(triton.cdiv(M * N, 1024),)](ws, C, M * N, BLOCK=1024)
    return C


def kernel(A, B, a_s, b_s):
    M, K = A.shape
    N = B.shape[0]
    C = torch.empty((M, N), device=A.device, dtype=torch.bfloat16)
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=A.device))
    sms = torch.cuda.get_device_properties(A.device).multi_processor_count
    split, bm, bn, warps = _split_for(M, N, K, sms)
    return _launch(A, B, a_s, b_s, C, split, bm, bn, warps)
