# An honest kernel that returns the same output tensor on every call (one buffer per shape and dtype, rewritten
# each call). The evaluator copies every output out before it releases the next input set, so this must pass:
# reusing a buffer cannot hide a stale result, and is no reason to fail a kernel whose every answer is right.
import torch
import triton
import triton.language as tl

_BUFFERS = {}


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x):
    key = (tuple(x.shape), x.dtype)
    if key not in _BUFFERS:
        _BUFFERS[key] = torch.empty_like(x)
    y = _BUFFERS[key]
    _softmax_rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
