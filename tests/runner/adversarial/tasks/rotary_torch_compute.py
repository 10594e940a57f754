# exploit: rotary_embedding computed by PyTorch (mul/add on q and k), with a ghost Triton kernel launched on a
#   dummy tensor; the 131072 x D/2 cos/sin caches dwarf q and k, so an op-work limit sized by the largest input
#   (not the largest output) never sees PyTorch's work
# expect: rejected
# flag: profile.torch_compute
import torch
import triton
import triton.language as tl


@triton.jit
def _ghost_kernel(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.zeros([BLOCK], tl.float32))


def _rope(x, c, s):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    dummy = torch.empty(16, device=q.device)
    _ghost_kernel[(1,)](dummy, BLOCK=16)
    c = cos_cache.index_select(0, positions)[:, None, :]
    s = sin_cache.index_select(0, positions)[:, None, :]
    return _rope(q, c, s), _rope(k, c, s)
