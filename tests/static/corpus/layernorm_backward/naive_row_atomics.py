"""Naive LayerNorm backward: one program per row with the whole row in registers; dx in closed form from the
saved mean/rstd; dw and db accumulated with one fp32 atomic per element per row."""
import torch
import triton
import triton.language as tl


@triton.jit
def ln_bwd_row_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, N, stride,
                      BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.0)
    wdy = w * dy
    c1 = tl.sum(wdy, axis=0) / N
    c2 = tl.sum(wdy * xhat, axis=0) / N
    dx = (wdy - (xhat * c2 + c1)) * rstd
    tl.store(dx_ptr + row * stride + cols, dx.to(tl.bfloat16), mask=mask)
    tl.atomic_add(dw_ptr + cols, dy * xhat, mask=mask)
    tl.atomic_add(db_ptr + cols, dy, mask=mask)


def kernel(dy, x, w, mean, rstd):
    M, N = x.shape
    dx = torch.empty_like(x)
    dw = torch.zeros(N, dtype=torch.float32, device=x.device)
    db = torch.zeros(N, dtype=torch.float32, device=x.device)
    ln_bwd_row_kernel[(M,)](dy, x, w, mean, rstd, dx, dw, db, N, x.stride(0), BLOCK_N=triton.next_power_of_2(N))
    return dx, dw, db
