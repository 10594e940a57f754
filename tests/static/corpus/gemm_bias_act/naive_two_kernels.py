"""Two kernels: a tiled tl.dot GEMM that writes the bf16 pre-activation C = X @ W^T, then an element-wise kernel
that re-reads C, adds the bias and applies tanh-GELU with libdevice.tanh."""
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def matmul_kernel(x_ptr, w_ptr, c_ptr, M, N, K, stride_xm, stride_wn, stride_cm,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :]
    w_ptrs = w_ptr + offs_n[:, None] * stride_wn + offs_k[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(x_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] + k < K), other=0.0)
        w = tl.load(w_ptrs, mask=(offs_n[:, None] < N) & (offs_k[None, :] + k < K), other=0.0)
        acc += tl.dot(x, tl.trans(w))
        x_ptrs += BK
        w_ptrs += BK
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def bias_gelu_kernel(c_ptr, b_ptr, y_ptr, numel, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    c = tl.load(c_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    bias = tl.load(b_ptr + offs % N, mask=mask, other=0.0).to(tl.float32)
    u = c + bias
    inner = 0.7978845608028654 * (u + 0.044715 * u * u * u)
    y = 0.5 * u * (1.0 + libdevice.tanh(inner))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def kernel(X, W, b):
    M, K = X.shape
    N = W.shape[0]
    C = torch.empty((M, N), device=X.device, dtype=X.dtype)
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
    matmul_kernel[grid](X, W, C, M, N, K, X.stride(0), W.stride(0), C.stride(0), BM=64, BN=64, BK=32, num_warps=4)
    Y = torch.empty_like(C)
    BLOCK = 1024
    bias_gelu_kernel[(triton.cdiv(M * N, BLOCK),)](C, b, Y, M * N, N, BLOCK=BLOCK, num_warps=4)
    return Y
