"""Implicit GEMM, naively: tl.dot tiles of 64 pixels x 64 filters over a flat reduction index kk = k0 + arange(BK);
every step decomposes kk into (r, s, c) and the tile's pixels into (n, p, q) again with // and %, and rebuilds
the halo mask per element."""
import torch
import triton
import triton.language as tl


@triton.jit
def _conv_naive(x_ptr, w_ptr, y_ptr, M, H, W, C, K, P, Q, R, S, conv_stride, pad,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    RSC = R * S * C
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, RSC, BK):
        kk = k0 + offs_k
        c = kk % C
        s = (kk // C) % S
        r = kk // (S * C)
        n = offs_m // (P * Q)
        p = (offs_m // Q) % P
        q = offs_m % Q
        h = p[:, None] * conv_stride + r[None, :] - pad
        wi = q[:, None] * conv_stride + s[None, :] - pad
        ok = (offs_m[:, None] < M) & (kk[None, :] < RSC) & (h >= 0) & (h < H) & (wi >= 0) & (wi < W)
        a = tl.load(x_ptr + ((n[:, None] * H + h) * W + wi) * C + c[None, :], mask=ok, other=0.0)
        b = tl.load(w_ptr + offs_n[None, :] * RSC + kk[:, None], mask=(offs_n[None, :] < K) & (kk[:, None] < RSC),
                    other=0.0)
        acc += tl.dot(a, b)
    tl.store(y_ptr + offs_m[:, None] * K + offs_n[None, :], acc.to(tl.bfloat16),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < K))


def kernel(x, w, *, stride, pad):
    N, H, W, C = x.shape
    K, R, S, _ = w.shape
    P = (H + 2 * pad - R) // stride + 1
    Q = (W + 2 * pad - S) // stride + 1
    M = N * P * Q
    y = torch.empty((N, P, Q, K), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(M, 64), triton.cdiv(K, 64))
    _conv_naive[grid](x, w, y, M, H, W, C, K, P, Q, R, S, stride, pad, BM=64, BN=64, BK=32)
    return y
