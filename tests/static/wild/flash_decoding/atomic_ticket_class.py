"""Split-KV decode behind a launcher class that keeps its fp32 workspaces and arrival counters between calls.
One kernel over (B*Hkv, S): the G query heads of a KV head packed into a [G_PAD, D] block (G_PAD = max(16,
next_pow2(G)), 1 for MHA) for tl.dot, or an FMA path selected on the host for MHA (USE_DOT = G > 1); D^-0.5*log2(e) folded
into the fp32 scores, exp2 everywhere; K/V loaded evict_first with 3 stages; each split stores its partial and
lse, takes a ticket with an acq_rel atomic_add per (b, kv_head), and the last to arrive merges. S comes from the
SM count; with S = 1 the program writes the output directly."""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _split_decode(q_ptr, k_ptr, v_ptr, o_ptr, part_ptr, lse_ptr, cnt_ptr, Hkv, L, G, S, chunk, qk_scale,
                  sqb, sqh, skb, skh, skl, G_PAD: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
                  USE_DOT: tl.constexpr, SINGLE: tl.constexpr):
    bh = tl.program_id(0)
    s = tl.program_id(1)
    b = bh // Hkv
    kvh = bh % Hkv
    g = tl.arange(0, G_PAD)
    heads = kvh * G + g
    gmask = g < G
    d = tl.arange(0, D)
    q = tl.load(q_ptr + b * sqb + heads[:, None] * sqh + d[None, :], mask=gmask[:, None], other=0.0)
    m = tl.full([G_PAD], -float("inf"), tl.float32)
    l = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    start = s * chunk
    end = tl.minimum(start + chunk, L)
    kv_base = b * skb + kvh * skh
    for n0 in tl.range(start, end, BLOCK_N, num_stages=3):
        n = n0 + tl.arange(0, BLOCK_N)
        nmask = n < end
        kt = tl.load(k_ptr + kv_base + n[:, None] * skl + d[None, :], mask=nmask[:, None], other=0.0,
                     eviction_policy="evict_first")
        vt = tl.load(v_ptr + kv_base + n[:, None] * skl + d[None, :], mask=nmask[:, None], other=0.0,
                     eviction_policy="evict_first")
        if USE_DOT:
            sc = tl.dot(q, tl.trans(kt)) * qk_scale
        else:
            sc = tl.sum(q.to(tl.float32)[:, None, :] * kt.to(tl.float32)[None, :, :], axis=2) * qk_scale
        sc = tl.where(nmask[None, :], sc, -float("inf"))
        m_new = tl.maximum(m, tl.max(sc, axis=1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(sc - m_new[:, None])
        l = l * alpha + tl.sum(p, axis=1)
        if USE_DOT:
            acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt)
        else:
            acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * vt.to(tl.float32)[None, :, :], axis=1)
        m = m_new
    if SINGLE:
        tl.store(o_ptr + b * sqb + heads[:, None] * sqh + d[None, :], (acc / l[:, None]).to(o_ptr.dtype.element_ty),
                 mask=gmask[:, None])
    else:
        row = (b * Hkv * G + heads) * S + s
        tl.store(part_ptr + row[:, None] * D + d[None, :], acc / l[:, None], mask=gmask[:, None])
        tl.store(lse_ptr + row, m + tl.log2(l), mask=gmask)
        ticket = tl.atomic_add(cnt_ptr + bh, 1, sem="acq_rel")
        if ticket == S - 1:
            ss = tl.arange(0, 16)
            base = (b * Hkv * G + heads) * S
            lse = tl.load(lse_ptr + base[:, None] + ss[None, :], mask=gmask[:, None] & (ss[None, :] < S),
                          other=-float("inf"))
            top = tl.max(lse, axis=1)
            w = tl.exp2(lse - top[:, None])
            w = w / tl.sum(w, axis=1)[:, None]
            out = tl.zeros([G_PAD, D], tl.float32)
            for j in range(S):
                part = tl.load(part_ptr + (base + j)[:, None] * D + d[None, :], mask=gmask[:, None], other=0.0)
                wj = tl.sum(tl.where(ss[None, :] == j, w, 0.0), axis=1)
                out += wj[:, None] * part
            tl.store(o_ptr + b * sqb + heads[:, None] * sqh + d[None, :], out.to(o_ptr.dtype.element_ty),
                     mask=gmask[:, None])
            tl.atomic_xchg(cnt_ptr + bh, 0)


class SplitKVDecoder:
    def __init__(self) -> None:
        self.sms = torch.cuda.get_device_properties(0).multi_processor_count
        self._ws: dict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def splits(self, B: int, Hkv: int, L: int) -> int:
        return max(1, min(triton.cdiv(2 * self.sms, B * Hkv), L // 256, 16))

    def workspace(self, B, Hq, Hkv, S, D, device):
        key = (B, Hq, Hkv, S, D, device)
        if key not in self._ws:
            self._ws[key] = (torch.empty((B * Hq * S, D), device=device, dtype=torch.float32),
                             torch.empty((B * Hq * S,), device=device, dtype=torch.float32),
                             torch.zeros((B * Hkv,), device=device, dtype=torch.int32))
        return self._ws[key]

    def __call__(self, q, k_cache, v_cache):
        B, Hq, D = q.shape
        Hkv, L = k_cache.shape[1], k_cache.shape[2]
        G = Hq // Hkv
        S = self.splits(B, Hkv, L)
        chunk = triton.cdiv(triton.cdiv(L, S), 64) * 64
        S = triton.cdiv(L, chunk)
        o = torch.empty_like(q)
        part, lse, cnt = self.workspace(B, Hq, Hkv, S, D, q.device)
        _split_decode[(B * Hkv, S)](q, k_cache, v_cache, o, part, lse, cnt, Hkv, L, G, S, chunk,
                                    D ** -0.5 * math.log2(math.e), q.stride(0), q.stride(1), k_cache.stride(0),
                                    k_cache.stride(1), k_cache.stride(2),
                                    G_PAD=max(16, triton.next_power_of_2(G)) if G > 1 else 1,
                                    D=D, BLOCK_N=64, USE_DOT=G > 1, SINGLE=S == 1, num_warps=4)
        return o


kernel = SplitKVDecoder()
