"""A carry-per-row scan in 1024-element tiles (4 warps) for every shape. A decoupled look-back kernel with an
atomic tile counter and packed states, a 2-D row-tile kernel and a CUDA warp-scan source are defined but
never launched or compiled; the look-back launch sits under `if False:`."""
import torch
import triton
import triton.language as tl

CUDA_SRC = r"""
__global__ void warp_rows(const float* x, float* y, int N) {
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int row = blockIdx.x * 8 + warp;
    float4 v = reinterpret_cast<const float4*>(x + row * N)[lane];
    float s = v.x + v.y + v.z + v.w;
    for (int o = 1; o < 32; o <<= 1) { float n = __shfl_up_sync(0xffffffff, s, o); if (lane >= o) s += n; }
    y[row * N + lane] = s;
}
"""


@triton.jit
def _pack(v, status: tl.constexpr):
    return v.to(tl.uint32, bitcast=True).to(tl.int64) | (status << 32)


@triton.jit
def _lookback(x_ptr, y_ptr, ws_ptr, N, BLOCK: tl.constexpr, WIN: tl.constexpr):
    tile = tl.atomic_add(ws_ptr, 1)
    offs = tile * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < N, other=0)
    agg = tl.sum(x, axis=0)
    tl.atomic_xchg(ws_ptr + 1 + tile, _pack(agg, 1), sem="release")
    prefix = tl.zeros_like(agg)
    lane = tl.arange(0, WIN)
    end = tile
    while end > 0:
        st = tl.atomic_add(ws_ptr + 1 + end - 1 - lane, 0, mask=end - 1 - lane >= 0, sem="acquire")
        prefix += tl.sum(tl.where((st >> 32) > 0, (st & 0xFFFFFFFF).to(tl.uint32).to(agg.dtype, bitcast=True), 0))
        end -= WIN
    tl.atomic_xchg(ws_ptr + 1 + tile, _pack(prefix + agg, 2), sem="release")
    tl.store(y_ptr + offs, tl.cumsum(x, axis=0) + prefix, mask=offs < N)


@triton.jit
def _row_tiles(x_ptr, y_ptr, B, N, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    m = (rows[:, None] < B) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=m, other=0)
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], tl.cumsum(x, axis=1), mask=m)


@triton.jit
def _carry_rows(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    carry = tl.sum(tl.zeros([BLOCK], dtype=x_ptr.dtype.element_ty), axis=0)
    for start in range(0, N, BLOCK):
        cols = start + offs
        x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0)
        tl.store(y_ptr + row * N + cols, tl.cumsum(x, axis=0) + carry, mask=cols < N)
        carry += tl.sum(x, axis=0)


def _short_rows(x, y):
    B, N = x.shape
    bn = triton.next_power_of_2(N)
    _row_tiles[(triton.cdiv(B, 32),)](x, y, B, N, ROWS=32, BLOCK_N=bn)
    return y


def kernel(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    B, N = x.shape
    y = torch.empty_like(x)
    if False:
        ws = torch.zeros(triton.cdiv(N, 8192) + 1, dtype=torch.int64, device=x.device)
        _lookback[(triton.cdiv(N, 8192),)](x, y, ws, N, BLOCK=8192, WIN=32)
        return y
    _carry_rows[(B,)](x, y, N, BLOCK=1024, num_warps=4)
    return y
