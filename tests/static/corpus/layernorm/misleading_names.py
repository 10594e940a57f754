"""'Welford / Chan-merge LayerNorm with hoisted parameters' -- by name. The statistics are E[x^2] - E[x]^2, the
parameters are loaded per row, and the Welford kernel below is never launched."""
import torch
import triton
import triton.language as tl


@triton.jit
def welford_chan_layernorm(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, N, eps, BLOCK: tl.constexpr):
    # Welford: running (mean, m2) merged with Chan's formula; w/b hoisted (evict_last)
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    welford_mean = tl.sum(x, axis=0) / N
    chan_m2 = tl.sum(x * x, axis=0) / N - welford_mean * welford_mean
    rstd = tl.rsqrt(chan_m2 + eps)
    w_hoisted = tl.load(w_ptr + cols, mask=mask)
    b_hoisted = tl.load(b_ptr + cols, mask=mask)
    tl.store(y_ptr + row * N + cols, (x - welford_mean) * rstd * w_hoisted + b_hoisted, mask=mask)
    tl.store(mean_ptr + row, welford_mean)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def _welford_tiles(x_ptr, mean_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    n = 0.0
    mean = 0.0
    m2 = 0.0
    for off in range(0, N, BLOCK):
        x = tl.load(x_ptr + row * N + off + tl.arange(0, BLOCK))
        tmean = tl.sum(x, axis=0) / BLOCK
        delta = tmean - mean
        mean = mean + delta * BLOCK / (n + BLOCK)
        m2 = m2 + tl.sum((x - tmean) * (x - tmean), axis=0) + delta * delta * n * BLOCK / (n + BLOCK)
        n = n + BLOCK
    tl.store(mean_ptr + row, m2)


def kernel(x, w, b):
    M, N = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(M, device=x.device, dtype=torch.float32)
    rstd = torch.empty(M, device=x.device, dtype=torch.float32)
    welford_chan_layernorm[(M,)](x, w, b, y, mean, rstd, N, 1e-5, BLOCK=triton.next_power_of_2(N), num_warps=8)
    return y, mean, rstd
