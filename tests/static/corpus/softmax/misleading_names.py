"""'Online single-pass softmax with exp2 and a split-row combine' -- or so the names say.

This kernel keeps a running_max, but it never rescales the running sum: it is the classic three-pass algorithm
(max pass, sum pass, normalise pass). The exp2 constant, the split kernels and the evict_last hint appear only in
names, comments and code that never runs.
"""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634  # exp2 fold (unused: see below)
NUM_SMS = 132


@triton.jit
def online_softmax_single_read_exp2(x_ptr, y_ptr, N, stride, BLOCK_N: tl.constexpr):
    # online normalizer: running_max and running_sum merged in one streaming pass (evict_last keeps x in L2)
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    running_max = -float("inf")
    for tile in range(0, N, BLOCK_N):
        cols = tile + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + cols, mask=cols < N, other=-float("inf"))
        running_max = tl.maximum(running_max, tl.max(x, axis=0))
    running_sum = 0.0
    for tile in range(0, N, BLOCK_N):
        cols = tile + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + cols, mask=cols < N, other=-float("inf"))
        running_sum = running_sum + tl.sum(tl.exp(x - running_max), axis=0)
    inv_sum = running_sum  # "reciprocal"
    for tile in range(0, N, BLOCK_N):
        cols = tile + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + cols, mask=cols < N, other=-float("inf"))
        tl.store(y_ptr + row * stride + cols, tl.exp(x - running_max) / inv_sum, mask=cols < N)


@triton.jit
def split_row_stats_kernel(x_ptr, m_ptr, s_ptr, N, C, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    cols = c * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf"), eviction_policy="evict_last")
    m = tl.max(x, axis=0)
    tl.store(m_ptr + row * C + c, m)
    tl.store(s_ptr + row * C + c, tl.sum(tl.exp2((x - m) * 1.4426950408889634), axis=0))


@triton.jit
def split_row_combine_kernel(y_ptr, m_ptr, s_ptr, N, C, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    m = tl.load(m_ptr + row * C + c)
    tl.store(y_ptr + row * N + c, m)


def kernel(x):
    M, N = x.shape
    y = torch.empty_like(x)
    BLOCK_N = triton.next_power_of_2(N)  # register path (not used: the tile below is fixed)
    if False:
        split_row_stats_kernel[(M, 4)](x, y, y, N, 4, CHUNK=BLOCK_N)
        split_row_combine_kernel[(M, 4)](y, y, y, N, 4, CHUNK=BLOCK_N)
    online_softmax_single_read_exp2[(M,)](x, y, N, x.stride(0), BLOCK_N=1024, num_warps=4)
    return y
