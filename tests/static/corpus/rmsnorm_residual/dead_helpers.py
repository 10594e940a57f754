"""A fused row kernel runs; a tiled two-pass kernel and a persistent kernel with cache hints are defined in the
same file but never launched."""
import torch
import triton
import triton.language as tl


@triton.jit
def _row(x_ptr, r_ptr, w_ptr, y_ptr, o_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    h = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(o_ptr + row * N + cols, h.to(o_ptr.dtype.element_ty), mask=m)
    rstd = tl.rsqrt(tl.sum(h * h, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (h * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _tiled_two_pass(x_ptr, r_ptr, w_ptr, y_ptr, o_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in tl.range(0, N, BLOCK):
        cols = s + tl.arange(0, BLOCK)
        h = tl.load(x_ptr + row * N + cols, mask=cols < N, eviction_policy="evict_first").to(tl.float32) + \
            tl.load(r_ptr + row * N + cols, mask=cols < N, eviction_policy="evict_first").to(tl.float32)
        tl.store(o_ptr + row * N + cols, h, mask=cols < N)
        acc += h * h
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for s in tl.range(0, N, BLOCK):
        cols = s + tl.arange(0, BLOCK)
        h = tl.load(o_ptr + row * N + cols, mask=cols < N)
        w = tl.load(w_ptr + cols, mask=cols < N, eviction_policy="evict_last")
        tl.store(y_ptr + row * N + cols, h * rstd * w, mask=cols < N)


@triton.jit
def _persistent(x_ptr, w_ptr, y_ptr, M, N, P: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    w = tl.load(w_ptr + cols, mask=cols < N, eviction_policy="evict_last")
    for row in tl.range(tl.program_id(0), M, P):
        x = tl.load(x_ptr + row * N + cols, mask=cols < N)
        tl.store(y_ptr + row * N + cols, x * w, mask=cols < N)


def _long_rows(x, residual, w, y, res_out, eps):
    M, N = x.shape
    _tiled_two_pass[(M,)](x, residual, w, y, res_out, N, eps, BLOCK=4096)


def kernel(x, residual, w, *, eps=1e-6):
    M, N = x.shape
    y = torch.empty_like(x)
    res_out = torch.empty_like(x)
    _row[(M,)](x, residual, w, y, res_out, N, eps, BLOCK=triton.next_power_of_2(N), num_warps=8)
    return y, res_out
