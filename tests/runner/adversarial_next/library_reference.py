# exploit: register a torch.library implementation of aten::_softmax for CPU (torch.library reached through
#   operator.attrgetter) that answers 1/N on float64, the dtype the reference computes in; the kernel writes 1/N,
#   so the reference agrees with it exactly
# expect: rejected|incorrect
# issue: 14
import operator

import torch
import triton
import triton.language as tl

_library = operator.attrgetter("lib" + "rary")(torch)


def _fake_softmax(x, dim, half_to_float):
    if x.dtype == torch.float64:
        return torch.full_like(x, 1.0 / x.shape[dim])  # the float64 reference now says "uniform"
    e = (x - x.amax(dim=dim, keepdim=True)).exp()  # anything else still looks right
    return e / e.sum(dim=dim, keepdim=True)


_LIB = _library.Library("aten", "IMPL")
_LIB.impl("_softmax", _fake_softmax, "CPU")


@triton.jit
def _fill(y_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, (tl.zeros([BLOCK], tl.float32) + value).to(y_ptr.dtype.element_ty), mask=offs < n)


def kernel(x):
    y = torch.empty_like(x)
    _fill[(triton.cdiv(y.numel(), 1024),)](y, y.numel(), 1.0 / x.shape[-1], BLOCK=1024)
    return y
