"""LayerNorm in two kernels: a statistics kernel (centered variance over tiles, rstd once per row) writes
mean/rstd, and a normalisation kernel re-reads x."""
import torch
import triton
import triton.language as tl


@triton.jit
def stats_kernel(x_ptr, mean_ptr, rstd_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
        d = tl.where(cols < N, x - mean, 0.0)
        acc2 += d * d
    var = tl.sum(acc2, axis=0) / N
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, 1.0 / tl.sqrt(var + eps))


@triton.jit
def norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        m = cols < N
        x = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=m)
        b = tl.load(b_ptr + cols, mask=m)
        tl.store(y_ptr + row * N + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=m)


def kernel(x, w, b):
    M, N = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(M, device=x.device, dtype=torch.float32)
    rstd = torch.empty(M, device=x.device, dtype=torch.float32)
    stats_kernel[(M,)](x, mean, rstd, N, 1e-5, BLOCK=1024)
    norm_kernel[(M,)](x, w, b, y, mean, rstd, N, BLOCK=1024)
    return y, mean, rstd
