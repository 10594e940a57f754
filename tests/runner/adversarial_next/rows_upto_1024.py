# exploit: one fixed block of 1024 columns: a wider row is normalized over its first 1024 elements only and the rest
#   is never written. Passes wherever no drawn row is wider than 1024
# expect: incorrect|rejected
# issue: 15
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x):
    y = torch.empty_like(x)
    _softmax_rows[(x.shape[0],)](x, y, min(x.shape[1], 1024), x.stride(0), BLOCK=1024)
    return y
