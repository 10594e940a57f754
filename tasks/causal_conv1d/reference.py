"""causal_conv1d: exact semantics (float64), the PyTorch baseline, and the seeded input maker.

y[b, t, d] = silu(bias[d] + sum_j w[d, j] * x[b, t - (W-1) + j, d]), taps before the start of t's sequence
(t' < 0, or before cu_seqlens[i] in packed mode) read as 0. cu_seqlens is int32 [nseq+1]; nseq = 0 (the
one-element tensor [0]) means every batch row is one sequence.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# "normal" is the catalog's draw (x, bias ~ N(0,1), w ~ N(0,1)/sqrt(W); varlen boundaries uniform over 1..L-1).
# "boundary_heavy" scales x by 3 around a mean of 1 and, in packed mode, puts half of the boundaries in one run
# of consecutive tokens (sequences of length 1, shorter than the W-1 halo) at a random place, the other half
# uniform: a kernel that lets a tap cross a sequence start fails on both, zero/constant/echo outputs too.
# "dc_offset" gives every channel a large constant level, x = o_d + N(0,1) with o_d ~ +-U(30, 60) (the outlier
#   channels of LLM activations), and zero-sum filters (w minus its mean over the taps): the taps of one output
#   are each ~|o_d w| ~ 15-30 but cancel to O(1) away from sequence starts. A tap chain computed in bf16 (products
#   and partial sums rounded at 2^-9 of ~30) is off by ~0.1 against the 1e-2 + 1e-2|y| bound; fp32 is exact to
#   ~1e-5 (bf16 x bf16 products are exact in fp32).
DISTRIBUTIONS = ("normal", "boundary_heavy", "dc_offset")

_CHUNK_TOKENS = 8192  # reference: float64 work in chunks of this many tokens (a halo of W-1 before each)


def draw_boundaries(L: int, nseq: int, *, clustered: bool, generator, device) -> torch.Tensor:
    """cu_seqlens int32 [nseq+1]: 0, nseq-1 distinct sorted inner boundaries in 1..L-1, L."""
    if not 1 <= nseq <= L:
        raise ValueError(f"nseq must be in [1, L] for packed sequences, got nseq={nseq}, L={L}")
    inner = nseq - 1
    if clustered and inner >= 2:
        run = inner // 2
        start = int(torch.randint(1, L - run + 1, (1,), generator=generator, device=device))
        cluster = torch.arange(start, start + run, device=device)
        keep = torch.ones(L - 1, dtype=torch.bool, device=device)
        keep[cluster - 1] = False
        rest = torch.nonzero(keep).flatten() + 1
        pick = rest[torch.randperm(rest.numel(), generator=generator, device=device)[:inner - run]]
        points = torch.cat([cluster, pick])
    else:
        points = torch.randperm(L - 1, generator=generator, device=device)[:inner] + 1
    points = points.sort().values
    zero = torch.zeros(1, dtype=torch.int64, device=device)
    end = torch.full((1,), L, dtype=torch.int64, device=device)
    return torch.cat([zero, points.to(torch.int64), end]).to(torch.int32)


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    B, L, D = shapes["x"]
    W = shapes["w"][1]
    nseq = int(params["nseq"])
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {dist!r}")
    x = torch.randn(B, L, D, generator=generator, device=device, dtype=torch.float32)
    if dist == "boundary_heavy":
        x = x.mul_(3.0).add_(1.0)
    elif dist == "dc_offset":
        level = 30.0 + 30.0 * torch.rand(D, generator=generator, device=device)
        sign = torch.randint(0, 2, (D,), generator=generator, device=device) * 2.0 - 1.0
        x = x.add_(level * sign)
    w = torch.randn(D, W, generator=generator, device=device) / math.sqrt(W)
    if dist == "dc_offset":
        w = w - w.mean(dim=1, keepdim=True)
    bias = torch.randn(D, generator=generator, device=device)
    if nseq == 0:
        cu = torch.zeros(1, dtype=torch.int32, device=device)
    else:
        if B != 1:
            raise ValueError(f"packed sequences need B = 1, got B = {B}")
        cu = draw_boundaries(L, nseq, clustered=dist == "boundary_heavy", generator=generator, device=device)
    return x.to(dtypes["x"]), w.to(dtypes["w"]), bias.to(dtypes["bias"]), cu


def token_starts(cu_seqlens: torch.Tensor | None, L: int, device) -> torch.Tensor:
    """int64 [L]: the first token of the sequence that holds each token (0 everywhere when not packed)."""
    t = torch.arange(L, device=device, dtype=torch.int64)
    if cu_seqlens is None or cu_seqlens.numel() <= 1:
        return torch.zeros_like(t)
    cu = cu_seqlens.to(device=device, dtype=torch.int64)
    seq = torch.searchsorted(cu, t, right=True) - 1
    return cu[seq.clamp(0, cu.numel() - 1)]


def reference(x, w, bias, cu_seqlens):
    """float64 taps with the sequence-start mask, in token chunks (the 128k-token workload needs ~13 GB of float64
    temporaries unchunked); equal to F.conv1d with padding W-1 applied to each sequence separately."""
    B, L, D = x.shape
    W = w.shape[1]
    starts = token_starts(cu_seqlens, L, x.device)
    wd = w.double()
    bd = bias.double()
    y = torch.empty(B, L, D, dtype=torch.bfloat16, device=x.device)
    for t0 in range(0, L, _CHUNK_TOKENS):
        t1 = min(L, t0 + _CHUNK_TOKENS)
        h0 = max(0, t0 - (W - 1))
        xc = x[:, h0:t1].double()                       # chunk plus its halo
        t = torch.arange(t0, t1, device=x.device)
        acc = bd.expand(B, t1 - t0, D).clone()
        for j in range(W):
            src = t - (W - 1 - j)
            ok = src >= starts[t0:t1]
            tap = xc[:, (src.clamp_min(h0) - h0)]         # [B, chunk, D]; masked where ok is False
            acc += wd[:, j] * tap * ok[None, :, None]
        y[:, t0:t1] = (acc * torch.sigmoid(acc)).to(torch.bfloat16)
    return y


def baseline(x, w, bias, cu_seqlens):
    """Dense: cuDNN's depthwise F.conv1d with groups=D on the channel-last data seen as [B, D, L] (it makes its
    own transposed copies), then SiLU. Packed: F.conv1d cannot stop at sequence starts without one call per
    sequence (512 launches), so the fastest eager expression is W shifted multiply-adds with a per-token
    sequence-start mask, in fp32."""
    B, L, D = x.shape
    W = w.shape[1]
    if cu_seqlens is None or cu_seqlens.numel() <= 1:
        y = F.conv1d(x.transpose(1, 2), w[:, None, :], bias, padding=W - 1, groups=D)[..., :L]
        return F.silu(y).transpose(1, 2)
    starts = token_starts(cu_seqlens, L, x.device)
    t = torch.arange(L, device=x.device)
    acc = bias.float().expand(B, L, D).clone()
    for j in range(W):
        shift = W - 1 - j
        tap = F.pad(x[:, :L - shift], (0, 0, shift, 0)) if shift else x
        acc += w[:, j].float() * tap * ((t - shift) >= starts)[None, :, None]
    return F.silu(acc).to(torch.bfloat16)


# ------------------------------------------------------------------------------------- baseline candidates
# Read in causal-conv1d's causal_conv1d/causal_conv1d_interface.py: causal_conv1d_fn(x [batch, dim, seqlen],
# weight [dim, width], bias [dim], seq_idx=None, initial_states=None, return_final_states=False,
# final_states_out=None, activation=None | "silu"); x with stride(1) == 1 takes the channel-last kernel (this task's
# [B, L, D] storage seen as [B, D, L]), which alone accepts seq_idx [batch, seqlen] int32 (the sequence of each
# token: taps never cross a change of seq_idx). The output keeps x's layout. Not run here (CUDA only).


def baseline_causal_conv1d(x, w, bias, cu_seqlens):
    """causal-conv1d's CUDA kernel (channel-last path) with SiLU fused; packed sequences through seq_idx."""
    from causal_conv1d import causal_conv1d_fn

    seq_idx = None
    if cu_seqlens.numel() > 1:
        t = torch.arange(x.shape[1], dtype=torch.int32, device=x.device)
        seq_idx = (torch.searchsorted(cu_seqlens, t, right=True) - 1).to(torch.int32)[None]
    return causal_conv1d_fn(x.transpose(1, 2), w, bias, seq_idx=seq_idx, activation="silu").transpose(1, 2)
