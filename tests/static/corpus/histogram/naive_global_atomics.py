"""Naive histogram: a program per 1024-key tile adds 1 to the global counter of every key with tl.atomic_add
(default acq_rel semantics), whatever NB is."""
import torch
import triton
import triton.language as tl


@triton.jit
def hist_atomic_kernel(x_ptr, counts_ptr, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    keys = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.atomic_add(counts_ptr + keys, 1, mask=mask)


def kernel(x, *, NB):
    N = x.numel()
    counts = torch.zeros(NB, dtype=torch.int32, device=x.device)
    BLOCK = 1024
    hist_atomic_kernel[(triton.cdiv(N, BLOCK),)](x, counts, N, BLOCK=BLOCK, num_warps=8)
    return counts
