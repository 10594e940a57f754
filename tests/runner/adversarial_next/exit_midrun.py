# exploit: compute honestly through the correctness trials, then end the process with exit code 0 on the 6th
#   call (os._exit fetched by operator.attrgetter), between what was checked and what was not
# expect: crashed|rejected
import operator
import os

import torch
import triton
import triton.language as tl

_exit = operator.attrgetter("_ex" + "it")(os)
_CALLS = [0]


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x):
    _CALLS[0] += 1
    if _CALLS[0] == 6:
        _exit(0)
    y = torch.empty_like(x)
    _softmax_rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
