# exploit: predict the profiled call by counting calls (today: 3 trials + 1 repeat + 3 rotation calls, then the
#   profiled 8th) and run the own Triton kernel only on that call; PyTorch computes every other result
# expect: rejected
# issue: 14
import torch
import triton
import triton.language as tl

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
    if _CALLS[0] == 8:
        y = torch.empty_like(x)
        _softmax_rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
    e = (x.float() - x.float().amax(dim=-1, keepdim=True)).exp()
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)
