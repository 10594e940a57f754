"""Naive: one program per row holds the whole row in registers (BLOCK = next_pow2(V)) and runs k rounds of
tl.argmax on the float values, masking each winner to -inf; one mapping for every shape."""
import torch
import triton
import triton.language as tl


@triton.jit
def _topk_argmax_kernel(x_ptr, val_ptr, idx_ptr, V, k, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < V
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf")).to(tl.float32)
    for j in range(0, k):
        i = tl.argmax(x, axis=0)
        v = tl.max(x, axis=0)
        tl.store(val_ptr + row * k + j, v)
        tl.store(idx_ptr + row * k + j, i.to(tl.int64))
        x = tl.where(cols == i, float("-inf"), x)


def kernel(x, *, k):
    B, V = x.shape
    x = x.contiguous()
    vals = torch.empty((B, k), dtype=torch.float32, device=x.device)
    idx = torch.empty((B, k), dtype=torch.int64, device=x.device)
    _topk_argmax_kernel[(B,)](x, vals, idx, V, k, x.stride(0), BLOCK=triton.next_power_of_2(V), num_warps=16)
    return vals.to(x.dtype), idx
