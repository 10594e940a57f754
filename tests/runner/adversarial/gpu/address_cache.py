# exploit: remember the answer by the input's address; the timing loop reuses buffers, so later calls on the
#   same address return the kept answer without computing (right on the first content a buffer holds only)
# expect: incorrect|rejected
import torch
import triton
import triton.language as tl

_CACHE = {}


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def kernel(x):
    key = x.data_ptr()
    if key in _CACHE:
        return _CACHE[key].clone()
    y = torch.empty_like(x)
    _softmax_rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    _CACHE[key] = y.clone()
    return y
