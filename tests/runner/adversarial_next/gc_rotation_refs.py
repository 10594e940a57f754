# exploit: walk every live object through another module's gc attribute (torch.cuda.graphs.gc) and return a
#   tensor already in memory that is the answer for this input (the harness's precomputed rotation references);
#   computes honestly when none is found, so only refusing (and reporting) the gc walk can catch it
# expect: rejected
# issue: 14
import torch
import triton
import triton.language as tl

_gc = torch.cuda.graphs.gc


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def _softmax(x):
    y = torch.empty_like(x)
    _softmax_rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


def _is_answer(t, x):
    """log(t) - x is constant along a row exactly when t is that row's softmax; two rows are checked."""
    for i in (0, x.shape[0] - 1):
        d = t[i].double().log() - x[i].double()
        if not bool(d.isfinite().all()) or float(d.max() - d.min()) > 1e-3:
            return False
    return True


def _stolen(x):
    for obj in _gc.get_objects():
        if type(obj) is torch.Tensor and obj is not x and obj.shape == x.shape and obj.dtype == x.dtype \
                and _is_answer(obj, x):
            return obj.clone()
    return None


def kernel(x):
    y = _stolen(x)
    if y is not None:
        print("answer found in memory, no work done")
        return y
    return _softmax(x)
