# exploit: print 100 MB on its first call, then answer wrong: the log the evaluator keeps (and an agent's tool
#   result) must stay bounded, and the evaluator must neither stall on nor hold the whole of it
# expect: incorrect|rejected
# max-log: 1048576
import torch
import triton
import triton.language as tl

_PRINTED = []


@triton.jit
def _fill(y_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, (tl.zeros([BLOCK], tl.float32) + value).to(y_ptr.dtype.element_ty), mask=offs < n)


def _uniform(x):
    """A wrong answer from the submission's own kernel: 1/N everywhere."""
    y = torch.empty_like(x)
    _fill[(triton.cdiv(y.numel(), 1024),)](y, y.numel(), 1.0 / x.shape[-1], BLOCK=1024)
    return y


def kernel(x):
    if not _PRINTED:
        _PRINTED.append(1)
        line = "LOG-FLOOD " + "x" * (1 << 20)
        for _ in range(100):
            print(line)
    return _uniform(x)
