# task: layernorm
# expect: passed
# style: a tutorial-style launcher function (MAX_FUSED_SIZE from the element size, a block and num_warps picked
# style: from the row width); a constexpr mode picked on the host: rows that fit one block keep the row in
# style: registers for both passes, longer rows sweep column tiles; eps as a runtime float; reshape glue;
# style: mean and rstd written as fp32 side outputs
"""LayerNorm forward: one program per row. Pass 1 computes the mean, pass 2 the centered variance (two passes
avoid the cancellation of E[x^2] - mean^2), pass 3 writes (x - mean) * rstd * w + b."""

import torch
import triton
import triton.language as tl


@triton.jit
def _layer_norm_fwd(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride_x, stride_y, n_cols, eps,
                    BLOCK_SIZE: tl.constexpr, ONE_BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    if ONE_BLOCK:
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / n_cols
        xc = tl.where(mask, x - mean, 0.0)
        rstd = 1 / tl.sqrt(tl.sum(xc * xc, axis=0) / n_cols + eps)
        w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
        tl.store(y_row + cols, (xc * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
        for off in range(0, n_cols, BLOCK_SIZE):
            cols = off + tl.arange(0, BLOCK_SIZE)
            acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=0) / n_cols
        acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
        for off in range(0, n_cols, BLOCK_SIZE):
            cols = off + tl.arange(0, BLOCK_SIZE)
            x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
            xc = tl.where(cols < n_cols, x - mean, 0.0)
            acc += xc * xc
        rstd = 1 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
        for off in range(0, n_cols, BLOCK_SIZE):
            cols = off + tl.arange(0, BLOCK_SIZE)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
            b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
            tl.store(y_row + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


def layer_norm(x, weight, bias, eps=1e-5):
    x_arg = x.reshape(-1, x.shape[-1])
    M, N = x_arg.shape
    y = torch.empty_like(x_arg)
    mean = torch.empty((M,), dtype=torch.float32, device=x.device)
    rstd = torch.empty((M,), dtype=torch.float32, device=x.device)
    max_fused = 65536 // x.element_size()
    block = min(max_fused, triton.next_power_of_2(N))
    one_block = N <= block
    if not one_block:
        block = min(block, 1024)
    num_warps = min(max(block // 256, 1), 8)
    _layer_norm_fwd[(M,)](x_arg, y, weight.contiguous(), bias.contiguous(), mean, rstd, x_arg.stride(0),
                          y.stride(0), N, eps, BLOCK_SIZE=block, ONE_BLOCK=one_block, num_warps=num_warps)
    return y.reshape(x.shape), mean, rstd


def kernel(x, w, b):
    return layer_norm(x, w, b, 1e-5)
