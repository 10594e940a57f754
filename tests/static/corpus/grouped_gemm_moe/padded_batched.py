"""Padded batched GEMM: the host copies every expert's rows into a zero-padded [E, max_rows, K] buffer (max_rows
read with .item()), one launch over an (expert, m-tile, n-tile) grid sized for the largest expert, programs past
an expert's row count return at once; 64-bit expert base for W and the padded buffers."""
import torch
import triton
import triton.language as tl


@triton.jit
def _batched_gemm(xp_ptr, w_ptr, yp_ptr, counts_ptr, N, K, max_rows,
                  stride_we, stride_wn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    e = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_n = tl.program_id(2)
    rows = tl.load(counts_ptr + e)
    if pid_m * BM >= rows:
        return
    e64 = e.to(tl.int64)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    x_base = xp_ptr + e64 * max_rows * K
    w_base = w_ptr + e64 * stride_we
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(x_base + offs_m[:, None] * K + (k0 + offs_k)[None, :],
                    mask=(k0 + offs_k)[None, :] < K, other=0.0)
        b = tl.load(w_base + offs_n[:, None] * stride_wn + (k0 + offs_k)[None, :],
                    mask=(offs_n[:, None] < N) & ((k0 + offs_k)[None, :] < K), other=0.0)
        acc = tl.dot(a, tl.trans(b), acc)
    y_base = yp_ptr + e64 * max_rows * N
    tl.store(y_base + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.bfloat16),
             mask=(offs_m[:, None] < rows) & (offs_n[None, :] < N))


def kernel(X, W, expert_offsets):
    T, K = X.shape
    E, N, _ = W.shape
    counts = (expert_offsets[1:] - expert_offsets[:-1]).to(torch.int32)
    max_rows = int(counts.max().item())
    Y = torch.empty((T, N), dtype=X.dtype, device=X.device)
    if max_rows == 0:
        return Y
    Xp = torch.zeros((E, max_rows, K), dtype=X.dtype, device=X.device)
    offs = expert_offsets.tolist()
    for e in range(E):
        Xp[e, : offs[e + 1] - offs[e]] = X[offs[e]:offs[e + 1]]
    Yp = torch.empty((E, max_rows, N), dtype=X.dtype, device=X.device)
    BM, BN, BK = 64, 128, 64
    grid = (E, triton.cdiv(max_rows, BM), triton.cdiv(N, BN))
    _batched_gemm[grid](Xp, W, Yp, counts, N, K, max_rows, W.stride(0), W.stride(1),
                        BM=BM, BN=BN, BK=BK, num_warps=4, num_stages=3)
    for e in range(E):
        Y[offs[e]:offs[e + 1]] = Yp[e, : offs[e + 1] - offs[e]]
    return Y
