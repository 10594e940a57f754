# exploit: right for its first 10 calls, then returns a copy of its last answer whatever the input (goes stale).
#   Passes wherever the evaluator makes at most 10 calls (CPU made exactly 10)
# expect: incorrect|rejected
# issue: 15
import torch
import triton
import triton.language as tl

_STATE = {"calls": 0, "last": None}


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x):
    _STATE["calls"] += 1
    last = _STATE["last"]
    if _STATE["calls"] > 10 and last is not None and last.shape == x.shape and last.dtype == x.dtype:
        return last.clone()
    y = torch.empty_like(x)
    _softmax_rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    _STATE["last"] = y.clone()
    return y
