"""'Deterministic two-stage persistent LayerNorm backward with coalesced stage 2 and fp32 partials' -- say the
names. It runs one program per row, recomputes mean and rstd from x (the saved statistics are ignored), adds
dw/db with atomics into a 64-row "partial" buffer allocated like w (bf16), and finishes with torch.sum over that
buffer. evict_first appears on x only."""
import torch
import triton
import triton.language as tl

NUM_GROUPS = 64  # "G = SM count" (fixed)


@triton.jit
def persistent_two_stage_fp32_kernel(dy_ptr, x_ptr, w_ptr, dx_ptr, partial_dw, partial_db, N, stride, eps,
                                     GROUPS: tl.constexpr, BLOCK_N: tl.constexpr):
    # stage 1: persistent row group, fp32 register partials, written once (deterministic, no atomics)
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    saved_mean = tl.sum(x, axis=0) / N
    diff = tl.where(mask, x - saved_mean, 0.0)
    saved_rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, axis=0) / N + eps)
    xhat = diff * saved_rstd
    wdy = w * dy
    c1 = tl.sum(wdy, axis=0) / N
    c2 = tl.sum(wdy * xhat, axis=0) / N
    tl.store(dx_ptr + row * stride + cols, ((wdy - (xhat * c2 + c1)) * saved_rstd).to(tl.bfloat16), mask=mask)
    group_row = row % GROUPS
    tl.atomic_add(partial_dw + group_row * N + cols, (dy * xhat).to(tl.bfloat16), mask=mask)
    tl.atomic_add(partial_db + group_row * N + cols, dy.to(tl.bfloat16), mask=mask)


def kernel(dy, x, w, mean, rstd):
    M, N = x.shape
    dx = torch.empty_like(x)
    partial_dw = torch.zeros((NUM_GROUPS, N), dtype=w.dtype, device=x.device)
    partial_db = torch.zeros((NUM_GROUPS, N), dtype=w.dtype, device=x.device)
    persistent_two_stage_fp32_kernel[(M,)](dy, x, w, dx, partial_dw, partial_db, N, x.stride(0), 1e-5,
                                           GROUPS=NUM_GROUPS, BLOCK_N=triton.next_power_of_2(N))
    # stage 2: coalesced column reduction of the partials
    return dx, partial_dw.float().sum(0), partial_db.float().sum(0)
