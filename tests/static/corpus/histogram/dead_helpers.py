"""What runs: a persistent grid (2 programs per SM) of 4096-key tiles, 8 warps, adding every key straight into the
global counts with a relaxed atomic whose result is unused, for every NB. A private tl.histogram kernel, a
staggered sparse merge helper and a warp-copies variant are defined but never launched or called."""
import torch
import triton
import triton.language as tl

BLOCK = 4096


@triton.jit
def _staggered_merge(out_ptr, hist, NB, pid, NBP: tl.constexpr):
    slot = tl.arange(0, NBP)
    b = (slot + pid * 37) % NBP
    tl.atomic_add(out_ptr + b, hist, mask=(hist > 0) & (b < NB), sem="relaxed")


@triton.jit
def _private_kernel(x_ptr, out_ptr, N, NB, n_progs, BLOCK: tl.constexpr, NBP: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros([NBP], dtype=tl.int32)
    for t in tl.range(pid, tl.cdiv(N, BLOCK), n_progs):
        offs = t * BLOCK + tl.arange(0, BLOCK)
        acc += tl.histogram(tl.load(x_ptr + offs, mask=offs < N, other=0), NBP, mask=offs < N)
    _staggered_merge(out_ptr, acc, NB, pid, NBP)


@triton.jit
def _warp_copies_kernel(x_ptr, out_ptr, N, WARPS: tl.constexpr, NBP: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    keys = tl.reshape(tl.load(x_ptr + offs, mask=offs < N, other=0), [WARPS, BLOCK // WARPS])
    w_ids = tl.arange(0, WARPS)[:, None]
    copies = tl.zeros([WARPS, NBP], dtype=tl.int32)
    for w in tl.static_range(WARPS):
        mine = tl.sum(tl.where(w_ids == w, keys, 0), axis=0)
        copies += tl.where(w_ids == w, tl.histogram(mine, NBP)[None, :], 0)
    tl.atomic_add(out_ptr + tl.arange(0, NBP), tl.sum(copies, axis=0), sem="relaxed")


@triton.jit
def hist_global_persistent(x_ptr, out_ptr, N, n_progs, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for t in tl.range(pid, tl.cdiv(N, BLOCK), n_progs):
        offs = t.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = offs < N
        keys = tl.load(x_ptr + offs, mask=m, other=0)
        tl.atomic_add(out_ptr + keys, tl.full([BLOCK], 1, tl.int32), mask=m, sem="relaxed")


def kernel(x, *, NB):
    x = x.contiguous()
    N = x.numel()
    out = torch.zeros(NB, dtype=torch.int32, device=x.device)
    n_sm = torch.cuda.get_device_properties(x.device).multi_processor_count
    progs = max(1, min(2 * n_sm, triton.cdiv(N, BLOCK)))
    if False:
        _private_kernel[(progs,)](x, out, N, NB, progs, BLOCK=BLOCK, NBP=triton.next_power_of_2(NB))
    hist_global_persistent[(progs,)](x, out, N, progs, BLOCK=BLOCK, num_warps=8)
    return out
