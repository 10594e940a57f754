# task: transpose
# expect: passed
# style: block pointers (tl.make_block_ptr with boundary_check) and tl.trans; @triton.heuristics pick the tile
# style: from the problem size and mark tiles that need no boundary checks; a 2-D grid from a host helper
"""Y = X^T: program (i, j) loads a BLOCK_M x BLOCK_N tile of X through a block pointer, transposes it in
registers and stores it as the BLOCK_N x BLOCK_M tile (j, i) of Y."""

import torch
import triton
import triton.language as tl


def _tile(n):
    return 64 if n >= 64 else max(16, triton.next_power_of_2(n))


@triton.heuristics({
    "BLOCK_M": lambda a: _tile(a["M"]),
    "BLOCK_N": lambda a: _tile(a["N"]),
    "EVEN": lambda a: a["M"] % _tile(a["M"]) == 0 and a["N"] % _tile(a["N"]) == 0,
})
@triton.jit
def _transpose_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_xn, stride_ym, stride_yn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EVEN: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    src = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(stride_xm, stride_xn), offsets=(pid_m * BLOCK_M,
                            pid_n * BLOCK_N), block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))
    dst = tl.make_block_ptr(y_ptr, shape=(N, M), strides=(stride_ym, stride_yn), offsets=(pid_n * BLOCK_N,
                            pid_m * BLOCK_M), block_shape=(BLOCK_N, BLOCK_M), order=(1, 0))
    if EVEN:
        tl.store(dst, tl.trans(tl.load(src)))
    else:
        tl.store(dst, tl.trans(tl.load(src, boundary_check=(0, 1))), boundary_check=(0, 1))


def _grid(M, N):
    return lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))


def kernel(X):
    M, N = X.shape
    Y = torch.empty((N, M), dtype=X.dtype, device=X.device)
    _transpose_kernel[_grid(M, N)](X, Y, M, N, X.stride(0), X.stride(1), Y.stride(0), Y.stride(1))
    return Y
