"""Implicit GEMM on tensor cores. Grouped tile order (GROUP_M pixel tiles down each filter band); the tile's
pixels decomposed once into input corners and 64-bit row bases; one flat reduction loop over R*S channel-chunk
steps whose (r, s, c0) counters advance by comparison; per-tap masks from the corners; C % 8 alignment and
contiguity passed as hints. Autotuned over 128x128/128x256/256x64 tiles with 3-4 stages on (M, K, C, R, S)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _tile_of(pid, num_m, num_n, GROUP_M: tl.constexpr):
    per_group = GROUP_M * num_n
    g = pid // per_group
    m_first = g * GROUP_M
    height = tl.minimum(num_m - m_first, GROUP_M)
    return m_first + (pid % per_group) % height, (pid % per_group) // height


@triton.autotune(
    configs=[
        triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=4),
        triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BM": 256, "BN": 64, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=4),
        triton.Config({"BM": 128, "BN": 64, "BK": 32, "GROUP_M": 8}, num_warps=4, num_stages=4),
    ],
    key=["M", "K", "C", "R", "S"],
)
@triton.jit
def _conv_igemm(x_ptr, w_ptr, y_ptr, M, H, W, C, K, P, Q, conv_stride, pad,
                R: tl.constexpr, S: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                GROUP_M: tl.constexpr):
    pid_m, pid_n = _tile_of(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(K, BN), GROUP_M)
    rows = pid_m * BM + tl.arange(0, BM)
    live = rows < M
    img = rows // (P * Q)
    pq = rows % (P * Q)
    top = (pq // Q) * conv_stride - pad
    left = (pq % Q) * conv_stride - pad
    base = ((img.to(tl.int64) * H + top) * W + left) * C
    filt = pid_n * BN + tl.arange(0, BN)
    f_base = filt.to(tl.int64) * (R * S * C)
    lane_c = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    r = 0
    s = 0
    c0 = 0
    for _ in range(R * S * tl.cdiv(C, BK)):
        ok = live & (top + r >= 0) & (top + r < H) & (left + s >= 0) & (left + s < W)
        ch = tl.max_contiguous(tl.multiple_of(c0 + lane_c, 8), BK)
        c_ok = ch < C
        a = tl.load(x_ptr + base[:, None] + ((r * W + s) * C + ch)[None, :], mask=ok[:, None] & c_ok[None, :],
                    other=0.0)
        b = tl.load(w_ptr + f_base[:, None] + ((r * S + s) * C + ch)[None, :],
                    mask=(filt[:, None] < K) & c_ok[None, :], other=0.0)
        acc = tl.dot(a, tl.trans(b), acc)
        c0 += BK
        step_tap = c0 >= C
        c0 = tl.where(step_tap, 0, c0)
        s = tl.where(step_tap, s + 1, s)
        step_row = s >= S
        s = tl.where(step_row, 0, s)
        r = tl.where(step_row, r + 1, r)
    out = y_ptr + rows.to(tl.int64)[:, None] * K + filt[None, :]
    tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=live[:, None] & (filt[None, :] < K))


def kernel(x, w, *, stride, pad):
    N, H, W, C = x.shape
    K, R, S, _ = w.shape
    P = (H + 2 * pad - R) // stride + 1
    Q = (W + 2 * pad - S) // stride + 1
    M = N * P * Q
    y = torch.empty((N, P, Q, K), dtype=x.dtype, device=x.device)
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(K, meta["BN"]),)
    _conv_igemm[grid](x, w.contiguous(), y, M, H, W, C, K, P, Q, stride, pad, R=R, S=S)
    return y
