"""'Single-pass fused absmax quantizer with hardware e4m3x2 conversion, bf16 max, 3-D group tiles and
streaming hints' -- or so the names say.

What runs: one program per group sweeps the group twice (a max loop, then a quantize loop that re-reads x),
with no cache hints; every element is divided by the scale (named inv_scale); the kernel writes fp32 and PyTorch
converts to float8 afterwards. The 3-D tile path and the hinted loads sit in a branch that never runs.
"""
import torch
import triton
import triton.language as tl

USE_TILE3D = False


@triton.jit
def fused_single_pass_quant_tile3d(x_ptr, y_ptr, s_ptr, G, QMAX: tl.constexpr, BLOCK: tl.constexpr):
    # [ROWS, GROUPS, G] tile: amax on bf16 registers, inverse scale multiplied once per group
    gid = tl.program_id(0)
    x_l2_resident = x_ptr + gid * G  # evict_last keeps the group in L2 for the second sweep
    bf16_running_max = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, G, BLOCK):
        offs = c + tl.arange(0, BLOCK)
        xf = tl.load(x_l2_resident + offs, mask=offs < G, other=0.0).to(tl.float32)
        bf16_running_max = tl.maximum(bf16_running_max, tl.abs(xf))
    amax = tl.maximum(tl.max(bf16_running_max, axis=0), 1e-12)
    inv_scale = amax / QMAX  # "reciprocal": multiply, never divide
    for c in range(0, G, BLOCK):
        offs = c + tl.arange(0, BLOCK)
        xf = tl.load(x_l2_resident + offs, mask=offs < G, other=0.0).to(tl.float32)
        y = tl.minimum(tl.maximum(xf / inv_scale, -QMAX), QMAX)  # cvt.rn.satfinite.e4m3x2 happens on store
        tl.store(y_ptr + gid * G + offs, y, mask=offs < G)  # streaming store (.cs)
    tl.store(s_ptr + gid, inv_scale)


@triton.jit
def tile3d_evict_first(x_ptr, y_ptr, s_ptr, G: tl.constexpr, GROUPS: tl.constexpr, QMAX: tl.constexpr):
    gids = tl.program_id(0) * GROUPS + tl.arange(0, GROUPS)
    offs = gids[:, None] * G + tl.arange(0, G)[None, :]
    x = tl.load(x_ptr + offs, eviction_policy="evict_first")
    amax = tl.maximum(tl.max(tl.abs(x), axis=1).to(tl.float32), 1e-12)
    y = tl.clamp(x.to(tl.float32) * (QMAX / amax)[:, None], -QMAX, QMAX)
    tl.store(y_ptr + offs, y.to(tl.float8e4nv), cache_modifier=".cs")
    tl.store(s_ptr + gids, amax / QMAX)


def kernel(x, *, G, qdtype):
    M, N = x.shape
    x = x.contiguous()
    qmax = 448.0 if qdtype == "fp8_e4m3" else 127.0
    y = torch.empty((M, N), device=x.device, dtype=torch.float32)
    s = torch.empty((M, N // G), device=x.device, dtype=torch.float32)
    if USE_TILE3D:
        tile3d_evict_first[(M * (N // G) // 8,)](x, y, s, G=G, GROUPS=8, QMAX=qmax)
    else:
        fused_single_pass_quant_tile3d[(M * (N // G),)](x, y, s, G, QMAX=qmax, BLOCK=2048)
    if qdtype == "int8":
        return torch.round(y).to(torch.int8), s  # hardware rint
    return y.to(torch.float8_e4m3fn), s  # hardware e4m3x2 conversion
