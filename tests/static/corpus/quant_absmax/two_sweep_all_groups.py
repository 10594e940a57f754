"""Two sweeps for every group size: a program per group computes an fp32 running max over 2048-element tiles
loaded with evict_last, then re-reads the group (evict_first) and quantizes with the inverse scale, clamp and
rint, storing q with .cs. Right for the 53k-wide groups; for G = 128 or 8192 it reads x twice."""
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def absmax_two_sweep(x_ptr, q_ptr, s_ptr, G, n_groups, stride_x, stride_q,
                     QMAX: tl.constexpr, IS_FP8: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = (pid // n_groups).to(tl.int64)
    col0 = (pid % n_groups) * G
    src = x_ptr + row * stride_x + col0
    dst = q_ptr + row * stride_q + col0
    offs = tl.arange(0, BLOCK)
    run = tl.zeros([BLOCK], dtype=tl.float32)
    for start in tl.range(0, G, BLOCK):
        v = tl.load(src + start + offs, mask=start + offs < G, other=0.0, eviction_policy="evict_last")
        run = tl.maximum(run, tl.abs(v.to(tl.float32)))
    amax = tl.maximum(tl.max(run, axis=0), 1e-12)
    inv = QMAX / amax
    for start in tl.range(0, G, BLOCK):
        mask = start + offs < G
        v = tl.load(src + start + offs, mask=mask, other=0.0, eviction_policy="evict_first")
        y = tl.clamp(v.to(tl.float32) * inv, -QMAX, QMAX)
        if IS_FP8:
            tl.store(dst + start + offs, y.to(tl.float8e4nv), mask=mask, cache_modifier=".cs")
        else:
            tl.store(dst + start + offs, libdevice.rint(y).to(tl.int8), mask=mask, cache_modifier=".cs")
    tl.store(s_ptr + pid, amax / QMAX)


def kernel(x, *, G, qdtype):
    M, N = x.shape
    x = x.contiguous()
    is_fp8 = qdtype == "fp8_e4m3"
    q = torch.empty((M, N), device=x.device, dtype=torch.float8_e4m3fn if is_fp8 else torch.int8)
    s = torch.empty((M, N // G), device=x.device, dtype=torch.float32)
    block = min(2048, triton.next_power_of_2(G))
    absmax_two_sweep[(M * (N // G),)](x, q, s, G, N // G, x.stride(0), q.stride(0),
                                      QMAX=448.0 if is_fp8 else 127.0, IS_FP8=is_fp8, BLOCK=block, num_warps=8)
    return q, s
