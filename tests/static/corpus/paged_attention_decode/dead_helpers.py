"""One program per (sequence, KV head) over the whole sequence: the G query heads are a [G_PAD, D] tl.dot block and
each 64-token tile loads its page ids as a vector, but page offsets stay int32, every tile is masked, the online
softmax uses tl.exp and nothing is split. A chunk planner, a merge kernel, an exp2 update, an evict_first loader
and an int64 branch exist in the file but never run."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
USE_INT64 = tl.constexpr(False)


@triton.jit
def _exp2_update(m_i, s, qk_scale):
    m_new = tl.maximum(m_i, tl.max(s * qk_scale, axis=1))
    return m_new, tl.exp2(s * qk_scale - m_new[:, None])


@triton.jit
def _evict_first_load(ptrs, ok):
    return tl.load(ptrs, mask=ok[:, None], other=0.0, eviction_policy="evict_first")


@triton.jit
def _merge_partials_kernel(po_ptr, plse_ptr, o_ptr, S, D: tl.constexpr, S_PAD: tl.constexpr):
    row = tl.program_id(0)
    s = tl.arange(0, S_PAD)
    d = tl.arange(0, D)
    lse = tl.load(plse_ptr + row * S + s, mask=s < S, other=float("-inf"))
    w = tl.exp2(lse - tl.max(lse, axis=0))
    po = tl.load(po_ptr + (row * S + s)[:, None] * D + d[None, :], mask=(s < S)[:, None], other=0.0)
    tl.store(o_ptr + row * D + d, tl.sum(w[:, None] * po, axis=0) / tl.sum(w, axis=0))


@triton.jit
def _paged_group_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, o_ptr, sm_scale,
                        stride_qb, stride_qh, stride_kp, stride_ks, stride_kh, stride_btb,
                        G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, P: tl.constexpr,
                        BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    ctx = tl.load(lens_ptr + b)
    offs_g = tl.arange(0, G_PAD)
    offs_d = tl.arange(0, D)
    g_ok = offs_g < G
    q_off = b * stride_qb + (h * G + offs_g)[:, None] * stride_qh + offs_d[None, :]
    q = tl.load(q_ptr + q_off, mask=g_ok[:, None], other=0.0)
    m_i = tl.full([G_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    for n0 in range(0, ctx, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        n_ok = offs_n < ctx
        pages = tl.load(bt_ptr + b * stride_btb + offs_n // P, mask=n_ok, other=0)
        if USE_INT64:
            pages = pages.to(tl.int64)
        row = pages * stride_kp + (offs_n % P) * stride_ks + h * stride_kh
        k = tl.load(k_ptr + row[:, None] + offs_d[None, :], mask=n_ok[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * sm_scale
        s = tl.where(n_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + row[:, None] + offs_d[None, :], mask=n_ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(o_ptr + q_off, (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=g_ok[:, None])


def _plan_chunks(context_lens, chunk=1024):
    n = (context_lens + chunk - 1) // chunk
    return torch.repeat_interleave(torch.arange(n.numel(), device=n.device), n), torch.cumsum(n, 0) - n


def kernel(q, k_cache, v_cache, block_tables, context_lens):
    B, Hq, D = q.shape
    _, P, Hkv, _ = k_cache.shape
    G = Hq // Hkv
    o = torch.empty_like(q)
    _paged_group_kernel[(B, Hkv)](q, k_cache, v_cache, block_tables, context_lens, o, D ** -0.5,
                                  q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                                  block_tables.stride(0), G=G, G_PAD=max(16, triton.next_power_of_2(G)), D=D, P=P,
                                  BLOCK_N=max(64, P), num_warps=4)
    return o
