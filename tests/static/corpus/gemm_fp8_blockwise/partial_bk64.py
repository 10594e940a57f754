"""fp8 tl.dot with a fresh partial per 64-wide K step, scaled by the scales of the 128-block it lies in
(kb = k // 128) and added to an fp32 accumulator. B is transposed to [K, N] on the host and loaded as [BK, BN]
tiles. Tutorial grouped order, one program per tile, 3 stages."""
import torch
import triton
import triton.language as tl


@triton.jit
def fp8_gemm_bk64(a_ptr, bt_ptr, c_ptr, as_ptr, bs_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  stride_asm, stride_bsn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    gsz = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % gsz
    pid_n = (pid % in_group) // gsz
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k0 + rk)[None, :], mask=rm[:, None] < M, other=0.0)
        b = tl.load(bt_ptr + (k0 + rk)[:, None] * stride_bk + rn[None, :], mask=rn[None, :] < N, other=0.0)
        kb = k0 // 128
        sa = tl.load(as_ptr + rm * stride_asm + kb, mask=rm < M, other=0.0)
        sb = tl.load(bs_ptr + (pid_n * BN // 128) * stride_bsn + kb)
        acc += tl.dot(a, b) * sa[:, None] * sb
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.bfloat16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def kernel(A, B, a_s, b_s):
    M, K = A.shape
    N = B.shape[0]
    Bt = B.t().contiguous()
    C = torch.empty((M, N), device=A.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
    fp8_gemm_bk64[grid](A, Bt, C, a_s, b_s, M, N, K, A.stride(0), Bt.stride(0), C.stride(0), a_s.stride(0),
                        b_s.stride(0), BM=128, BN=128, BK=64, GROUP_M=8, num_warps=8, num_stages=3)
    return C
