# task: cross_entropy
# expect: passed
# style: the gradient written in place over the logits (the task allows dlogits to alias logits), as Liger's
# style: fused cross entropy does; one program per row, an online logsumexp sweep over column tiles then a
# style: gradient sweep; ignore_index as a runtime int; contiguous/view glue; the loss buffer zero-filled
# needs: inplace
"""Cross entropy forward + gradient: per row, sweep 1 keeps a running max m and rescaled sum d of exp(z - m)
over column tiles (fp32), giving lse = m + log d and loss = lse - z[t]; sweep 2 overwrites the row with
softmax(z) - onehot(t). Rows whose target is ignore_index get loss 0 and a zero gradient."""

import torch
import triton
import triton.language as tl


@triton.jit
def _cross_entropy_fwd_bwd(logits_ptr, stride_row, target_ptr, loss_ptr, n_cols, ignore_index,
                           BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    logits_ptr += row * stride_row
    t = tl.load(target_ptr + row)
    if t == ignore_index:
        for off in range(0, n_cols, BLOCK_SIZE):
            cols = off + tl.arange(0, BLOCK_SIZE)
            tl.store(logits_ptr + cols, tl.zeros([BLOCK_SIZE], tl.float32).to(logits_ptr.dtype.element_ty),
                     mask=cols < n_cols)
        return
    m = -float("inf")
    d = 0.0
    z_t = tl.load(logits_ptr + t).to(tl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        z = tl.load(logits_ptr + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(z, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(z - m_new), axis=0)
        m = m_new
    lse = m + tl.log(d)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        z = tl.load(logits_ptr + cols, mask=mask, other=-float("inf")).to(tl.float32)
        grad = tl.exp(z - lse) - tl.where(cols == t, 1.0, 0.0)
        tl.store(logits_ptr + cols, grad.to(logits_ptr.dtype.element_ty), mask=mask)
    tl.store(loss_ptr + row, lse - z_t)


MAX_FUSED_SIZE = 65536 // 2


def cross_entropy_forward(logits, target, ignore_index=-100):
    """Returns (loss, dlogits) with dlogits stored over ``logits``."""
    n_rows, n_cols = logits.shape
    assert logits.stride(-1) == 1, "the class dim must be contiguous"
    target = target.contiguous().view(-1)
    loss = torch.zeros(n_rows, dtype=torch.float32, device=logits.device)
    block = min(MAX_FUSED_SIZE, triton.next_power_of_2(n_cols), 1024)
    _cross_entropy_fwd_bwd[(n_rows,)](logits, logits.stride(0), target, loss, n_cols, ignore_index,
                                      BLOCK_SIZE=block, num_warps=8 if block >= 1024 else 4)
    return loss, logits


def kernel(logits, target):
    return cross_entropy_forward(logits, target)
