"""Naive: each K block's fp8 tiles are dequantized in registers (fp32 times the block scales, then bf16) and fed
to a bf16 tl.dot that accumulates over all of K. 128x128x128 tiles, one program per tile in row-major order."""
import torch
import triton
import triton.language as tl


@triton.jit
def dequant_gemm(a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                 stride_asm, stride_bsn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BN)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in range(0, K // BK):
        kk = kb * BK + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + kk[None, :], mask=offs_m[:, None] < M, other=0.0)
        b = tl.load(b_ptr + offs_n[:, None] * stride_bn + kk[None, :], mask=offs_n[:, None] < N, other=0.0)
        sa = tl.load(as_ptr + offs_m * stride_asm + kb, mask=offs_m < M, other=0.0)
        sb = tl.load(bs_ptr + (pid_n * BN // 128) * stride_bsn + kb)
        a16 = (a.to(tl.float32) * sa[:, None]).to(tl.bfloat16)
        b16 = (b.to(tl.float32) * sb).to(tl.bfloat16)
        acc = tl.dot(a16, tl.trans(b16), acc)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(tl.bfloat16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def kernel(A, B, a_s, b_s):
    M, K = A.shape
    N = B.shape[0]
    C = torch.empty((M, N), device=A.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
    dequant_gemm[grid](A, B, C, a_s, b_s, M, N, K, A.stride(0), B.stride(0), C.stride(0), a_s.stride(0),
                       b_s.stride(0), BM=128, BN=128, BK=128, num_warps=8, num_stages=3)
    return C
