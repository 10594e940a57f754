"""A per-token RoPE kernel (q and k in one launch, cos/sin loaded once per token) whose better parts are never
used: a [BLOCK_T, H, D/2] token-block kernel, a tl.split/tl.join GPT-J helper with eviction hints, and a uint4
CUDA string are defined but never launched, called or compiled. GPT-J runs with two stride-2 loads."""
import torch
import triton
import triton.language as tl

CUDA_UINT4 = r"""
__global__ void rope_vec(const uint4* __restrict__ q, uint4* __restrict__ qo, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) qo[i] = __ldcs(q + i);
}
"""


@triton.jit
def _gptj_split_join(x_row, o_row, c, s, HALF: tl.constexpr):
    d = tl.arange(0, 2 * HALF)
    x = tl.load(x_row + d, eviction_policy="evict_first").to(tl.float32)
    a, b = tl.split(tl.reshape(x, [HALF, 2]))
    tl.store(o_row + d, tl.reshape(tl.join(a * c - b * s, b * c + a * s), [2 * HALF]).to(tl.bfloat16))


@triton.jit
def _token_block_kernel(q, pos, cos, out, T, H, HALF: tl.constexpr, BT: tl.constexpr, BH: tl.constexpr):
    t = tl.program_id(0) * BT + tl.arange(0, BT)
    h = tl.arange(0, BH)
    d = tl.arange(0, HALF)
    p = tl.load(pos + t, mask=t < T, other=0)
    c = tl.load(cos + p[:, None] * HALF + d[None, :], eviction_policy="evict_last")[:, None, :]
    ptr = q + t[:, None, None] * H * 2 * HALF + h[None, :, None] * 2 * HALF + d[None, None, :]
    tl.store(out + (ptr - q), tl.load(ptr) * c)


@triton.jit
def _rot_rows(x, y, t, st, H, c, s, i, im, half, D, gptj, BH: tl.constexpr):
    h = tl.arange(0, BH)[:, None]
    m = (h < H) & im[None, :]
    row = x + t * st + h * D
    orow = y + t * st + h * D
    if gptj:
        x1 = tl.load(row + 2 * i[None, :], mask=m, other=0.0).to(tl.float32)
        x2 = tl.load(row + 2 * i[None, :] + 1, mask=m, other=0.0).to(tl.float32)
        tl.store(orow + 2 * i[None, :], (x1 * c - x2 * s).to(tl.bfloat16), mask=m)
        tl.store(orow + 2 * i[None, :] + 1, (x2 * c + x1 * s).to(tl.bfloat16), mask=m)
    else:
        x1 = tl.load(row + i[None, :], mask=m, other=0.0).to(tl.float32)
        x2 = tl.load(row + half + i[None, :], mask=m, other=0.0).to(tl.float32)
        tl.store(orow + i[None, :], (x1 * c - x2 * s).to(tl.bfloat16), mask=m)
        tl.store(orow + half + i[None, :], (x2 * c + x1 * s).to(tl.bfloat16), mask=m)


@triton.jit
def rope_token_kernel(q, k, pos, cos, sin, qo, ko, HQ, HK, half, stride_qt, stride_kt, D, gptj,
                      BH: tl.constexpr, BHALF: tl.constexpr):
    t = tl.program_id(0)
    p = tl.load(pos + t)
    i = tl.arange(0, BHALF)
    im = i < half
    c = tl.load(cos + p * half + i, mask=im, other=0.0)[None, :]
    s = tl.load(sin + p * half + i, mask=im, other=0.0)[None, :]
    _rot_rows(q, qo, t, stride_qt, HQ, c, s, i, im, half, D, gptj, BH)
    _rot_rows(k, ko, t, stride_kt, HK, c, s, i, im, half, D, gptj, BH)


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    T, Hq, D = q.shape
    Hkv = k.shape[1]
    q, k = q.contiguous(), k.contiguous()
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    rope_token_kernel[(T,)](q, k, positions, cos_cache, sin_cache, qo, ko, Hq, Hkv, D // 2, q.stride(0),
                            k.stride(0), D, style == "gptj", BH=triton.next_power_of_2(max(Hq, Hkv)),
                            BHALF=triton.next_power_of_2(D // 2))
    return qo, ko
