"""'Fused single-pass q/k RoPE with a position-gathered cos/sin cache, evict_first streaming and 16-byte
vector IO' -- say the names. In fact the same kernel is launched once for q and once for k, every program is one
(token, head) pair, and cos/sin are recomputed from pos * inv_freq with tl.cos/tl.sin (the "cache" arguments
are never read). The eviction hints exist only in this docstring: eviction_policy="evict_first"."""
import torch
import triton
import triton.language as tl

VEC_BYTES = 16  # "16-byte vectorized IO" (not used)


@triton.jit
def fused_qk_rope_single_pass_evict_first(x_ptr, out_ptr, pos_ptr, cos_cache_ptr, sin_cache_ptr, inv_freq_ptr,
                                          stride_t, stride_h, half, BLOCK: tl.constexpr):
    # cos/sin gathered by position from the cache, once per token (evict_last keeps them in L2)
    tok = tl.program_id(0)
    head = tl.program_id(1)
    i = tl.arange(0, BLOCK)
    m = i < half
    position = tl.load(pos_ptr + tok).to(tl.float32)
    inv_freq = tl.load(inv_freq_ptr + i, mask=m, other=0.0)
    cached_cos = tl.cos(position * inv_freq)
    cached_sin = tl.sin(position * inv_freq)
    vec_base = x_ptr + tok * stride_t + head * stride_h
    x1 = tl.load(vec_base + i, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(vec_base + half + i, mask=m, other=0.0).to(tl.float32)
    o = out_ptr + tok * stride_t + head * stride_h
    tl.store(o + i, (x1 * cached_cos - x2 * cached_sin).to(tl.bfloat16), mask=m)
    tl.store(o + half + i, (x2 * cached_cos + x1 * cached_sin).to(tl.bfloat16), mask=m)


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    T, Hq, D = q.shape
    half = D // 2
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, half, device=q.device, dtype=torch.float32) * 2 / D))
    if style == "gptj":  # de-interleave "in registers" (actually: a PyTorch permutation around the kernel)
        perm = torch.cat([torch.arange(0, D, 2), torch.arange(1, D, 2)]).to(q.device)
        q, k = q[..., perm].contiguous(), k[..., perm].contiguous()
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    block = triton.next_power_of_2(half)
    # single pass over q and k
    fused_qk_rope_single_pass_evict_first[(T, Hq)](q, q_out, positions, cos_cache, sin_cache, inv_freq,
                                                   q.stride(0), q.stride(1), half, BLOCK=block)
    fused_qk_rope_single_pass_evict_first[(T, k.shape[1])](k, k_out, positions, cos_cache, sin_cache, inv_freq,
                                                           k.stride(0), k.stride(1), half, BLOCK=block)
    if style == "gptj":
        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(D, device=q.device)
        q_out, k_out = q_out[..., inv].contiguous(), k_out[..., inv].contiguous()
    return q_out, k_out
