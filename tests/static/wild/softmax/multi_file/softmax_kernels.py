"""Helper module of the multi-file softmax: a fused row kernel (BLOCK = next_pow2(N), num_warps from the block)
and, for long rows, one program per row sweeping twice (online (m, s) with evict_last, then normalize). tl.exp,
one reciprocal per row."""
import torch
import triton
import triton.language as tl


@triton.jit
def _fused(x_ptr, y_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    inv = 1.0 / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride + cols, (e * inv).to(y_ptr.dtype.element_ty), mask=cols < N)


@triton.jit
def _two_sweep(x_ptr, y_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = -float("inf")
    s = 0.0
    for off in tl.range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=-float("inf"),
                    eviction_policy="evict_last").to(tl.float32)
        new_m = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - new_m) + tl.sum(tl.exp(x - new_m), axis=0)
        m = new_m
    inv = 1.0 / s
    for off in tl.range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * stride + cols, (tl.exp(x - m) * inv).to(y_ptr.dtype.element_ty), mask=cols < N)


def softmax_forward(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(N)
    if block <= 16384:
        warps = 4 if block <= 2048 else (8 if block <= 8192 else 16)
        _fused[(M,)](x, y, N, x.stride(0), BLOCK=block, num_warps=warps)
    else:
        _two_sweep[(M,)](x, y, N, x.stride(0), BLOCK=4096, num_warps=8)
    return y
