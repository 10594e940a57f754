"""Grouped GEMM as one Triton GEMM launch per expert: the host reads the offsets, skips empty experts and launches
a 64x64x32 tile kernel on each expert's slice of X (rows masked at the expert end)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _expert_gemm(x_ptr, w_ptr, y_ptr, row_start, rows, N, K, stride_xt, stride_wn, stride_yt,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    m_ok = offs_m < rows
    n_ok = offs_n < N
    x_ptrs = x_ptr + (row_start + offs_m)[:, None] * stride_xt + offs_k[None, :]
    w_ptrs = w_ptr + offs_n[:, None] * stride_wn + offs_k[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k_ok = (k0 + offs_k) < K
        a = tl.load(x_ptrs, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(w_ptrs, mask=n_ok[:, None] & k_ok[None, :], other=0.0)
        acc += tl.dot(a, tl.trans(b))
        x_ptrs += BK
        w_ptrs += BK
    y_ptrs = y_ptr + (row_start + offs_m)[:, None] * stride_yt + offs_n[None, :]
    tl.store(y_ptrs, acc.to(tl.bfloat16), mask=m_ok[:, None] & n_ok[None, :])


def kernel(X, W, expert_offsets):
    T, K = X.shape
    E, N, _ = W.shape
    Y = torch.empty((T, N), dtype=X.dtype, device=X.device)
    offs = expert_offsets.tolist()
    for e in range(E):
        rows = offs[e + 1] - offs[e]
        if rows == 0:
            continue
        grid = (triton.cdiv(rows, 64), triton.cdiv(N, 64))
        _expert_gemm[grid](X, W[e], Y, offs[e], rows, N, K, X.stride(0), W.stride(1), Y.stride(0),
                           BM=64, BN=64, BK=32, num_warps=4)
    return Y
