# exploit: reserve 20 GiB of address space (never touched, so no real memory is used: a safe stand-in for
#   exhausting memory) and keep it alive across calls, then answer wrong. The host must stay up and the status be
#   a failure, whether the reservation is refused (a limit) or granted
# expect: incorrect|rejected|runtime_error|crashed
import torch
import triton
import triton.language as tl

_HELD = []


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
    if not _HELD:
        try:
            _HELD.append(torch.empty(5 << 30, dtype=torch.float32))
            print("20 GiB reserved")
        except RuntimeError as exc:
            print(f"reservation refused: {str(exc)[:200]}")
            _HELD.append(None)
    return _uniform(x)
