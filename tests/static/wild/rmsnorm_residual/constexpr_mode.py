"""One add + RMSNorm kernel with two modes selected on the host through a constexpr: MODE 0 keeps the row in
registers, MODE 1 tiles long rows in two passes (pass 1 adds, stores residual_out with evict_last and sums the
squares in fp32; pass 2 re-reads residual_out and writes y). Fixed 4 warps; rsqrt once per row."""
import torch
import triton
import triton.language as tl

REGISTER_ROW_LIMIT = 16384


@triton.jit
def _rmsnorm_modes(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, stride, eps, BLOCK: tl.constexpr, MODE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride
    r_row = r_ptr + row * stride
    ro_row = ro_ptr + row * stride
    y_row = y_ptr + row * stride
    if MODE == 0:
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        h = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32) + \
            tl.load(r_row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(ro_row + cols, h.to(ro_ptr.dtype.element_ty), mask=mask)
        rstd = tl.math.rsqrt(tl.sum(h * h, axis=0) / N + eps)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (h * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for off in tl.range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            mask = cols < N
            h = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32) + \
                tl.load(r_row + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(ro_row + cols, h.to(ro_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_last")
            acc += h * h
        rstd = tl.math.rsqrt(tl.sum(acc, axis=0) / N + eps)
        for off in tl.range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            mask = cols < N
            h = tl.load(ro_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + cols, (h * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x, residual, w):
    M, N = x.shape
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    block = triton.next_power_of_2(N)
    mode = 0 if block <= REGISTER_ROW_LIMIT else 1
    if mode == 1:
        block = 4096
    _rmsnorm_modes[(M,)](x, residual, w, y, residual_out, N, x.stride(0), 1e-6, BLOCK=block, MODE=mode,
                         num_warps=4)
    return y, residual_out
