"""Prefix sum with a "warp-wide decoupled look-back" (as the comments call it) for long arrays.

Each 1024-element tile takes a ticket from a global counter, publishes its aggregate to `agg` and raises its
flag to 1, then waits on a window of the 32 previous flags until every one of them reads INCLUSIVE (2), takes
the nearest predecessor's inclusive value, and publishes its own. Flags and values live in separate int32 /
element arrays. Long rows in large batches load the whole row into registers; short rows are walked one row
at a time by a program.
"""
import torch
import triton
import triton.language as tl

WINDOW = 32
TILE = 1024


@triton.jit
def _chained_tile_kernel(x_ptr, y_ptr, flags_ptr, agg_ptr, incl_ptr, order_ptr, counter_ptr, N,
                         BLOCK: tl.constexpr, WINDOW: tl.constexpr):
    # dynamic tile id (ticket) from the global counter
    ticket = tl.atomic_add(counter_ptr, 1)
    tile = tl.program_id(0)
    tl.store(order_ptr + tile, ticket)
    offs = tile * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + offs, mask=m, other=0)
    local = tl.cumsum(x, axis=0)
    agg = tl.sum(x, axis=0)
    # publish AGGREGATE: value first, then the flag
    tl.store(agg_ptr + tile, agg)
    tl.debug_barrier()
    tl.atomic_xchg(flags_ptr + tile, 1)
    prefix = tl.zeros_like(agg)
    if tile > 0:
        # warp-wide look-back window over the previous WINDOW tiles
        lane = tl.arange(0, WINDOW)
        idx = tile - 1 - lane
        valid = idx >= 0
        ready = 0
        while ready == 0:
            st = tl.load(flags_ptr + idx, mask=valid, other=2, volatile=True)
            ready = (tl.min(st, axis=0) == 2).to(tl.int32)
        prefix = tl.load(incl_ptr + tile - 1, volatile=True)
    tl.store(incl_ptr + tile, prefix + agg)
    tl.debug_barrier()
    tl.atomic_xchg(flags_ptr + tile, 2)
    tl.store(y_ptr + offs, local + prefix, mask=m)


@triton.jit
def _whole_row_kernel(x_ptr, y_ptr, N, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    m = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=m, other=0)
    tl.store(y_ptr + row * stride + cols, tl.cumsum(x, axis=0), mask=m)


@triton.jit
def _row_strip_kernel(x_ptr, y_ptr, B, N, stride, ROWS_PER_PROG: tl.constexpr, BLOCK_N: tl.constexpr):
    # "rows per program": a strip of rows handled by one program
    cols = tl.arange(0, BLOCK_N)
    m = cols < N
    for r in range(ROWS_PER_PROG):
        row = tl.program_id(0) * ROWS_PER_PROG + r
        if row < B:
            x = tl.load(x_ptr + row.to(tl.int64) * stride + cols, mask=m, other=0)
            tl.store(y_ptr + row.to(tl.int64) * stride + cols, tl.cumsum(x, axis=0), mask=m)


def _lookback_scan(x1d: torch.Tensor, y1d: torch.Tensor) -> None:
    n = x1d.numel()
    tiles = triton.cdiv(n, TILE)
    flags = torch.zeros(tiles, dtype=torch.int32, device=x1d.device)
    agg = torch.empty(tiles, dtype=x1d.dtype, device=x1d.device)
    incl = torch.empty(tiles, dtype=x1d.dtype, device=x1d.device)
    order = torch.empty(tiles, dtype=torch.int32, device=x1d.device)
    counter = torch.zeros(1, dtype=torch.int32, device=x1d.device)
    _chained_tile_kernel[(tiles,)](x1d, y1d, flags, agg, incl, order, counter, n,
                                   BLOCK=TILE, WINDOW=WINDOW, num_warps=8)


def kernel(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    B, N = x.shape
    y = torch.empty_like(x)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    if N <= 2048:
        rows_per_prog = 16
        _row_strip_kernel[(triton.cdiv(B, rows_per_prog),)](x, y, B, N, x.stride(0), ROWS_PER_PROG=rows_per_prog,
                                                            BLOCK_N=triton.next_power_of_2(N), num_warps=2)
    elif B >= 2 * sms:
        _whole_row_kernel[(B,)](x, y, N, x.stride(0), BLOCK_N=triton.next_power_of_2(N), num_warps=16)
    else:
        for b in range(B):
            _lookback_scan(x[b], y[b])
    return y
