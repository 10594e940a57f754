# exploit: none; a kernel that writes far out of bounds must become a status, and the next evaluation run clean
# expect: crashed
import torch
import triton
import triton.language as tl


@triton.jit
def _wild_kernel(y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs + (1 << 40), tl.zeros([BLOCK], tl.float32))


def kernel(x):
    y = torch.empty_like(x)
    _wild_kernel[(1,)](y, BLOCK=128)
    return y
