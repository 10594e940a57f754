"""Fused cross-entropy: one program per row, an online (max, sum) sweep and a gradient sweep in one kernel;
natural exp, int32 offsets, ignore_index handled per element, no cache hints."""
import torch
import triton
import triton.language as tl


@triton.jit
def ce_fused(logits_ptr, target_ptr, loss_ptr, grad_ptr, V, IGNORE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = logits_ptr + row * V
    t = tl.load(target_ptr + row)
    m = -float("inf")
    s = 0.0
    for off in tl.range(0, V, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        z = tl.load(base + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(z, 0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(z - m_new), 0)
        m = m_new
    zt = tl.load(base + t).to(tl.float32)
    valid = t != IGNORE
    tl.store(loss_ptr + row, tl.where(valid, m + tl.log(s) - zt, 0.0))
    for off in tl.range(0, V, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        z = tl.load(base + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
        p = tl.exp(z - m) / s
        p = tl.where(cols == t, p - 1.0, p)
        p = tl.where(valid, p, 0.0)
        tl.store(grad_ptr + row * V + cols, p.to(grad_ptr.dtype.element_ty), mask=cols < V)


def kernel(logits, target):
    M, V = logits.shape
    loss = torch.empty(M, device=logits.device, dtype=torch.float32)
    grad = torch.empty_like(logits)
    ce_fused[(M,)](logits, target, loss, grad, V, IGNORE=-100, BLOCK=8192, num_warps=16)
    return loss, grad
