"""Cross-entropy with an 'online' helper: one program per row, loss and gradient in the same kernel.

The helper called _online_lse walks the row once for the max and once more for the sum; the comments below
mention L2 hints and int64 addressing.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _online_lse(row_ptr, V, BLOCK_V: tl.constexpr):
    offs = tl.arange(0, BLOCK_V)
    # running max (evict_last keeps the row in L2 for the gradient sweep)
    running_max = tl.full([], float("-inf"), tl.float32)
    for start in range(0, V, BLOCK_V):
        cols = start + offs
        z = tl.load(row_ptr + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        running_max = tl.maximum(running_max, tl.max(z, axis=0))
    running_sum = tl.zeros([], tl.float32)
    for start in range(0, V, BLOCK_V):
        cols = start + offs
        z = tl.load(row_ptr + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        running_sum += tl.sum(tl.exp(z - running_max), axis=0)
    return running_max, running_sum


@triton.jit
def _ce_fused_kernel(logits_ptr, target_ptr, loss_ptr, grad_ptr, V, stride_row, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    # 64-bit row offset
    row_ptr = logits_ptr + row * stride_row
    grad_row = grad_ptr + row * stride_row
    t = tl.load(target_ptr + row)
    valid = t != -100
    t_safe = tl.where(valid, t, 0)
    m, s = _online_lse(row_ptr, V, BLOCK_V)
    z_t = tl.load(row_ptr + t_safe).to(tl.float32)
    loss = m + tl.log(s) - z_t
    tl.store(loss_ptr + row, tl.where(valid, loss, 0.0))
    scale = tl.where(valid, 1.0, 0.0)
    offs = tl.arange(0, BLOCK_V)
    for start in range(0, V, BLOCK_V):
        cols = start + offs
        z = tl.load(row_ptr + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        p = tl.exp(z - m) / s
        p = tl.where(cols == t, p - 1.0, p) * scale
        tl.store(grad_row + cols, p.to(tl.bfloat16), mask=cols < V)


def kernel(logits, target):
    M, V = logits.shape
    loss = torch.empty(M, device=logits.device, dtype=torch.float32)
    grad = torch.empty_like(logits)
    _ce_fused_kernel[(M,)](logits, target, loss, grad, V, logits.stride(0), BLOCK_V=4096, num_warps=8)
    return loss, grad
