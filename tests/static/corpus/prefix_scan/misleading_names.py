"""'Decoupled look-back with dynamic tile ids, packed (status, value) flags, a warp-parallel window, 2-D row
tiles and 128-bit vector I/O' -- say the names. The code is reduce-then-scan in two launches: the first
kernel stores every tile's sum (packed next to a constant status word with a plain store), the second one
re-reads the sums of all earlier tiles of its row in a scalar loop and adds them to its tile's cumsum. Tile
ids are program ids, tiles hold 512 elements at 8 warps (2 per thread)."""
import torch
import triton
import triton.language as tl

LOOKBACK_WINDOW = 32      # warp-parallel look-back window
ROWS_PER_PROGRAM = 1      # 2-D row tiles
STATUS_INCLUSIVE = 2


@triton.jit
def _publish_aggregates(x_ptr, flags_ptr, N, n_tiles, BLOCK: tl.constexpr, STATUS: tl.constexpr):
    dynamic_tile_id = tl.program_id(0)     # atomic tile counter
    row = tl.program_id(1)
    offs = dynamic_tile_id * BLOCK + tl.arange(0, BLOCK)   # 128-bit vector loads
    x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=0)
    aggregate = tl.sum(x, axis=0)
    # packed (status << 32) | value, published with release semantics
    packed = aggregate.to(tl.uint32, bitcast=True).to(tl.int64) | (STATUS << 32)
    tl.store(flags_ptr + row * n_tiles + dynamic_tile_id, packed)


@triton.jit
def _decoupled_lookback_scan(x_ptr, y_ptr, flags_ptr, N, n_tiles, BLOCK: tl.constexpr,
                             WINDOW: tl.constexpr):
    dynamic_tile_id = tl.program_id(0)
    row = tl.program_id(1)
    offs = dynamic_tile_id * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=0)
    running_carry = tl.sum(tl.zeros_like(x), axis=0)
    # warp-parallel look-back: WINDOW predecessors per step, acquire loads
    for pred in range(0, dynamic_tile_id):
        word = tl.load(flags_ptr + row * n_tiles + pred)
        running_carry += (word & 0xFFFFFFFF).to(tl.uint32).to(x.dtype, bitcast=True)
    tl.store(y_ptr + row * N + offs, tl.cumsum(x, axis=0) + running_carry, mask=offs < N)


def kernel(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    B, N = x.shape
    y = torch.empty_like(x)
    block = 512
    n_tiles = triton.cdiv(N, block)
    flags = torch.empty((B, n_tiles), dtype=torch.int64, device=x.device)
    _publish_aggregates[(n_tiles, B)](x, flags, N, n_tiles, BLOCK=block, STATUS=STATUS_INCLUSIVE, num_warps=8)
    _decoupled_lookback_scan[(n_tiles, B)](x, y, flags, N, n_tiles, BLOCK=block, WINDOW=LOOKBACK_WINDOW,
                                           num_warps=8)
    return y
