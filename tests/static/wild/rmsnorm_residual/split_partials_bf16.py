"""Add + RMSNorm split across programs per row: stage 1 adds in fp32, writes residual_out and a per-chunk sum
of squares, but the partials go to a workspace allocated in the input dtype (bf16/fp16), so they are rounded
before stage 2 sums them; stage 2 re-reads residual_out and scales by rsqrt once per program."""
import torch
import triton
import triton.language as tl

CHUNK = 2048


@triton.jit
def _add_and_partial_sumsq(x_ptr, r_ptr, ro_ptr, part_ptr, N, stride, C, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    cols = c * CHUNK + tl.arange(0, CHUNK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    h = x + r
    tl.store(ro_ptr + row * stride + cols, h.to(ro_ptr.dtype.element_ty), mask=mask)
    tl.store(part_ptr + row * C + c, tl.sum(h * h, axis=0))


@triton.jit
def _scale(ro_ptr, w_ptr, y_ptr, part_ptr, N, stride, C, eps, CHUNK: tl.constexpr, C_POW2: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    cc = tl.arange(0, C_POW2)
    parts = tl.load(part_ptr + row * C + cc, mask=cc < C, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(parts, axis=0) / N + eps)
    cols = c * CHUNK + tl.arange(0, CHUNK)
    mask = cols < N
    h = tl.load(ro_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, (h * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x, residual, w):
    M, N = x.shape
    C = triton.cdiv(N, CHUNK)
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    partials = torch.empty((M, C), device=x.device, dtype=x.dtype)
    _add_and_partial_sumsq[(M, C)](x, residual, residual_out, partials, N, x.stride(0), C, CHUNK=CHUNK)
    _scale[(M, C)](residual_out, w, y, partials, N, x.stride(0), C, 1e-6, CHUNK=CHUNK,
                   C_POW2=triton.next_power_of_2(C))
    return y, residual_out
