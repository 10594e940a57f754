"""One program per row computing dx in closed form and writing dy*xhat to an [M, N] fp32 temporary; dw and db
are torch.sum over rows. A persistent stage-1 kernel, a coalesced stage-2 kernel and an SM-count helper are
defined but never launched or called."""
import torch
import triton
import triton.language as tl


def _num_groups(x):
    return 2 * torch.cuda.get_device_properties(x.device).multi_processor_count


@triton.jit
def _persistent_stage1(DY, X, PDW, M, N, G, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for row in tl.range(pid, M, G):
        acc += tl.load(DY + row * N + cols, eviction_policy="evict_first").to(tl.float32)
    tl.store(PDW + pid * N + cols, acc)


@triton.jit
def _stage2(PDW, DW, G, N, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for g in range(G):
        acc += tl.load(PDW + g * N + cols, mask=cols < N, other=0.0)
    tl.store(DW + cols, acc, mask=cols < N)


@triton.jit
def ln_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, prod_ptr, N, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.0)
    g = dy * w
    c1 = tl.sum(g, axis=0) / N
    c2 = tl.sum(g * xhat, axis=0) / N
    tl.store(dx_ptr + row * stride + cols, (rstd * (g - c1 - xhat * c2)).to(tl.bfloat16), mask=mask)
    tl.store(prod_ptr + row * N + cols, dy * xhat, mask=mask)


def kernel(dy, x, w, mean, rstd):
    M, N = x.shape
    dx = torch.empty_like(x)
    prod = torch.empty((M, N), dtype=torch.float32, device=x.device)
    ln_bwd_kernel[(M,)](dy, x, w, mean, rstd, dx, prod, N, x.stride(0), BLOCK_N=triton.next_power_of_2(N))
    return dx, prod.sum(0), dy.float().sum(0)
