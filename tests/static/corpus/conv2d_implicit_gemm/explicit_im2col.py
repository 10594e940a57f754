"""Explicit im2col: a first kernel writes the [N*P*Q, R*S*C] patch matrix (every element index decomposed with
// and %), a second runs a plain 64x64x32 tl.dot GEMM against the filters viewed as [K, R*S*C]."""
import torch
import triton
import triton.language as tl


@triton.jit
def _im2col(x_ptr, col_ptr, total, H, W, C, P, Q, RSC, conv_stride, pad, S: tl.constexpr, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = idx < total
    m = idx // RSC
    kk = idx % RSC
    n = m // (P * Q)
    p = (m // Q) % P
    q = m % Q
    c = kk % C
    r = kk // (S * C)
    s = (kk // C) % S
    h = p * conv_stride + r - pad
    wi = q * conv_stride + s - pad
    inb = ok & (h >= 0) & (h < H) & (wi >= 0) & (wi < W)
    v = tl.load(x_ptr + ((n * H + h) * W + wi) * C + c, mask=inb, other=0.0)
    tl.store(col_ptr + idx, v, mask=ok)


@triton.jit
def _gemm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + rn[:, None] * K + (k0 + rk)[None, :], mask=(rn[:, None] < N) & ((k0 + rk)[None, :] < K),
                    other=0.0)
        acc = tl.dot(a, tl.trans(b), acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def kernel(x, w, *, stride, pad):
    N, H, W, C = x.shape
    K, R, S, _ = w.shape
    P = (H + 2 * pad - R) // stride + 1
    Q = (W + 2 * pad - S) // stride + 1
    M, RSC = N * P * Q, R * S * C
    cols = torch.empty((M, RSC), dtype=x.dtype, device=x.device)
    _im2col[(triton.cdiv(M * RSC, 1024),)](x, cols, M * RSC, H, W, C, P, Q, RSC, stride, pad, S=S, BLOCK=1024)
    y = torch.empty((N, P, Q, K), dtype=x.dtype, device=x.device)
    _gemm[(triton.cdiv(M, 64), triton.cdiv(K, 64))](cols, w.reshape(K, RSC), y, M, K, RSC, BM=64, BN=64, BK=32,
                                                    num_warps=4, num_stages=2)
    return y
