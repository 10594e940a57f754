# task: rotary_embedding
# expect: passed
# style: q and k rotated in place (the task allows q_out to alias q and k_out k), as vLLM's rotary op does; the
# style: cos/sin rows of the token positions gathered on the host with index_select (13 rows of a 131072-row
# style: cache) and made contiguous; the rotation style (NeoX halves vs. GPT-J pairs) a constexpr picked on the
# style: host from the style string; one launch per tensor through a host helper
# needs: inplace
"""RoPE: program (t, h-block) loads the token's cos/sin row (D/2 fp32) once and rotates HEADS heads of q or k,
in fp32, storing bf16 back over the input."""

import triton
import triton.language as tl


@triton.jit
def _rope_inplace(x_ptr, cos_ptr, sin_ptr, n_heads, stride_t, stride_h, stride_c,
                  HALF: tl.constexpr, HEADS: tl.constexpr, IS_NEOX: tl.constexpr):
    t = tl.program_id(0)
    heads = tl.program_id(1) * HEADS + tl.arange(0, HEADS)
    i = tl.arange(0, HALF)
    c = tl.load(cos_ptr + t * stride_c + i)[None, :]
    s = tl.load(sin_ptr + t * stride_c + i)[None, :]
    if IS_NEOX:
        first, second = i, i + HALF
    else:
        first, second = 2 * i, 2 * i + 1
    base = x_ptr + t * stride_t + heads[:, None] * stride_h
    mask = heads[:, None] < n_heads
    x1 = tl.load(base + first[None, :], mask=mask).to(tl.float32)
    x2 = tl.load(base + second[None, :], mask=mask).to(tl.float32)
    tl.store(base + first[None, :], (x1 * c - x2 * s).to(x_ptr.dtype.element_ty), mask=mask)
    tl.store(base + second[None, :], (x2 * c + x1 * s).to(x_ptr.dtype.element_ty), mask=mask)


def _rotate_(x, cos, sin, is_neox):
    T, H, D = x.shape
    heads = min(triton.next_power_of_2(H), 8)
    _rope_inplace[(T, triton.cdiv(H, heads))](x, cos, sin, H, x.stride(0), x.stride(1), cos.stride(0),
                                              HALF=D // 2, HEADS=heads, IS_NEOX=is_neox)


def rotary_embedding_(q, k, positions, cos_cache, sin_cache, style="neox"):
    if style not in ("neox", "gptj"):
        raise ValueError(f"unknown rotary style {style!r}")
    positions = positions.view(-1)
    cos = cos_cache.index_select(0, positions).contiguous()
    sin = sin_cache.index_select(0, positions).contiguous()
    _rotate_(q, cos, sin, style == "neox")
    _rotate_(k, cos, sin, style == "neox")
    return q, k


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    return rotary_embedding_(q, k, positions, cos_cache, sin_cache, style)
