"""Expert Triton reference for ``selective_scan`` (Mamba-1): per (batch, channel d), h_0 = 0,
dt_t = softplus(delta_t + delta_bias[d]), h_t = exp(dt_t*A[d]) * h_{t-1} + dt_t*B_t*u_t (N states),
y_t = (C_t . h_t + D_skip[d]*u_t) * silu(z_t).

Guidance implemented (tasks/selective_scan/task.yaml): L1.state-in-registers, L1.parallel-linear-recurrence,
L2.program-mapping, L2.share-bc-across-channels, L2.fused-epilogue, L3.exp2-prescaled-a, L3.vector-time-loads,
L3.fp32-state.

One kernel reads u, delta, z (and B, C) once and writes y once; nothing else touches memory:

- State in registers: a program owns one batch element and BLOCK_D channels (1-8) and keeps their h [BLOCK_D, N]
  in fp32 registers across its sweep over L. exp(dt*A) and dt*B*u are formed on the fly per chunk, never stored.
- Time-parallel chunks: each chunk of BLOCK_L timesteps is scanned in parallel with ``tl.associative_scan`` over the
  pairs (dA, dBu) and the operator (a1, b1) o (a2, b2) = (a1*a2, a2*b1 + b2); the carried state enters as h_t =
  h_chunk,t + (prod_{s<=t} dA_s) * h_carry, and the chunk's last column is the next carry. The states are taken one at a
  time inside the chunk (as mamba's CUDA kernel does), on [BLOCK_D, BLOCK_L] tiles of 512-2048 steps: each thread owns
  runs of 8 consecutive steps (8-16 steps in all), so the scan is mostly a sequential loop in registers and its
  cross-thread part (5 shuffle rounds, one shared-memory exchange) is amortized over 8-16 exponentials (sm_90a PTX:
  about 2 shuffles per exponential, against about 15 with one [BLOCK_D, N, BLOCK_L] tile scanned for all states at
  once). Threads lie along time, so the parallelism is batch*D/BLOCK_D programs x 128-256 threads whatever L is
  (long_narrow: 1536 channels give 384-1536 programs rather than 1536 threads).
- B and C are shared by all channels: row n of the B/C chunk is loaded once per program and broadcast over its
  BLOCK_D channels; with BLOCK_D = 2-4 the L2 traffic for B/C (which at BLOCK_D = 1 is ~10x the u/delta/z
  traffic) drops 2-4x.
- Fused epilogue: softplus(delta + bias) once per (t, d) for all N states (exp2/log2 form, v > 20 -> v), then
  + D*u and * silu(z) (one exp2 and one division) before the single bf16 store of y.
- exp2 with A pre-scaled: A2 = A * log2(e) is loaded once per program, so each (t, d, n) costs one FMUL and one
  MUFU.EX2, the bound of the whole kernel.
- [BLOCK_D, BLOCK_L] tiles of u, delta and z with L fastest (16-byte vectors per thread); all math in fp32, only y
  rounded to bf16.

Configs (autotuned on D, L): BLOCK_D x BLOCK_L in {1 x 2048, 1 x 1024, 2 x 1024, 4 x 512} with 4 warps and
2 x 2048 with 8; the state loop is unrolled twice (128-255 registers, no spills in sm_90a ptxas).

Roofline floors on H200 (MUFU ops = batch*D*L*(N + 4) at 16/clock/SM, 132 SMs, 1.98 GHz = 4.18e12/s, an estimate,
not a measurement; the byte floor from the cost model, at the measured copy bandwidth, is lower on every
workload):

===========  ===================  ==========  ==================================================
workload     batch, D, L, N       MUFU floor  H200: time, fraction of floor, x best peer
===========  ===================  ==========  ==================================================
mamba_2p8b   8, 5120, 4096, 16    802 us      4.14 ms, 0.19, 36.41x compile_max_autotune
long_narrow  1, 1536, 131072, 16  963 us      6.16 ms, 0.16, 39.06x compile_max_autotune
batch_short  64, 2048, 1024, 16   642 us      3.35 ms, 0.19, 28.96x compile_max_autotune
===========  ===================  ==========  ==================================================

Floors use the rates measured on the H200 (copy 4.17 TB/s, bf16 754 TFLOP/s, fp8 1284 TFLOP/s;
benchmarks/data/references_h200.json, 2026-11-30); the MUFU rate is the estimate above (marked so in the JSON).
The kernel is bound by instruction issue and latency, not by the MUFU count (27-33 instructions per (t, d, n),
from the sm_90a SASS; NOTES.md).
PyTorch trails by 40-115x because its baseline materializes the [batch, D, L, N] states.
Investigation notes: references/selective_scan/NOTES.md.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # a constexpr: jit code may read it
LN2 = tl.constexpr(0.6931471805599453)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


# ------------------------------------------------------------------------------------------------ kernel


@triton.jit
def _ssm_combine(a1, b1, a2, b2):
    """(a1, b1) then (a2, b2): h -> a2*(a1*h + b1) + b2."""
    return a1 * a2, a2 * b1 + b2


@triton.jit
def _selective_scan_kernel(
    u_ptr, delta_ptr, a_ptr, b_ptr, c_ptr, dskip_ptr, z_ptr, bias_ptr, y_ptr,
    D, L,
    stride_ub, stride_ud, stride_bb, stride_bn,
    N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_L: tl.constexpr,
):
    """Program (b, d-block): BLOCK_D channels of batch b over the whole sequence, in chunks of BLOCK_L steps.

    Reads 3 * BLOCK_D * L * 2 bytes of u/delta/z and 2 * N * L * 2 bytes of B/C (shared by the BLOCK_D channels),
    writes BLOCK_D * L * 2 bytes of y. u, delta, z and y share one layout [batch, D, L] with L contiguous.
    """
    pid_b = tl.program_id(0).to(tl.int64)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    offs_n = tl.arange(0, N)
    offs_t = tl.arange(0, BLOCK_L)
    # Per-channel constants, once: A pre-scaled by log2(e) (exp(dt*A) = exp2(dt*A2)), the skip and the dt bias.
    a2 = tl.load(a_ptr + offs_d[:, None] * N + offs_n[None, :], mask=d_ok[:, None], other=0.0) * LOG2E
    d_skip = tl.load(dskip_ptr + offs_d, mask=d_ok, other=0.0)
    bias = tl.load(bias_ptr + offs_d, mask=d_ok, other=0.0)
    row = pid_b * stride_ub + offs_d.to(tl.int64) * stride_ud               # [BLOCK_D] row bases
    bc_row = b_ptr + pid_b * stride_bb
    cc_row = c_ptr + pid_b * stride_bb
    h = tl.zeros((BLOCK_D, N), dtype=tl.float32)                           # the carried states, fp32 registers
    for l0 in range(0, L, BLOCK_L):
        offs_l = l0 + offs_t
        l_ok = offs_l < L
        mask = d_ok[:, None] & l_ok[None, :]
        # [BLOCK_D, BLOCK_L] time tiles of this program's channels (L contiguous: 16-byte vectors per thread).
        tile = row[:, None] + offs_l[None, :]
        u = tl.load(u_ptr + tile, mask=mask, other=0.0).to(tl.float32)
        v = tl.load(delta_ptr + tile, mask=mask, other=0.0).to(tl.float32) + bias[:, None]
        zz = tl.load(z_ptr + tile, mask=mask, other=0.0).to(tl.float32)
        # softplus once per (t, d), shared by the N states; steps past L get dt = 0 (dA = 1, dBu = 0: identity).
        dt = tl.where(v > 20.0, v, tl.log2(1.0 + tl.exp2(v * LOG2E)) * LN2)
        dt = tl.where(mask, dt, 0.0)
        dtu = dt * u
        y = tl.zeros((BLOCK_D, BLOCK_L), dtype=tl.float32)                 # C . h, accumulated over the states
        h_next = tl.zeros((BLOCK_D, N), dtype=tl.float32)
        # States one at a time (as mamba's CUDA kernel does): [BLOCK_D, BLOCK_L] tiles, many steps per thread, so
        # the scan is mostly sequential inside each thread and the cross-thread part is amortized. Unrolled twice:
        # two independent scans in flight hide each other's shuffle and MUFU latency.
        for n in tl.range(N, loop_unroll_factor=2):
            sel = offs_n[None, :] == n
            a2_n = tl.sum(tl.where(sel, a2, 0.0), axis=1)                   # [BLOCK_D], from registers
            h_n = tl.sum(tl.where(sel, h, 0.0), axis=1)
            # Row n of the B/C chunk, loaded once per program and shared by its BLOCK_D channels.
            b_n = tl.load(bc_row + n * stride_bn + offs_l, mask=l_ok, other=0.0).to(tl.float32)
            c_n = tl.load(cc_row + n * stride_bn + offs_l, mask=l_ok, other=0.0).to(tl.float32)
            # Discretize on the fly (one exp2 per (d, n, t)), scan the chunk from a zero state, then let the
            # carried state enter through the cumulative decay.
            d_a = tl.exp2(dt * a2_n[:, None])
            d_bu = dtu * b_n[None, :]
            decay, hs = tl.associative_scan((d_a, d_bu), axis=1, combine_fn=_ssm_combine)
            hs = hs + decay * h_n[:, None]
            y += hs * c_n[None, :]
            # The next carry of state n: its value after the chunk's last step.
            last = tl.sum(tl.where(offs_t[None, :] == BLOCK_L - 1, hs, 0.0), axis=1)
            h_next = tl.where(sel, last[:, None], h_next)
        h = h_next
        out = (y + d_skip[:, None] * u) * zz / (1.0 + tl.exp2(-zz * LOG2E))  # (C . h + D*u) * silu(z)
        tl.store(y_ptr + tile, out.to(y_ptr.dtype.element_ty), mask=mask)


# ------------------------------------------------------------------------------------------------ configs

# [BLOCK_D, BLOCK_L] tiles of 0.5-2k steps: 8-16 steps per thread in runs of 8, so each scan is mostly a sequential
# loop in registers with 5 shuffle rounds and one shared-memory exchange per 8-16 exponentials.
_CONFIGS = [
    triton.Config({"BLOCK_D": 1, "BLOCK_L": 2048}, num_warps=4),
    triton.Config({"BLOCK_D": 1, "BLOCK_L": 1024}, num_warps=4),
    triton.Config({"BLOCK_D": 2, "BLOCK_L": 1024}, num_warps=4),
    triton.Config({"BLOCK_D": 4, "BLOCK_L": 512}, num_warps=4),
    triton.Config({"BLOCK_D": 2, "BLOCK_L": 2048}, num_warps=8),
]
_INTERP_CONFIG = {"BLOCK_D": 2, "BLOCK_L": 32}

_selective_scan_tuned = triton.autotune(configs=_CONFIGS, key=["D", "L"])(_selective_scan_kernel)


# ------------------------------------------------------------------------------------------------ launcher


def selective_scan(u, delta, A, B, C, D_skip, z, delta_bias, *, _config: dict | None = None) -> torch.Tensor:
    """Mamba-1 selective scan: u, delta, z [batch, D, L] bf16; A [D, N] fp32; B, C [batch, N, L] bf16;
    D_skip, delta_bias [D] fp32 -> y [batch, D, L] bf16."""
    if u.dim() != 3 or delta.shape != u.shape or z.shape != u.shape:
        raise ValueError(f"u, delta and z must be [batch, D, L] alike, got {tuple(u.shape)}, {tuple(delta.shape)}, "
                         f"{tuple(z.shape)}")
    batch, D, L = u.shape
    N = A.shape[1] if A.dim() == 2 else -1
    if A.shape != (D, N) or B.shape != (batch, N, L) or C.shape != B.shape or D_skip.shape != (D,) \
            or delta_bias.shape != (D,):
        raise ValueError(f"A [D, N], B/C [batch, N, L], D_skip/delta_bias [D] expected for u {tuple(u.shape)}, got "
                         f"{tuple(A.shape)}, {tuple(B.shape)}, {tuple(C.shape)}, {tuple(D_skip.shape)}, "
                         f"{tuple(delta_bias.shape)}")
    if N < 1 or N & (N - 1):
        raise ValueError(f"the state size N must be a power of two, got {N}")
    if A.dtype != torch.float32 or D_skip.dtype != torch.float32 or delta_bias.dtype != torch.float32:
        raise TypeError("A, D_skip and delta_bias must be fp32")
    u, delta, z, B, C = (t.contiguous() for t in (u, delta, z, B, C))
    A, D_skip, delta_bias = A.contiguous(), D_skip.contiguous(), delta_bias.contiguous()
    y = torch.empty_like(u)
    if y.numel() == 0:
        return y
    config = _config if _config is not None else (_INTERP_CONFIG if _interpreting() else None)

    def grid(meta):
        return (batch, triton.cdiv(D, meta["BLOCK_D"]))

    args = (u, delta, A, B, C, D_skip, z, delta_bias, y, D, L, u.stride(0), u.stride(1), B.stride(0), B.stride(1))
    if config is None:
        _selective_scan_tuned[grid](*args, N=N)
    else:
        _selective_scan_kernel[grid(config)](*args, N=N, **config)
    return y


def kernel(u, delta, A, B, C, D_skip, z, delta_bias):
    """Submission entry point: the fused selective scan."""
    return selective_scan(u, delta, A, B, C, D_skip, z, delta_bias)
