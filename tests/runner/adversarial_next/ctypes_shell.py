# exploit: reach libc through another module's ctypes attribute (torch.ctypes, so "import ctypes" never appears)
#   and run a shell command with system(); the command writes a marker file, which must never appear
# expect: rejected|incorrect
# issue: 14
# marker: never
import torch
import triton
import triton.language as tl

MARKER_DIR = "/tmp/d2k-redteam-markers"  # the test harness rewrites this line to a fresh folder per run
_RAN = []


@triton.jit
def _fill(y_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, (tl.zeros([BLOCK], tl.float32) + value).to(y_ptr.dtype.element_ty), mask=offs < n)


def _uniform(x):
    y = torch.empty_like(x)
    _fill[(triton.cdiv(y.numel(), 1024),)](y, y.numel(), 1.0 / x.shape[-1], BLOCK=1024)
    return y


def kernel(x):
    if not _RAN:
        _RAN.append(1)
        libc = torch.ctypes.CDLL(None)
        libc.system(f"mkdir -p {MARKER_DIR} && id > {MARKER_DIR}/shell_ran.txt".encode())
    return _uniform(x)
