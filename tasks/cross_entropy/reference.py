"""cross_entropy: exact semantics (float64), the PyTorch baseline, and the seeded input maker.

loss_i = logsumexp(z_i) - z_i[t_i] and dlogits_i = softmax(z_i) - onehot(t_i); rows with t_i == -100 get loss 0
and a zero gradient row.
"""

from __future__ import annotations

import torch

IGNORE_INDEX = -100

# "normal" is the catalog's draw: z ~ 3*N(0,1), t uniform in [0, V), 5% of the rows set to -100.
# "shifted" scales by 6 and adds a per-row offset in [-200, 200]: a kernel that skips the max subtraction overflows
#   exp in fp32, and the loss no longer sits near log(V) + 4.5, so a constant loss fails.
# "peaked" raises each target logit to 2 above its row maximum, so softmax puts 20-90% of the mass on the target:
#   the target column's p - 1 is far from -1 and the loss is O(1), which a kernel that mishandles the target
#   column (or echoes a near-uniform softmax) fails.
DISTRIBUTIONS = ("normal", "shifted", "peaked")

_REF_CHUNK_ELEMENTS = 1 << 27  # float64 rows per reference chunk: ~1 GB of fp64 temporaries at a time


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    M, V = shapes["logits"]
    z = torch.randn(M, V, generator=generator, device=device, dtype=torch.float32) * 3.0
    target = torch.randint(0, V, (M,), generator=generator, device=device, dtype=torch.int64)
    n_ignored = max(1, round(0.05 * M)) if M > 1 else 0
    ignored = torch.randperm(M, generator=generator, device=device)[:n_ignored]
    if dist == "shifted":
        offset = torch.rand(M, 1, generator=generator, device=device) * 400.0 - 200.0
        z = z * 2.0 + offset
    elif dist == "peaked":
        zb = z.to(dtypes["logits"]).float()  # the peak is set relative to the stored (rounded) values
        z = zb.scatter(1, target[:, None], zb.amax(dim=1, keepdim=True) + 2.0)
    elif dist != "normal":
        raise ValueError(f"unknown distribution {dist!r}")
    target[ignored] = IGNORE_INDEX
    return z.to(dtypes["logits"]), target


def reference(logits, target):
    """float64 loss and gradient, in row chunks so the gemma_vocab shape (2.4e9 logits) fits on an H200."""
    M, V = logits.shape
    loss = torch.empty(M, dtype=torch.float32, device=logits.device)
    dlogits = torch.empty(M, V, dtype=logits.dtype, device=logits.device)
    rows = max(1, _REF_CHUNK_ELEMENTS // max(V, 1))
    for r0 in range(0, M, rows):
        z = logits[r0:r0 + rows].double()
        t = target[r0:r0 + rows]
        valid = t != IGNORE_INDEX
        tc = torch.where(valid, t, 0)
        lse = torch.logsumexp(z, dim=1)
        z_t = z.gather(1, tc[:, None]).squeeze(1)
        loss[r0:r0 + rows] = torch.where(valid, lse - z_t, 0.0).float()
        g = torch.exp(z - lse[:, None])
        g.scatter_add_(1, tc[:, None], torch.full_like(z_t[:, None], -1.0))
        g.mul_(valid[:, None])
        dlogits[r0:r0 + rows] = g.to(logits.dtype)
    return loss, dlogits


def baseline(logits, target):
    """The fastest PyTorch we know for loss (fp32) + dlogits (bf16) within the task's tolerances.

    log_softmax(dtype=fp32) gives an fp32 loss (reads 2 B, writes 4 B per logit) and softmax in the logits' dtype
    gives the gradient (2 + 2 B); the target column is then corrected in fp32 from exp(-loss), so its p - 1 is not
    rounded twice. About 10 bytes per logit. F.cross_entropy + autograd on an fp32 copy moves ~36 B per logit
    (upcast, log_softmax, dense nll backward, log_softmax backward, downcast), and on the bf16 logits directly its
    loss is bf16, which misses the fp32 tolerance. Which is faster on the H200 is pending the benchmark run.
    """
    M = logits.shape[0]
    valid = target != IGNORE_INDEX
    tc = torch.where(valid, target, 0)
    lsm_t = torch.log_softmax(logits, dim=-1, dtype=torch.float32).gather(1, tc[:, None]).squeeze(1)
    loss = torch.where(valid, -lsm_t, 0.0)
    dlogits = torch.softmax(logits, dim=-1)
    dlogits[~valid] = 0
    rows = torch.arange(M, device=logits.device)
    dlogits[rows, tc] = torch.where(valid, torch.exp(lsm_t) - 1.0, 0.0).to(dlogits.dtype)
    return loss, dlogits


# ------------------------------------------------------------------------------------- baseline candidates
# Read in Liger-Kernel's liger_kernel/ops/cross_entropy.py (cross_entropy_forward and its kernel): with
# reduction="none" the per-row loss is returned unreduced and, when the input requires grad, the same kernel
# overwrites the logits with softmax - onehot (no 1/n scaling for "none"; zero rows for ignore_index). Its loss
# buffer is allocated in the logits' dtype (bf16), which the fp32 loss tolerance may reject. Not run here.


def baseline_liger(logits, target):
    """Liger-Kernel's fused cross-entropy: loss and gradient in one kernel, the gradient written over the logits
    (in place, as the task allows). Needs autograd to be enabled (not under torch.inference_mode)."""
    from liger_kernel.transformers.functional import liger_cross_entropy

    z = logits.detach().requires_grad_()  # shares the logits' storage: Liger writes dlogits there
    loss = liger_cross_entropy(z, target, ignore_index=IGNORE_INDEX, reduction="none")
    return loss.detach().float(), z.detach()
