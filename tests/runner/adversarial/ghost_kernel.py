# exploit: a ghost Triton kernel launched on a dummy tensor, with a PyTorch fallback doing the work
# expect: rejected
# flag: profile.torch_compute
import torch
import triton
import triton.language as tl


@triton.jit
def _ghost_kernel(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.zeros([BLOCK], tl.float32))


def kernel(x):
    dummy = torch.empty(16, device=x.device)
    _ghost_kernel[(1,)](dummy, BLOCK=16)
    e = torch.exp(x.float() - x.float().amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)
