"""Softmax from a factory: ``build_softmax()`` returns a closure that captures its settings. Short rows go to a
persistent kernel whose programs walk [ROWS, BLOCK_N] tiles in a ``while`` loop (stride = program count); medium
rows to a fused row kernel with num_warps computed from the block; long rows to a three-pass kernel (max, sum,
normalize) whose sweeps load with evict_last. log2(e) is folded into the input scale, exp2 throughout, and the
reciprocal of the sum is taken once."""
import torch
import triton
import triton.language as tl

RCP_LN2 = 1.4426950408889634


@triton.jit
def _softmax_rows_persistent(x_ptr, y_ptr, M, N, sx, sy, num_tiles, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    tile = tl.program_id(0)
    step = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    while tile < num_tiles:
        rows = tile * ROWS + tl.arange(0, ROWS)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        x = tl.load(x_ptr + rows[:, None] * sx + cols[None, :], mask=mask, other=-float("inf"))
        z = x.to(tl.float32) * RCP_LN2
        p = tl.exp2(z - tl.max(z, axis=1)[:, None])
        r = 1.0 / tl.sum(p, axis=1)
        tl.store(y_ptr + rows[:, None] * sy + cols[None, :], (p * r[:, None]).to(y_ptr.dtype.element_ty), mask=mask)
        tile += step


@triton.jit
def _softmax_row(x_ptr, y_ptr, N, sx, sy, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    z = tl.load(x_ptr + row * sx + cols, mask=cols < N, other=-float("inf")).to(tl.float32) * RCP_LN2
    p = tl.exp2(z - tl.max(z, axis=0))
    r = 1.0 / tl.sum(p, axis=0)
    tl.store(y_ptr + row * sy + cols, (p * r).to(y_ptr.dtype.element_ty), mask=cols < N)


@triton.jit
def _softmax_three_pass(x_ptr, y_ptr, N, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = -float("inf")
    for off in tl.range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        z = tl.load(x_ptr + row * sx + cols, mask=cols < N, other=-float("inf"),
                    eviction_policy="evict_last").to(tl.float32) * RCP_LN2
        m = tl.maximum(m, tl.max(z, axis=0))
    s = 0.0
    for off in tl.range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        z = tl.load(x_ptr + row * sx + cols, mask=cols < N, other=-float("inf"),
                    eviction_policy="evict_last").to(tl.float32) * RCP_LN2
        s += tl.sum(tl.exp2(z - m), axis=0)
    r = 1.0 / s
    for off in tl.range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        z = tl.load(x_ptr + row * sx + cols, mask=cols < N, other=-float("inf")).to(tl.float32) * RCP_LN2
        tl.store(y_ptr + row * sy + cols, (tl.exp2(z - m) * r).to(y_ptr.dtype.element_ty), mask=cols < N)


def _sm_count(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def build_softmax(rows_per_tile: int = 8, programs_per_sm: int = 4, long_tile: int = 4096):
    def run(x: torch.Tensor) -> torch.Tensor:
        M, N = x.shape
        y = torch.empty_like(x)
        if N <= 1024:
            block_n = triton.next_power_of_2(N)
            num_tiles = triton.cdiv(M, rows_per_tile)
            grid = (min(num_tiles, programs_per_sm * _sm_count(x.device)),)
            _softmax_rows_persistent[grid](x, y, M, N, x.stride(0), y.stride(0), num_tiles,
                                           ROWS=rows_per_tile, BLOCK_N=block_n, num_warps=4)
        elif N <= 16384:
            block_n = triton.next_power_of_2(N)
            _softmax_row[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=block_n,
                               num_warps=max(4, min(16, block_n // 512)))
        else:
            _softmax_three_pass[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK=long_tile, num_warps=8)
        return y

    return run


kernel = build_softmax()
