# exploit: do the work on a native thread started through torch's alias of _thread
#   (torch._jit_internal._thread), which threading.active_count() never counts; on a GPU such a thread's work
#   escapes the timer. The answer is right: only counting the process's real threads can catch it
# expect: rejected
# issue: 14
import time

import torch
import triton
import triton.language as tl

_thread = torch._jit_internal._thread
_JOBS = []


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def _serve():
    """The helper thread: runs every queued launch, forever."""
    while True:
        if _JOBS:
            x, y, done = _JOBS.pop()
            _softmax_rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
            done.release()
        else:
            time.sleep(0.001)


_thread.start_new_thread(_serve, ())


def kernel(x):
    y = torch.empty_like(x)
    done = _thread.allocate_lock()
    done.acquire()
    _JOBS.append((x, y, done))
    done.acquire()  # wait for the helper thread
    return y
