"""Few-rows cross-entropy only: the vocabulary is split over a (M, C) grid; kernel 1 writes per-chunk (m, s),
kernel 2 merges them online (exp2), adds the z[t] term and writes its gradient chunk; int64 offsets."""
import torch
import triton
import triton.language as tl

LOG2E: tl.constexpr = 1.4426950408889634


@triton.jit
def chunk_stats(logits_ptr, pm_ptr, ps_ptr, V, C, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    cols = c * CHUNK + tl.arange(0, CHUNK)
    z = tl.load(logits_ptr + row * V + cols, mask=cols < V, other=-float("inf")).to(tl.float32) * LOG2E
    m = tl.max(z, 0)
    tl.store(pm_ptr + row * C + c, m)
    tl.store(ps_ptr + row * C + c, tl.sum(tl.exp2(z - m), 0))


@triton.jit
def merge_and_grad(logits_ptr, target_ptr, pm_ptr, ps_ptr, loss_ptr, grad_ptr, V, C, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    m = -float("inf")
    s = 0.0
    for j in range(C):
        mj = tl.load(pm_ptr + row * C + j)
        mn = tl.maximum(m, mj)
        s = s * tl.exp2(m - mn) + tl.load(ps_ptr + row * C + j) * tl.exp2(mj - mn)
        m = mn
    t = tl.load(target_ptr + row)
    zt = tl.load(logits_ptr + row * V + t).to(tl.float32)
    tl.store(loss_ptr + row, (m + tl.log2(s)) / LOG2E - zt)
    cols = c * CHUNK + tl.arange(0, CHUNK)
    z = tl.load(logits_ptr + row * V + cols, mask=cols < V, other=-float("inf")).to(tl.float32) * LOG2E
    p = tl.exp2(z - m) / s
    tl.store(grad_ptr + row * V + cols, tl.where(cols == t, p - 1.0, p).to(tl.bfloat16), mask=cols < V)


def kernel(logits, target):
    M, V = logits.shape
    CHUNK = 16384
    C = triton.cdiv(V, CHUNK)
    pm = torch.empty((M, C), device=logits.device, dtype=torch.float32)
    ps = torch.empty((M, C), device=logits.device, dtype=torch.float32)
    loss = torch.empty(M, device=logits.device, dtype=torch.float32)
    grad = torch.empty_like(logits)
    chunk_stats[(M, C)](logits, pm, ps, V, C, CHUNK=CHUNK, num_warps=16)
    merge_and_grad[(M, C)](logits, target, pm, ps, loss, grad, V, C, CHUNK=CHUNK, num_warps=16)
    return loss, grad
