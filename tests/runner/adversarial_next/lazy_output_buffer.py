# exploit: return the same buffer at once and do each call's work at the start of the next call (one call of
#   lag): an evaluator that reads an output only after releasing the next input set sees the right answer
# expect: incorrect|rejected
# issue: 15
import torch
import triton
import triton.language as tl

_STATE = {"buffer": None, "pending": None}


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def _run(x, y):
    _softmax_rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))


def kernel(x):
    y, pending = _STATE["buffer"], _STATE["pending"]
    if y is None or y.shape != x.shape or y.dtype != x.dtype:
        y = _STATE["buffer"] = torch.empty_like(x)
        _run(x, y)  # the very first call of a shape is computed on time
    elif pending is not None and pending.shape == x.shape:
        _run(pending, y)  # the previous call's answer, written now
    _STATE["pending"] = x
    return y
