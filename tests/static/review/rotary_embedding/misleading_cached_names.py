"""RoPE 'from the cache': one program per (token, head), launched once for q and once for k.

The names say cached cos/sin and deinterleave; the angles are recomputed from the position and the GPT-J pairs
come from two stride-2 loads.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rope_cached(x_ptr, pos_ptr, inv_freq_ptr, stride_t, stride_h, HALF: tl.constexpr, NEOX: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    offs = tl.arange(0, HALF)
    base = x_ptr + t * stride_t + h * stride_h
    pos = tl.load(pos_ptr + t).to(tl.float32)
    theta = pos * tl.load(inv_freq_ptr + offs)
    cos_cached = tl.cos(theta)
    sin_cached = tl.sin(theta)
    if NEOX:
        x1 = tl.load(base + offs).to(tl.float32)
        x2 = tl.load(base + HALF + offs).to(tl.float32)
        tl.store(base + offs, (x1 * cos_cached - x2 * sin_cached).to(tl.bfloat16))
        tl.store(base + HALF + offs, (x2 * cos_cached + x1 * sin_cached).to(tl.bfloat16))
    else:
        deint_even = tl.load(base + 2 * offs).to(tl.float32)
        deint_odd = tl.load(base + 2 * offs + 1).to(tl.float32)
        tl.store(base + 2 * offs, (deint_even * cos_cached - deint_odd * sin_cached).to(tl.bfloat16))
        tl.store(base + 2 * offs + 1, (deint_odd * cos_cached + deint_even * sin_cached).to(tl.bfloat16))


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    T, HQ, D = q.shape
    HKV = k.shape[1]
    half = D // 2
    inv_freq = 10000.0 ** (-torch.arange(0, half, device=q.device, dtype=torch.float32) * 2.0 / D)
    neox = style == "neox"
    _rope_cached[(T, HQ)](q, positions, inv_freq, q.stride(0), q.stride(1), HALF=half, NEOX=neox)
    _rope_cached[(T, HKV)](k, positions, inv_freq, k.stride(0), k.stride(1), HALF=half, NEOX=neox)
    return q, k
