"""rotary_embedding: exact semantics (float64), the PyTorch baseline, and the seeded input maker."""

from __future__ import annotations

import torch

ROPE_BASE = 10000.0

# "normal" is the catalog's: q, k ~ N(0,1), positions uniform in [0, max_pos).
# "outliers" gives q and k a few channels 10-40x larger, as the massive activations of real q/k projections; the
# rotation then mixes a large and a small member of a pair, so rounding cos/sin (or computing in bf16) shows.
# "decode" draws positions near the end of the cache and repeats each one across a batch of tokens, as batched
# decode does; the angles p * inv_freq reach ~1.3e5 rad, where fast sin/cos intrinsics are inaccurate.
# "cancelling" builds every pair so that its rotation lands on an axis: (x1, x2) = r (s, c) or r (c, -s) with
# r ~ 4 N(0,1), so one output of the pair is r and the other cancels to the bf16 rounding of the inputs (~2^-9 r).
# Computing the rotation in bf16 (cos/sin, products or the difference rounded at 2^-9 of ~r), or with cos/sin of
# an fp32 angle (~4e-3 rad off at 1e5 rad), leaves an error of ~1e-2 on that member against its 1e-3 + 1e-2|out|
# bound; fp32 with the cached cos/sin is off by ~1e-6.
DISTRIBUTIONS = ("normal", "outliers", "decode", "cancelling")


def rope_cache(max_pos: int, half: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin(p * base^(-2i/D)) for p < max_pos and i < D/2, computed in fp64, stored as fp32."""
    inv_freq = ROPE_BASE ** (-torch.arange(half, dtype=torch.float64, device=device) / half)
    angles = torch.arange(max_pos, dtype=torch.float64, device=device)[:, None] * inv_freq[None, :]
    return torch.cos(angles).float(), torch.sin(angles).float()


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    T, Hq, D = shapes["q"]
    Hkv = shapes["k"][1]
    max_pos, half = shapes["cos_cache"]
    f32 = dict(generator=generator, device=device, dtype=torch.float32)
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {dist!r}")
    if dist == "decode":
        # Drawn first, so q and k differ from the other distributions' draws for the same seed too.
        batch = 4
        distinct = torch.randint(max_pos - max_pos // 8, max_pos, (-(-T // batch),), generator=generator,
                                 device=device)
        positions = distinct.repeat_interleave(batch)[:T]
    q = torch.randn(T, Hq, D, **f32)
    k = torch.randn(T, Hkv, D, **f32)
    if dist != "decode":
        positions = torch.randint(0, max_pos, (T,), generator=generator, device=device)
    if dist == "outliers":
        for x in (q, k):
            chans = torch.randperm(D, generator=generator, device=device)[: max(2, D // 16)]
            x[..., chans] *= 10.0 + 30.0 * torch.rand(chans.numel(), **f32)
    cos, sin = rope_cache(max_pos, half, device)
    if dist == "cancelling":
        c, s = cos[positions][:, None, :], sin[positions][:, None, :]
        for x in (q, k):
            r = 4.0 * torch.randn(*x.shape[:-1], half, **f32)
            first = torch.rand(*x.shape[:-1], half, **f32) < 0.5
            a, b = torch.where(first, r * s, r * c), torch.where(first, r * c, -r * s)
            if params["style"] == "neox":
                x[..., :half], x[..., half:] = a, b
            else:
                x[..., 0::2], x[..., 1::2] = a, b
    return (q.to(dtypes["q"]), k.to(dtypes["k"]), positions.to(dtypes["positions"]), cos.to(dtypes["cos_cache"]),
            sin.to(dtypes["sin_cache"]))


def _rotate64(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor, style: str) -> torch.Tensor:
    xd = x.double()
    c = c.double()[:, None, :]
    s = s.double()[:, None, :]
    if style == "neox":
        x1, x2 = xd.chunk(2, dim=-1)
        out = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
    elif style == "gptj":
        x1, x2 = xd[..., 0::2], xd[..., 1::2]
        out = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).flatten(-2)
    else:
        raise ValueError(f"unknown style {style!r}")
    return out.to(x.dtype)


def reference(q, k, positions, cos_cache, sin_cache, *, style):
    c, s = cos_cache[positions], sin_cache[positions]
    return _rotate64(q, c, s, style), _rotate64(k, c, s, style)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def baseline(q, k, positions, cos_cache, sin_cache, *, style):
    # The standard PyTorch expressions (HF rotate_half for NeoX; even/odd pairs for GPT-J), fp32 math, bf16 out.
    c = cos_cache[positions][:, None, :]
    s = sin_cache[positions][:, None, :]
    if style == "neox":
        c2, s2 = torch.cat((c, c), dim=-1), torch.cat((s, s), dim=-1)
        return ((q * c2 + _rotate_half(q) * s2).to(q.dtype), (k * c2 + _rotate_half(k) * s2).to(k.dtype))
    outs = []
    for x in (q, k):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        outs.append(torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2).to(x.dtype))
    return tuple(outs)


# ------------------------------------------------------------------------------------- baseline candidates
# Read in Liger-Kernel's liger_kernel/ops/rope.py (rope_forward: q [bsz, heads, seq, dim] transposed back to its
# [bsz, seq, heads, dim] storage, rotated in place there, rotate_half (NeoX) only; cos/sin [1, seq, dim] in the HF
# layout cat(freqs, freqs)) and FlashInfer's docs (apply_rope_with_cos_sin_cache_inplace(positions, query [nnz,
# heads*dim], key, head_size, cos_sin_cache [max_pos, rotary_dim] = cos | sin, is_neox)). Both write over q and k,
# which this task allows. Not run here.


def baseline_liger(q, k, positions, cos_cache, sin_cache, *, style):
    """Liger-Kernel's RoPE, in place over q and k (NeoX style only: GPT-J raises, so it is excluded there)."""
    from liger_kernel.transformers.functional import liger_rope

    if style != "neox":
        raise NotImplementedError("Liger-Kernel's RoPE rotates halves (NeoX) only")
    c, s = cos_cache[positions], sin_cache[positions]                    # [T, D/2] fp32
    cos = torch.cat((c, c), dim=-1)[None]                                # [1, T, D]
    sin = torch.cat((s, s), dim=-1)[None]
    qo, ko = liger_rope(q[None].transpose(1, 2), k[None].transpose(1, 2), cos, sin)
    return qo[0].transpose(0, 1), ko[0].transpose(0, 1)


def baseline_flashinfer(q, k, positions, cos_cache, sin_cache, *, style):
    """FlashInfer's RoPE from a cos|sin cache, in place over q and k. The task's separate caches are joined per
    call (4*max_pos*D bytes read and written: 67 MB at D = 128, ~10% of llama_prefill_neox's traffic), a cost a
    model pays once at load."""
    from flashinfer.rope import apply_rope_with_cos_sin_cache_inplace

    T, Hq, D = q.shape
    qf, kf = q.view(T, Hq * D), k.view(T, -1)
    apply_rope_with_cos_sin_cache_inplace(positions, qf, kf, D, torch.cat((cos_cache, sin_cache), dim=-1),
                                          is_neox=style == "neox")
    return q, k
