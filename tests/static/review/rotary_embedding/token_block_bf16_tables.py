"""Fused RoPE with [BLOCK_T, H, D/2] tiles, autotuned BLOCK_T; cos/sin tables narrowed to bf16 on the host.

One program per BLOCK_T tokens covers all q heads and all k heads with 3-D pointer grids; cos/sin are gathered by
position once as [BLOCK_T, 1, D/2]. The tables are converted to bf16 once per call to halve their bytes. The head
stride is marked do_not_specialize (one compile for every head count).
"""
import torch
import triton
import triton.language as tl

ROPE_CONFIGS = [triton.Config({"BLOCK_T": bt}, num_warps=w) for bt in (2, 4, 8) for w in (4, 8)]


@triton.jit
def _rot3(ptr, offs_t, offs_h, offs_d, stride_t, stride_h, c, s, mask,
          HALF: tl.constexpr, NEOX: tl.constexpr, HINT: tl.constexpr):
    base = ptr + offs_t[:, None, None].to(tl.int64) * stride_t + offs_h[None, :, None] * stride_h
    if NEOX:
        p1 = base + offs_d[None, None, :]
        if HINT:
            x1 = tl.load(p1, mask=mask, eviction_policy="evict_first")
            x2 = tl.load(p1 + HALF, mask=mask, eviction_policy="evict_first")
        else:
            x1 = tl.load(p1, mask=mask)
            x2 = tl.load(p1 + HALF, mask=mask)
        x1 = x1.to(tl.float32)
        x2 = x2.to(tl.float32)
        tl.store(p1, (x1 * c - x2 * s).to(tl.bfloat16), mask=mask)
        tl.store(p1 + HALF, (x2 * c + x1 * s).to(tl.bfloat16), mask=mask)
    else:
        pf = base + tl.arange(0, 2 * HALF)[None, None, :]
        if HINT:
            x = tl.load(pf, mask=mask, eviction_policy="evict_first")
        else:
            x = tl.load(pf, mask=mask)
        x = x.to(tl.float32)
        xe, xo = tl.split(tl.reshape(x, [x.shape[0], x.shape[1], HALF, 2]))
        out = tl.join(xe * c - xo * s, xo * c + xe * s)
        tl.store(pf, tl.reshape(out, [x.shape[0], x.shape[1], 2 * HALF]).to(tl.bfloat16), mask=mask)


@triton.autotune(configs=ROPE_CONFIGS, key=["T"])
@triton.jit(do_not_specialize=["stride_qh", "stride_kh"])
def _rope_blocks(q_ptr, k_ptr, pos_ptr, cos_ptr, sin_ptr, T,
                 stride_qt, stride_qh, stride_kt, stride_kh,
                 HQ: tl.constexpr, HKV: tl.constexpr, HALF: tl.constexpr,
                 BLOCK_T: tl.constexpr, NEOX: tl.constexpr):
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_d = tl.arange(0, HALF)
    t_ok = offs_t < T
    pos = tl.load(pos_ptr + offs_t, mask=t_ok, other=0)
    cs = pos[:, None, None] * HALF + offs_d[None, None, :]
    c = tl.load(cos_ptr + cs, mask=t_ok[:, None, None], other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + cs, mask=t_ok[:, None, None], other=0.0).to(tl.float32)
    hq = tl.arange(0, HQ)
    _rot3(q_ptr, offs_t, hq, offs_d, stride_qt, stride_qh, c, s, t_ok[:, None, None], HALF, NEOX, True)
    hk = tl.arange(0, HKV)
    _rot3(k_ptr, offs_t, hk, offs_d, stride_kt, stride_kh, c, s, t_ok[:, None, None], HALF, NEOX, False)


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    T, HQ, D = q.shape
    HKV = k.shape[1]
    cos16 = cos_cache.to(torch.bfloat16)
    sin16 = sin_cache.to(torch.bfloat16)
    grid = lambda meta: (triton.cdiv(T, meta["BLOCK_T"]),)
    _rope_blocks[grid](q, k, positions, cos16, sin16, T, q.stride(0), q.stride(1), k.stride(0), k.stride(1),
                       HQ=HQ, HKV=HKV, HALF=D // 2, NEOX=(style == "neox"))
    return q, k
