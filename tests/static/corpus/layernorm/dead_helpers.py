"""A one-row-per-program LayerNorm (centered variance in registers) runs with fixed num_warps; a persistent
multi-row kernel with hoisted parameters and a Chan-merge helper are defined but never used."""
import torch
import triton
import triton.language as tl


@triton.jit
def _chan(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    n = n_a + n_b
    delta = mean_b - mean_a
    return n, mean_a + delta * n_b / n, m2_a + m2_b + delta * delta * n_a * n_b / n


@triton.jit
def _persistent_rows(x_ptr, w_ptr, b_ptr, y_ptr, M, N, P: tl.constexpr, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    w = tl.load(w_ptr + cols, eviction_policy="evict_last")
    b = tl.load(b_ptr + cols, eviction_policy="evict_last")
    for rb in tl.range(tl.program_id(0), tl.cdiv(M, ROWS), P):
        rows = rb * ROWS + tl.arange(0, ROWS)
        x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], eviction_policy="evict_first")
        mean = tl.sum(x, axis=1) / N
        tl.store(y_ptr + rows[:, None] * N + cols[None, :], (x - mean[:, None]) * w[None, :] + b[None, :])


@triton.jit
def _row(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / N
    rstd = tl.rsqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(y_ptr + row * N + cols, diff * rstd * w + b, mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


def kernel(x, w, b):
    M, N = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(M, device=x.device, dtype=torch.float32)
    rstd = torch.empty(M, device=x.device, dtype=torch.float32)
    _row[(M,)](x, w, b, y, mean, rstd, N, 1e-5, BLOCK=triton.next_power_of_2(N), num_warps=8)
    return y, mean, rstd
