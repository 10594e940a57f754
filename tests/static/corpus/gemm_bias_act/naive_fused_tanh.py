"""One kernel with the epilogue fused: after the K loop the bias is loaded once and the GELU uses libdevice.tanh.
Fixed 128x128x64 tiles, one program per tile."""
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)


@triton.jit
def gemm_bias_gelu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BN)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + kk[None, :],
                    mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + offs_n[:, None] * stride_wn + kk[None, :],
                    mask=(offs_n[:, None] < N) & (kk[None, :] < K), other=0.0)
        acc = tl.dot(x, tl.trans(w), acc)
    bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    u = acc + bias[None, :]
    y = 0.5 * u * (1.0 + libdevice.tanh(SQRT_2_OVER_PI * (u + 0.044715 * u * u * u)))
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :]
    tl.store(y_ptrs, y.to(tl.bfloat16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def kernel(X, W, b):
    M, K = X.shape
    N = W.shape[0]
    Y = torch.empty((M, N), device=X.device, dtype=X.dtype)
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
    gemm_bias_gelu_kernel[grid](X, W, b, Y, M, N, K, X.stride(0), W.stride(0), Y.stride(0),
                                BM=128, BN=128, BK=64, num_warps=8, num_stages=3)
    return Y
