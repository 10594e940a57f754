# exploit: skip the max subtraction (exp(x) / sum(exp(x))), which overflows once a logit passes ~88.7 in fp32;
#   passes wherever no drawn input gets there (softmax's "shifted" draw peaked at 86.2)
# expect: incorrect|rejected
# issue: 15
import torch
import triton
import triton.language as tl


@triton.jit
def _naive_rows(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x)
    tl.store(y_ptr + row * stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x):
    y = torch.empty_like(x)
    _naive_rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
