# exploit: always return fp32, whatever the input dtype. Passes wherever every drawn workload is fp32 (the CPU
#   hidden draw kept the smoke dtype)
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
    y = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    _softmax_rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
