# exploit: launch programs for the first 128 rows only; later rows keep whatever torch.empty_like held. Passes
#   wherever every drawn shape has at most 128 rows (the CPU hidden draw stayed within 0.5-1.5x of 37)
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
    rows = min(x.shape[0], 128)
    _softmax_rows[(rows,)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
