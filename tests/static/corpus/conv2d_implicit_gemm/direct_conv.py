"""Direct convolution on CUDA cores: one program per output pixel and BN filters; loops over r, s and 64-wide
channel chunks, the tap's validity from the pixel's input corner, products reduced with tl.sum (no tl.dot)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _direct(x_ptr, w_ptr, y_ptr, H, W, C, K, P, Q, conv_stride, pad,
            R: tl.constexpr, S: tl.constexpr, BN: tl.constexpr, BC: tl.constexpr):
    pix = tl.program_id(0)
    pid_k = tl.program_id(1)
    n = pix // (P * Q)
    p = (pix // Q) % P
    q = pix % Q
    h0 = p * conv_stride - pad
    w0 = q * conv_stride - pad
    ks = pid_k * BN + tl.arange(0, BN)
    cc = tl.arange(0, BC)
    acc = tl.zeros([BN], dtype=tl.float32)
    for r in range(R):
        for s in range(S):
            h = h0 + r
            wi = w0 + s
            inside = (h >= 0) & (h < H) & (wi >= 0) & (wi < W)
            for c0 in range(0, C, BC):
                c_ok = (c0 + cc) < C
                xv = tl.load(x_ptr + ((n * H + h) * W + wi) * C + c0 + cc, mask=inside & c_ok, other=0.0)
                wv = tl.load(w_ptr + ((ks[:, None] * R + r) * S + s) * C + c0 + cc[None, :],
                             mask=(ks[:, None] < K) & c_ok[None, :], other=0.0)
                acc += tl.sum(wv.to(tl.float32) * xv.to(tl.float32)[None, :], axis=1)
    tl.store(y_ptr + pix * K + ks, acc.to(tl.bfloat16), mask=ks < K)


def kernel(x, w, *, stride, pad):
    N, H, W, C = x.shape
    K, R, S, _ = w.shape
    P = (H + 2 * pad - R) // stride + 1
    Q = (W + 2 * pad - S) // stride + 1
    y = torch.empty((N, P, Q, K), dtype=x.dtype, device=x.device)
    BN = min(64, triton.next_power_of_2(K))
    _direct[(N * P * Q, triton.cdiv(K, BN))](x, w, y, H, W, C, K, P, Q, stride, pad, R=R, S=S, BN=BN, BC=64,
                                             num_warps=4)
    return y
