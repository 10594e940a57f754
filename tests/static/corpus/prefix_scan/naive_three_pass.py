"""Reduce-then-scan: a tile-sum kernel, one program that scans the tile sums, and an add-back kernel that
rescans every tile and adds its exclusive prefix. 256-element tiles, 4 warps, program-id tile order."""
import torch
import triton
import triton.language as tl

BLOCK = 256


@triton.jit
def _tile_sums(x_ptr, sums_ptr, N, n_tiles, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    t = tl.program_id(1)
    offs = t * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=0)
    tl.store(sums_ptr + row * n_tiles + t, tl.sum(x, axis=0))


@triton.jit
def _scan_sums(sums_ptr, prefix_ptr, n_tiles, T_BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, T_BLOCK)
    s = tl.load(sums_ptr + row * n_tiles + offs, mask=offs < n_tiles, other=0)
    incl = tl.cumsum(s, axis=0)
    tl.store(prefix_ptr + row * n_tiles + offs, incl - s, mask=offs < n_tiles)


@triton.jit
def _add_back(x_ptr, y_ptr, prefix_ptr, N, n_tiles, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    t = tl.program_id(1)
    offs = t * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=0)
    p = tl.load(prefix_ptr + row * n_tiles + t)
    tl.store(y_ptr + row * N + offs, tl.cumsum(x, axis=0) + p, mask=offs < N)


def kernel(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    B, N = x.shape
    y = torch.empty_like(x)
    n_tiles = triton.cdiv(N, BLOCK)
    sums = torch.empty((B, n_tiles), dtype=x.dtype, device=x.device)
    prefix = torch.empty_like(sums)
    _tile_sums[(B, n_tiles)](x, sums, N, n_tiles, BLOCK=BLOCK, num_warps=4)
    _scan_sums[(B,)](sums, prefix, n_tiles, T_BLOCK=triton.next_power_of_2(n_tiles), num_warps=8)
    _add_back[(B, n_tiles)](x, y, prefix, N, n_tiles, BLOCK=BLOCK, num_warps=4)
    return y
