"""flash_attention_fwd: exact semantics (float64, in query chunks), the PyTorch baseline, and the input maker.

o = softmax(q k^T * D^-0.5 + mask) v per (batch, query head), query head h reading KV head h // (Hq/Hkv);
lse = natural-log logsumexp of the scaled, masked scores.
"""

from __future__ import annotations

import math

import torch

# "normal" is the catalog's Q, K, V ~ N(0,1): scores ~ N(0,1), so |o| ~ 0.02 in late rows and zeros nearly pass
#   on o alone (lse catches them).
# "sharp" scales q by 2.5: scores ~ N(0, 6.25), a few keys dominate each row and |o| ~ 0.3, so a constant or
#   zero o fails everywhere and a kernel that rescales the accumulator wrongly (alpha) is visible.
# "offset" draws q and k around a common mean m = sqrt(140 / sqrt(D)) per coordinate: every score is ~140 at any
#   head dim (D m^2 / sqrt(D)), past fp32 exp's 88.7, so a kernel that exponentiates without subtracting the
#   running max overflows, while the per-key spread sqrt(m^2 + 1) (3.7 at D = 128, 5.1 at D = 32) keeps the softmax
#   about as concentrated as "sharp". (A fixed mean of 3 gave scores of ~100 at D = 128 but only ~51 on the D = 32
#   smoke workload, where exp(51) does not overflow.)
DISTRIBUTIONS = ("normal", "sharp", "offset")

OFFSET_SCORE = 140.0  # the "offset" draw's typical score, past fp32 exp's overflow at 88.7

_REF_CHUNK_ROWS = 1024  # query rows per float64 chunk: a [G, 1024, 32768] fp64 score block is 1 GB at G = 4


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    q = torch.randn(shapes["q"], generator=generator, device=device, dtype=torch.float32)
    k = torch.randn(shapes["k"], generator=generator, device=device, dtype=torch.float32)
    v = torch.randn(shapes["v"], generator=generator, device=device, dtype=torch.float32)
    if dist == "sharp":
        q = q * 2.5
    elif dist == "offset":
        m = math.sqrt(OFFSET_SCORE / math.sqrt(shapes["q"][-1]))
        q = q + m
        k = k + m
    elif dist != "normal":
        raise ValueError(f"unknown distribution {dist!r}")
    return q.to(dtypes["q"]), k.to(dtypes["k"]), v.to(dtypes["v"])


def reference(q, k, v, *, causal):
    """float64 attention, one (batch, KV head) and one chunk of query rows at a time (all G query heads of the
    KV head together), so no [B, Hq, S, S] score tensor is ever materialized."""
    B, Hq, S, D = q.shape
    Hkv = k.shape[1]
    G = Hq // Hkv
    scale = D ** -0.5
    o = torch.empty_like(q)
    lse = torch.empty(B, Hq, S, dtype=torch.float32, device=q.device)
    keys = torch.arange(S, device=q.device)
    for b in range(B):
        for h in range(Hkv):
            kk = k[b, h].double()
            vv = v[b, h].double()
            for r0 in range(0, S, _REF_CHUNK_ROWS):
                r1 = min(S, r0 + _REF_CHUNK_ROWS)
                qq = q[b, h * G:(h + 1) * G, r0:r1].double()               # [G, R, D]
                s = torch.matmul(qq, kk.T) * scale                          # [G, R, S]
                if causal:
                    rows = torch.arange(r0, r1, device=q.device)
                    s.masked_fill_(keys[None, :] > rows[:, None], float("-inf"))
                lse[b, h * G:(h + 1) * G, r0:r1] = torch.logsumexp(s, dim=-1).float()
                o[b, h * G:(h + 1) * G, r0:r1] = torch.matmul(torch.softmax(s, dim=-1), vv).to(q.dtype)
    return o, lse


_GQA_NATIVE = True  # flipped once if this PyTorch build's flash op rejects Hkv < Hq


def baseline(q, k, v, *, causal):
    """PyTorch's FlashAttention-2 kernel, which returns o and the natural-log LSE in one call and reads the KV
    heads in place for GQA (what F.scaled_dot_product_attention(..., enable_gqa=True) dispatches to on the flash
    backend; the public SDPA call does not return the LSE). On CPU, the CPU flash kernel with K/V expanded."""
    global _GQA_NATIVE
    G = q.shape[1] // k.shape[1]
    if q.is_cuda:
        if _GQA_NATIVE or G == 1:
            try:
                out = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal)
                return out[0], out[1]
            except RuntimeError:
                _GQA_NATIVE = False
        out = torch.ops.aten._scaled_dot_product_flash_attention(
            q, k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1), 0.0, causal)
        return out[0], out[1]
    out = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1), 0.0, causal)
    return out[0], out[1]
