"""fp8 block-scaled GEMM, "native fp8 with per-block promotion" (agent submission).

What runs: each K block's fp8 tiles are dequantized in registers (converted to bf16 and multiplied by their
scales) and fed to a bf16 tl.dot that accumulates across the whole K loop. BK is 128, so the scales are one
vector / one scalar per iteration, loaded next to the tiles. One program per tile, row-major order.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _native_fp8_promoted(a_ptr, b_ptr, as_ptr, bs_ptr, c_ptr, M, N, K, stride_as, stride_bs,
                         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    num_n = tl.cdiv(N, BN)
    pid_m = pid // num_n
    pid_n = pid % num_n
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc_promoted = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in range(0, K // BK):
        a = tl.load(a_ptr + rm[:, None] * K + (kb * BK + rk)[None, :], mask=rm[:, None] < M, other=0.0)
        b = tl.load(b_ptr + rn[:, None] * K + (kb * BK + rk)[None, :], mask=rn[:, None] < N, other=0.0)
        sa = tl.load(as_ptr + rm * stride_as + kb, mask=rm < M, other=0.0)
        sb = tl.load(bs_ptr + (pid_n * BN // 128) * stride_bs + kb)
        a16 = (a.to(tl.float32) * sa[:, None]).to(tl.bfloat16)
        b16 = (b.to(tl.float32) * sb).to(tl.bfloat16)
        acc_promoted = tl.dot(a16, tl.trans(b16), acc_promoted)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc_promoted.to(tl.bfloat16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def kernel(A, B, a_s, b_s):
    M, K = A.shape
    N = B.shape[0]
    C = torch.empty((M, N), device=A.device, dtype=torch.bfloat16)
    BM, BN, BK = 128, 128, 128
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    _native_fp8_promoted[grid](A, B, a_s, b_s, C, M, N, K, a_s.stride(0), b_s.stride(0),
                               BM=BM, BN=BN, BK=BK, num_warps=8, num_stages=3)
    return C
