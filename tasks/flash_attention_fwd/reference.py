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
    KV head together), so no [B, Hq, S, S] score tensor is ever materialized. A causal chunk reads only the keys
    up to its last row (the others are masked for every row of it: half the work of a causal call), and the
    probabilities are exp(s - lse) from the LSE already computed (one pass over the scores fewer than softmax)."""
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
                n = r1 if causal else S
                s = torch.matmul(qq, kk[:n].T) * scale                      # [G, R, n]
                if causal:
                    rows = torch.arange(r0, r1, device=q.device)
                    s.masked_fill_(keys[None, :n] > rows[:, None], float("-inf"))
                m = torch.logsumexp(s, dim=-1)                              # [G, R]
                lse[b, h * G:(h + 1) * G, r0:r1] = m.float()
                s.sub_(m[..., None]).exp_()
                o[b, h * G:(h + 1) * G, r0:r1] = torch.matmul(s, vv[:n]).to(q.dtype)
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


# ------------------------------------------------------------------------------------- baseline candidates
# The SDPA backends are called through the ATen ops that F.scaled_dot_product_attention dispatches to under
# torch.nn.attention.sdpa_kernel(SDPBackend.<backend>), because the public call does not return the LSE. Schemas
# and LSE shapes read in torch 2.13 (_meta_registrations.py): flash [B, H, S]; efficient [B, H, ceil(S/32)*32]
# (padded); cuDNN [B, H, S, 1]; all natural-log. Each op is first tried with the KV heads as they are (GQA read in
# place) and, if it refuses Hkv < Hq, with K/V repeated G times (what SDPA does for such backends), once per
# process. FlexAttention returns a natural-log LSE (torch 2.13 flex_attention.py rescales its log2 statistics).
# flash-attn's flash_attn_func takes [B, S, H, D] (strided views accepted: only the last dim must be contiguous)
# and returns the natural-log LSE [B, H, S] with return_attn_probs=True; FlashInfer's LSE is base 2 (vLLM's
# FlashInfer backend merges it with is_lse_base_on_e=False). None of the GPU paths is run here.

_GQA_NATIVE_OPS: dict[str, bool] = {}


def _gqa(name, op, q, k, v):
    """op(q, k, v) with the KV heads in place where the backend accepts Hkv < Hq, else with K/V repeated G times."""
    G = q.shape[1] // k.shape[1]
    if G > 1 and _GQA_NATIVE_OPS.get(name, True):
        try:
            out = op(q, k, v)
            _GQA_NATIVE_OPS[name] = True
            return out
        except RuntimeError:
            _GQA_NATIVE_OPS[name] = False
    if G > 1:
        k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
    return op(q, k, v)


def baseline_sdpa_flash(q, k, v, *, causal):
    """SDPA's FlashAttention-2 backend (aten::_scaled_dot_product_flash_attention)."""
    out = _gqa("flash", lambda q_, k_, v_: torch.ops.aten._scaled_dot_product_flash_attention(
        q_, k_, v_, 0.0, causal), q, k, v)
    return out[0], out[1]


def baseline_sdpa_efficient(q, k, v, *, causal):
    """SDPA's memory-efficient (CUTLASS) backend (aten::_scaled_dot_product_efficient_attention)."""
    out = _gqa("efficient", lambda q_, k_, v_: torch.ops.aten._scaled_dot_product_efficient_attention(
        q_, k_, v_, None, True, 0.0, causal), q, k, v)
    return out[0], out[1][..., :q.shape[2]]


def baseline_sdpa_cudnn(q, k, v, *, causal):
    """SDPA's cuDNN backend (aten::_scaled_dot_product_cudnn_attention)."""
    out = _gqa("cudnn", lambda q_, k_, v_: torch.ops.aten._scaled_dot_product_cudnn_attention(
        q_, k_, v_, None, True, 0.0, causal), q, k, v)
    return out[0], out[1].reshape(q.shape[:3])


_FLEX: dict[object, object] = {}


def _flex_attention(device):
    """flex_attention, compiled once per process on CUDA (its fused Triton kernel); eager elsewhere."""
    from torch.nn.attention.flex_attention import flex_attention

    if device.type != "cuda":
        return flex_attention
    if "compiled" not in _FLEX:
        _FLEX["compiled"] = torch.compile(flex_attention, dynamic=False)
    return _FLEX["compiled"]


def _causal_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def baseline_flex_attention(q, k, v, *, causal):
    """FlexAttention (torch.compile'd Triton kernel) with a causal BlockMask, GQA read in place, LSE returned."""
    from torch.nn.attention.flex_attention import create_block_mask

    S = q.shape[2]
    mask = None
    if causal:
        key = ("causal", S, str(q.device))
        if key not in _FLEX:
            _FLEX[key] = create_block_mask(_causal_mask, None, None, S, S, device=q.device)
        mask = _FLEX[key]
    fn = _flex_attention(q.device)
    try:
        from torch.nn.attention.flex_attention import AuxRequest
    except ImportError:  # releases before return_aux
        return fn(q, k, v, block_mask=mask, enable_gqa=True, return_lse=True)
    out, aux = fn(q, k, v, block_mask=mask, enable_gqa=True, return_aux=AuxRequest(lse=True))
    return out, aux.lse


def baseline_flash_attn(q, k, v, *, causal):
    """flash-attn's flash_attn_func (FlashAttention-2) on [B, S, H, D] views, GQA in place."""
    from flash_attn import flash_attn_func

    out, lse, _ = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal,
                                  return_attn_probs=True)
    return out.transpose(1, 2), lse


def baseline_flashinfer(q, k, v, *, causal):
    """FlashInfer's single-request prefill per batch entry (K/V in its HND layout, as stored), LSE to natural log."""
    from flashinfer.prefill import single_prefill_with_kv_cache_return_lse

    o = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
    for b in range(q.shape[0]):
        ob, lb = single_prefill_with_kv_cache_return_lse(q[b].transpose(0, 1).contiguous(), k[b], v[b],
                                                         causal=causal, kv_layout="HND")
        o[b] = ob.transpose(0, 1)
        lse[b] = lb.transpose(0, 1) * math.log(2.0)
    return o, lse
