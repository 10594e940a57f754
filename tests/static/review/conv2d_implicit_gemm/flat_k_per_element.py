"""Implicit-GEMM conv, "rs-outer / incremental masks / pipelined" per its comments (agent submission).

What runs: the reduction index k = (r*S + s)*C + c is split per element inside the K loop (k % C, k // C,
// S, % S) and the padding mask recomputed from it every step; one 64x64 tile, 2 stages, row-major tile order,
no alignment hints.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _conv_rs_outer_incremental(x_ptr, w_ptr, y_ptr, NPQ, H, W, C, K, P, Q, R, S, stride, pad,
                               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    num_n = tl.cdiv(K, BN)
    pid_m = pid // num_n
    pid_n = pid % num_n
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    n_img = offs_m // (P * Q)
    p = (offs_m // Q) % P
    q = offs_m % Q
    red = R * S * C
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, red, BK):
        k = k0 + tl.arange(0, BK)
        c = k % C
        rs = k // C
        r = rs // S
        s = rs % S
        h = p[:, None] * stride + r[None, :] - pad
        w = q[:, None] * stride + s[None, :] - pad
        inc_mask = (offs_m[:, None] < NPQ) & (k[None, :] < red) & (h >= 0) & (h < H) & (w >= 0) & (w < W)
        a = tl.load(x_ptr + ((n_img[:, None] * H + h) * W + w) * C + c[None, :], mask=inc_mask, other=0.0)
        b = tl.load(w_ptr + offs_n[:, None] * red + k[None, :], mask=(offs_n[:, None] < K) & (k[None, :] < red),
                    other=0.0)
        acc = tl.dot(a, tl.trans(b), acc)
    tl.store(y_ptr + offs_m[:, None] * K + offs_n[None, :], acc.to(tl.bfloat16),
             mask=(offs_m[:, None] < NPQ) & (offs_n[None, :] < K))


def kernel(x, w, stride=1, pad=1):
    N, H, W, C = x.shape
    K, R, S, _ = w.shape
    P = (H + 2 * pad - R) // stride + 1
    Q = (W + 2 * pad - S) // stride + 1
    y = torch.empty((N, P, Q, K), device=x.device, dtype=x.dtype)
    npq = N * P * Q
    grid = (triton.cdiv(npq, 64) * triton.cdiv(K, 64),)
    _conv_rs_outer_incremental[grid](x, w, y, npq, H, W, C, K, P, Q, R, S, stride, pad, BM=64, BN=64, BK=64,
                                     num_warps=4, num_stages=2)
    return y
