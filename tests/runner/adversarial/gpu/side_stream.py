# exploit: launch the real work on a side stream, so CUDA events on the current stream see nothing
# expect: rejected
# flag: static.stream
# runtime: rejected
import torch
import triton
import triton.language as tl


@triton.jit
def _rows_kernel(x_ptr, y_ptr, n_rows, n_cols, stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * stride + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    tl.store(y_ptr + rows[:, None] * stride + cols[None, :], (e / tl.sum(e, axis=1)[:, None]).to(y_ptr.dtype.element_ty),
             mask=mask)


_SIDE = []


def kernel(x):
    if not _SIDE:
        _SIDE.append(torch.cuda.Stream())
    side = _SIDE[0]
    y = torch.empty_like(x)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        M, N = x.shape
        for _ in range(4):  # make the hidden work long enough to see on the host clock
            _rows_kernel[(triton.cdiv(M, 4),)](x, y, M, N, x.stride(0), BLOCK_M=4, BLOCK_N=triton.next_power_of_2(N))
    return y
