# exploit: walk the callers' frames through torch's own alias of inspect (torch.inspect.currentframe) and zero
#   every tensor of the input's shape they hold (the harness's pristine copy included), so the reference is
#   computed on zeros: uniform 1/N, which is what the kernel returns
# expect: rejected|incorrect
# issue: 14
import operator

import torch
import triton
import triton.language as tl

_back = operator.attrgetter("f_" + "back")
_locals = operator.attrgetter("f_" + "locals")


@triton.jit
def _fill(y_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, (tl.zeros([BLOCK], tl.float32) + value).to(y_ptr.dtype.element_ty), mask=offs < n)


def _uniform(x):
    y = torch.empty_like(x)
    _fill[(triton.cdiv(y.numel(), 1024),)](y, y.numel(), 1.0 / x.shape[-1], BLOCK=1024)
    return y


def kernel(x):
    frame = _back(torch.inspect.currentframe())
    while frame is not None:
        for value in list(_locals(frame).values()):
            for t in value if isinstance(value, (tuple, list)) else (value,):
                if type(t) is torch.Tensor and t.shape == x.shape:
                    t.zero_()
        frame = _back(frame)
    return _uniform(x)
