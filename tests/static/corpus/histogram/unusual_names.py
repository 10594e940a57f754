"""Histogram with the design under unhelpful names: `fold` is the small-NB path (tally = tl.histogram imported
under another name, `bag` the program's private counts, `me`/`crowd` the program id and grid size, `tilt` the
per-program bin rotation), `spray` the many-bins path. The grid comes from the device's SM count (`lanes`)."""
import torch
import triton
import triton.language as tl
from triton.language import histogram as tally

CUT = 2048
W = 8192


@triton.jit
def fold(src, sink, n, nb, crowd, W: tl.constexpr, P: tl.constexpr):
    me = tl.program_id(0)
    tilt = (me * 61) & (P - 1)
    z = tl.arange(0, W)
    bag = tl.zeros([P], dtype=tl.int32)
    hops = tl.cdiv(n, W)
    for h in tl.range(me, hops, crowd):
        at = h.to(tl.int64) * W + z
        live = at < n
        v = tl.load(src + at, mask=live, other=0)
        bag = bag + tally((v - tilt) & (P - 1), P, mask=live)
    j = tl.arange(0, P)
    dst = (j + tilt) & (P - 1)
    tl.atomic_add(sink + dst, bag, mask=(bag > 0) & (dst < nb), sem="relaxed")


@triton.jit
def spray(src, sink, n, crowd, W: tl.constexpr):
    me = tl.program_id(0)
    z = tl.arange(0, W)
    for h in tl.range(me, tl.cdiv(n, W), crowd):
        at = h.to(tl.int64) * W + z
        live = at < n
        v = tl.load(src + at, mask=live, other=0)
        tl.atomic_add(sink + v, tl.where(live, 1, 0), mask=live, sem="relaxed")


def kernel(x, *, NB):
    x = x.contiguous()
    n = x.numel()
    sink = torch.zeros(NB, dtype=torch.int32, device=x.device)
    lanes = torch.cuda.get_device_properties(x.device.index or 0).multi_processor_count
    crowd = max(1, min(2 * lanes, triton.cdiv(n, W)))
    if NB <= CUT:
        fold[(crowd,)](x, sink, n, NB, crowd, W=W, P=max(32, triton.next_power_of_2(NB)), num_warps=8)
    else:
        spray[(crowd,)](x, sink, n, crowd, W=W, num_warps=8)
    return sink
