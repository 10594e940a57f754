"""NHWC implicit-GEMM convolution: one flat reduction loop over R*S*cdiv(C, BK) steps (channels fastest).

M = N*P*Q output pixels, N_gemm = K filters, reduction R*S*C. Each program owns BM pixels x BN filters, in grouped
order over pixel tiles. The pixel -> (n, p, q) split and the h/w bases are computed once; each step derives its
scalar (r, s, c0) from the step counter, forms the padding mask from h_base + r and w_base + s, and loads BK
contiguous channels (hinted as multiples of 8) of x and of the filter. The flat loop is pipelined with 4 stages,
so even C = 64 (one chunk per tap) overlaps the gathers with the MMAs.
"""
import torch
import triton
import triton.language as tl

CONV_CONFIGS = [
    triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=4),
    triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
    triton.Config({"BM": 256, "BN": 64, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=4),
    triton.Config({"BM": 128, "BN": 64, "BK": 32, "GROUP_M": 8}, num_warps=4, num_stages=4),
]


@triton.autotune(configs=CONV_CONFIGS, key=["NPQ", "K", "C", "R", "S"])
@triton.jit
def _conv_fprop(x_ptr, w_ptr, y_ptr, NPQ, H, W, C, K, P, Q, R, S, stride, pad,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(NPQ, BM)
    num_pid_n = tl.cdiv(K, BN)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    gm = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % gm
    pid_n = (pid % in_group) // gm

    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_c = tl.arange(0, BK)
    n_img = offs_m // (P * Q)
    pq = offs_m % (P * Q)
    h_base = (pq // Q) * stride - pad
    w_base = (pq % Q) * stride - pad
    x_row = n_img.to(tl.int64) * H * W * C
    m_ok = offs_m < NPQ
    n_ok = offs_n < K

    c_chunks = tl.cdiv(C, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for step in tl.range(0, R * S * c_chunks, num_stages=4):
        rs = step // c_chunks
        c0 = (step - rs * c_chunks) * BK
        r = rs // S
        s = rs - r * S
        h = h_base + r
        w = w_base + s
        ok = m_ok & (h >= 0) & (h < H) & (w >= 0) & (w < W)
        cs = tl.max_contiguous(tl.multiple_of(c0 + offs_c, 8), BK)
        a = tl.load(x_ptr + (x_row + (h * W + w) * C)[:, None] + cs[None, :],
                    mask=ok[:, None] & (cs[None, :] < C), other=0.0)
        b = tl.load(w_ptr + (offs_n * (R * S * C) + rs * C)[:, None] + cs[None, :],
                    mask=n_ok[:, None] & (cs[None, :] < C), other=0.0)
        acc = tl.dot(a, tl.trans(b), acc)
    y = y_ptr + offs_m[:, None].to(tl.int64) * K + offs_n[None, :]
    tl.store(y, acc.to(tl.bfloat16), mask=m_ok[:, None] & n_ok[None, :])


class ImplicitGemmConv:
    def forward(self, x, w, stride=1, pad=1):
        N, H, W, C = x.shape
        K, R, S, _ = w.shape
        assert C % 8 == 0, "16-byte channel chunks"
        P = (H + 2 * pad - R) // stride + 1
        Q = (W + 2 * pad - S) // stride + 1
        y = torch.empty((N, P, Q, K), device=x.device, dtype=x.dtype)
        npq = N * P * Q
        grid = lambda meta: (triton.cdiv(npq, meta["BM"]) * triton.cdiv(K, meta["BN"]),)
        _conv_fprop[grid](x, w, y, npq, H, W, C, K, P, Q, R, S, stride, pad)
        return y

    __call__ = forward


kernel = ImplicitGemmConv()
