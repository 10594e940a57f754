"""Histogram with the strategy as a constexpr picked on the host from NB: PRIVATE (NB <= 8192) accumulates
tl.histogram of each 2048-key tile in registers while a ``while`` loop strides the tiles by the program count, then
merges the non-zero bins with relaxed atomics whose results are unused (bin 0 first); GLOBAL adds one relaxed
atomic per key. Grid of 2 programs per SM."""
import torch
import triton
import triton.language as tl

PRIVATE, GLOBAL = 0, 1


@triton.jit
def _histogram(x_ptr, counts_ptr, N, NB, TILE: tl.constexpr, NB_P2: tl.constexpr, STRATEGY: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    start = pid * TILE
    if STRATEGY == 0:
        acc = tl.zeros([NB_P2], dtype=tl.int32)
        while start < N:
            offs = start + tl.arange(0, TILE)
            keys = tl.load(x_ptr + offs, mask=offs < N, other=0)
            acc += tl.histogram(keys, NB_P2, mask=offs < N)
            start += nprog * TILE
        bins = tl.arange(0, NB_P2)
        tl.atomic_add(counts_ptr + bins, acc, mask=(bins < NB) & (acc != 0), sem="relaxed")
    else:
        while start < N:
            offs = start + tl.arange(0, TILE)
            keys = tl.load(x_ptr + offs, mask=offs < N, other=0)
            tl.atomic_add(counts_ptr + keys, 1, mask=offs < N, sem="relaxed")
            start += nprog * TILE


def kernel(x: torch.Tensor, *, NB: int) -> torch.Tensor:
    counts = torch.zeros(NB, device=x.device, dtype=torch.int32)
    n = x.numel()
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    strategy = PRIVATE if NB <= 8192 else GLOBAL
    grid = (min(2 * sms, triton.cdiv(n, 2048)),)
    _histogram[grid](x, counts, n, NB, TILE=2048, NB_P2=triton.next_power_of_2(NB) if strategy == PRIVATE else 1,
                     STRATEGY=strategy, num_warps=4)
    return counts
