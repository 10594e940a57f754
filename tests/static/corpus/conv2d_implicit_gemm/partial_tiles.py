"""Implicit GEMM with proper tile ownership: the 128 pixels of a tile are decomposed into (n, p, q) once, the
input corners and row bases kept in registers; nested r / s / channel-chunk loops build each tap's mask from the
corners (no division in the loops). One fixed 128x64x32 tile, 2 stages, 2-D grid in launch order."""
import torch
import triton
import triton.language as tl


@triton.jit
def _conv_tiles(x_ptr, w_ptr, y_ptr, M, H, W, C, K, P, Q, conv_stride, pad,
                R: tl.constexpr, S: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_c = tl.arange(0, BK)
    m_ok = offs_m < M
    n_img = offs_m // (P * Q)
    rem = offs_m % (P * Q)
    hb = (rem // Q) * conv_stride - pad
    wb = (rem % Q) * conv_stride - pad
    row_base = ((n_img * H + hb) * W + wb) * C
    w_rows = offs_n * (R * S * C)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for r in range(R):
        for s in range(S):
            ok = m_ok & (hb + r >= 0) & (hb + r < H) & (wb + s >= 0) & (wb + s < W)
            tap = (r * W + s) * C
            for c0 in range(0, C, BK):
                ch = c0 + offs_c
                a = tl.load(x_ptr + row_base[:, None] + tap + ch[None, :], mask=ok[:, None] & (ch[None, :] < C),
                            other=0.0)
                b = tl.load(w_ptr + w_rows[:, None] + (r * S + s) * C + ch[None, :],
                            mask=(offs_n[:, None] < K) & (ch[None, :] < C), other=0.0)
                acc = tl.dot(a, tl.trans(b), acc)
    tl.store(y_ptr + offs_m[:, None] * K + offs_n[None, :], acc.to(tl.bfloat16),
             mask=m_ok[:, None] & (offs_n[None, :] < K))


def kernel(x, w, *, stride, pad):
    N, H, W, C = x.shape
    K, R, S, _ = w.shape
    P = (H + 2 * pad - R) // stride + 1
    Q = (W + 2 * pad - S) // stride + 1
    M = N * P * Q
    y = torch.empty((N, P, Q, K), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(M, 128), triton.cdiv(K, 64))
    _conv_tiles[grid](x, w, y, M, H, W, C, K, P, Q, stride, pad, R=R, S=S, BM=128, BN=64, BK=32,
                      num_warps=4, num_stages=2)
    return y
