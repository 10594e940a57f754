"""Expert Triton reference for ``causal_conv1d``: y = silu(bias + depthwise causal conv(x, w)), channel-last
x [B, L, D] bf16, w [D, W], bias [D], optionally packed sequences (B = 1, cu_seqlens int32 [nseq+1]); fp32 math.

Guidance implemented (tasks/causal_conv1d/task.yaml): L1.halo-tile-reuse, L1.fused-epilogue, L2.tile-ownership,
L2.rolling-window-registers, L2.varlen-boundaries, L3.vector-channel-io, L3.silu-exp2, L3.cache-hints.

Two paths, one launcher:

- ``tile`` (the default): one program owns BLOCK_L = 64 consecutive tokens x BLOCK_D = 128 contiguous channels
  of one batch row, grid (L-tiles, D-blocks, B), so batch 1 with 128k tokens still launches 65k programs. It loads
  the [BLOCK_D, W] weights and the bias once (evict_last), then forms the W taps from W shifted
  [BLOCK_L, BLOCK_D] loads of x: the tile plus a halo of W-1 earlier tokens, the overlapping rows hitting L1, so
  HBM sees each x about once ((W-1)/BLOCK_L = 5% halo re-read, from cache). Bias, the fp32 FMA chain and the SiLU
  (x / (1 + exp2(-x log2 e))) are fused; y is written once in bf16 with streaming stores.
- ``rolling``: the register-window alternative. A program owns a run of RUN tokens x BLOCK_D channels and walks
  the tokens in order, keeping the previous W-1 inputs (W <= 4) in carried registers, so each x is loaded
  exactly once with no halo at all; at a sequence start the window is cleared. The launcher takes the tile path
  for every workload; the rolling path (``_path="rolling"``) awaits an H200 comparison: with one 16-byte load per
  lane per token step it has fewer bytes in flight per warp than the tile path.

Packed sequences (both paths): tiles are laid on the global token axis and may straddle sequence starts; the
start of each output token's sequence comes from a vectorized binary search of cu_seqlens (log2(nseq) gathers
of an L1-resident array per tile), and tap j of token t is masked unless t - (W-1) + j >= start(t). No program
is launched per sequence. Channel offsets are contiguous with max_contiguous/multiple_of hints, so loads and
stores are 16-byte vectors (8 bf16) when D % 8 == 0; only the D tail is masked.

Roofline floors on H200 (bytes = 2*B*L*D*2 + (D*W + D)*2 at the measured copy bandwidth):

===============  ========================  ======  ==================================================
workload         B x L x D, W, nseq        floor   H200: time, fraction of floor, x best peer
===============  ========================  ======  ==================================================
mamba2_prefill   8 x 4096 x 5376, 4, 0     169 us  318 us, 0.54, 10.63x eager
long_single_seq  1 x 131072 x 4096, 4, 0   515 us  937 us, 0.56, 11.25x eager
varlen_packed    1 x 65536 x 4096, 4, 512  258 us  782 us, 0.34, 1.14x compile
===============  ========================  ======  ==================================================

Floors use the rates measured on the H200 (copy 4.17 TB/s, bf16 754 TFLOP/s, fp8 1284 TFLOP/s;
benchmarks/data/references_h200.json, 2026-11-30).
The fractions are issue-bound (about 35 instructions per output, from the sm_90a SASS), not byte-bound.
Investigation notes: references/causal_conv1d/NOTES.md.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)

_BLOCK_L = 64     # tokens per tile: (W-1)/64 = 5% halo
_BLOCK_D = 128    # channels per tile: 256 B rows; 16 elements (two 16-byte vectors) per thread at 16 warps
_RUN = 64         # tokens per program on the rolling path
_ROLL_D = 256     # channels per program on the rolling path: one warp, one 16-byte vector (8 bf16) per lane
_MAX_ROLL_W = 4   # the rolling window keeps W-1 <= 3 earlier inputs in registers


# ------------------------------------------------------------------------------------------------ kernels


@triton.jit
def _sequence_start(cu_ptr, nseq, t, steps):
    """Vectorized binary search: cu[i] for the largest i < nseq with cu[i] <= t, per element of t."""
    lo = tl.zeros_like(t)
    hi = lo + nseq
    for _ in range(steps):
        mid = (lo + hi) // 2
        go_right = tl.load(cu_ptr + mid) <= t
        lo = tl.where(go_right, mid, lo)
        hi = tl.where(go_right, hi, mid)
    return tl.load(cu_ptr + lo)


@triton.jit
def _silu(acc):
    return acc * (1.0 / (1.0 + tl.exp2(-acc * LOG2E)))


@triton.jit
def _causal_conv1d_tile_kernel(
    x_ptr, w_ptr, bias_ptr, cu_ptr, y_ptr,
    L, D, nseq, search_steps,
    stride_xb, stride_xl, stride_yb, stride_yl,
    W: tl.constexpr, W_P2: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_D: tl.constexpr, VARLEN: tl.constexpr,
):
    """y for tokens [pid_l*BLOCK_L, +BLOCK_L) x channels [pid_d*BLOCK_D, +BLOCK_D) of batch row pid_b.

    Reads the (BLOCK_L + W - 1) x BLOCK_D x 2-byte input tile (the halo rows from cache), W*BLOCK_D weights and
    BLOCK_D biases; writes BLOCK_L x BLOCK_D x 2 bytes.
    """
    pid_l = tl.program_id(0)
    pid_d = tl.program_id(1)
    pid_b = tl.program_id(2).to(tl.int64)
    offs_l = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    offs_d = tl.max_contiguous(tl.multiple_of(pid_d * BLOCK_D + tl.arange(0, BLOCK_D), BLOCK_D), BLOCK_D)
    mask_l = offs_l < L
    mask_d = offs_d < D
    # Weights [BLOCK_D, W] and bias, loaded once per program and kept in registers (reused by every program
    # of this D-block: evict_last).
    taps = tl.arange(0, W_P2)
    w = tl.load(w_ptr + offs_d[:, None] * W + taps[None, :], mask=mask_d[:, None] & (taps[None, :] < W), other=0.0,
                eviction_policy="evict_last").to(tl.float32)
    bias = tl.load(bias_ptr + offs_d, mask=mask_d, other=0.0, eviction_policy="evict_last").to(tl.float32)
    # First token of each output token's sequence: taps before it read 0.
    if VARLEN:
        start = _sequence_start(cu_ptr, nseq, offs_l, search_steps)
    else:
        start = tl.zeros_like(offs_l)
    x_row = x_ptr + pid_b * stride_xb
    acc = tl.zeros([BLOCK_L, BLOCK_D], dtype=tl.float32) + bias[None, :]
    # W shifted loads of the tile: tap j reads token t - (W-1) + j; the W-1 halo rows come from L1/L2.
    for j in tl.static_range(W):
        src = offs_l - (W - 1 - j)
        ok = mask_l & (src >= start)
        xj = tl.load(x_row + src[:, None].to(tl.int64) * stride_xl + offs_d[None, :],
                     mask=ok[:, None] & mask_d[None, :], other=0.0).to(tl.float32)
        wj = tl.sum(tl.where(taps[None, :] == j, w, 0.0), axis=1)
        acc += xj * wj[None, :]
    # Fused SiLU in fp32, one bf16 store per output (streaming: y is not read again).
    y = _silu(acc)
    y_row = y_ptr + pid_b * stride_yb
    tl.store(y_row + offs_l[:, None].to(tl.int64) * stride_yl + offs_d[None, :], y.to(y_ptr.dtype.element_ty),
             mask=mask_l[:, None] & mask_d[None, :], cache_modifier=".cs")


@triton.jit
def _causal_conv1d_rolling_kernel(
    x_ptr, w_ptr, bias_ptr, cu_ptr, y_ptr,
    L, D, nseq, search_steps,
    stride_xb, stride_xl, stride_yb, stride_yl,
    W: tl.constexpr, RUN: tl.constexpr, BLOCK_D: tl.constexpr, VARLEN: tl.constexpr,
):
    """y for tokens [pid_l*RUN, +RUN) x channels [pid_d*BLOCK_D, +BLOCK_D) of batch row pid_b, walking the
    tokens in order with the previous W-1 (<= 3) inputs carried in registers.

    Reads (RUN + W - 1) x BLOCK_D x 2 bytes of x (the W-1 rows before the run once, to fill the window) and
    writes RUN x BLOCK_D x 2 bytes.
    """
    pid_l = tl.program_id(0)
    pid_d = tl.program_id(1)
    pid_b = tl.program_id(2).to(tl.int64)
    offs_d = tl.max_contiguous(tl.multiple_of(pid_d * BLOCK_D + tl.arange(0, BLOCK_D), BLOCK_D), BLOCK_D)
    mask_d = offs_d < D
    # c_k multiplies x[t - k]: c_k = w[:, W-1-k] for k < W, 0 beyond (W < 4 uses fewer taps).
    c0 = tl.load(w_ptr + offs_d * W + (W - 1), mask=mask_d, other=0.0, eviction_policy="evict_last").to(tl.float32)
    c1 = tl.load(w_ptr + offs_d * W + (W - 2), mask=mask_d & (W > 1), other=0.0,
                 eviction_policy="evict_last").to(tl.float32)
    c2 = tl.load(w_ptr + offs_d * W + (W - 3), mask=mask_d & (W > 2), other=0.0,
                 eviction_policy="evict_last").to(tl.float32)
    c3 = tl.load(w_ptr + offs_d * W + (W - 4), mask=mask_d & (W > 3), other=0.0,
                 eviction_policy="evict_last").to(tl.float32)
    bias = tl.load(bias_ptr + offs_d, mask=mask_d, other=0.0, eviction_policy="evict_last").to(tl.float32)
    t0 = pid_l * RUN
    t1 = tl.minimum(t0 + RUN, L)
    # The run's first token sits in sequence i = [start, next_start).
    if VARLEN:
        lo = tl.zeros([1], dtype=tl.int32)
        hi = lo + nseq
        for _ in range(search_steps):
            mid = (lo + hi) // 2
            go_right = tl.load(cu_ptr + mid) <= t0
            lo = tl.where(go_right, mid, lo)
            hi = tl.where(go_right, hi, mid)
        seq = tl.sum(lo, axis=0)
        start = tl.load(cu_ptr + seq)
        next_start = tl.load(cu_ptr + seq + 1)
    else:
        seq = 0
        start = 0
        next_start = L
    x_row = x_ptr + pid_b * stride_xb
    y_row = y_ptr + pid_b * stride_yb
    # Fill the window with the W-1 tokens before the run that belong to the same sequence.
    x_m1 = tl.load(x_row + (t0 - 1).to(tl.int64) * stride_xl + offs_d, mask=mask_d & (t0 - 1 >= start),
                   other=0.0).to(tl.float32)
    x_m2 = tl.load(x_row + (t0 - 2).to(tl.int64) * stride_xl + offs_d, mask=mask_d & (t0 - 2 >= start),
                   other=0.0).to(tl.float32)
    x_m3 = tl.load(x_row + (t0 - 3).to(tl.int64) * stride_xl + offs_d, mask=mask_d & (t0 - 3 >= start),
                   other=0.0).to(tl.float32)
    for t in range(t0, t1):
        if VARLEN:
            if t == next_start:
                # A sequence starts here: nothing before it may reach this token.
                x_m1 = tl.zeros_like(x_m1)
                x_m2 = tl.zeros_like(x_m2)
                x_m3 = tl.zeros_like(x_m3)
                seq += 1
                next_start = tl.load(cu_ptr + seq + 1)
        x_t = tl.load(x_row + tl.cast(t, tl.int64) * stride_xl + offs_d, mask=mask_d, other=0.0).to(tl.float32)
        acc = bias + c0 * x_t + c1 * x_m1 + c2 * x_m2 + c3 * x_m3
        tl.store(y_row + tl.cast(t, tl.int64) * stride_yl + offs_d, _silu(acc).to(y_ptr.dtype.element_ty), mask=mask_d,
                 cache_modifier=".cs")
        x_m3 = x_m2
        x_m2 = x_m1
        x_m1 = x_t


# ------------------------------------------------------------------------------------------------ launcher


def causal_conv1d(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, cu_seqlens: torch.Tensor | None = None, *,
                  _path: str | None = None, _block_l: int | None = None, _block_d: int | None = None,
                  _run: int | None = None) -> torch.Tensor:
    """silu(bias + causal depthwise conv1d) over channel-last x, per packed sequence when cu_seqlens has more
    than one entry.

    The underscored arguments override the launcher's choices; tests use them to run every path on small
    inputs. ``_path`` is ``tile`` or ``rolling``.
    """
    if x.dim() != 3:
        raise ValueError(f"x must be [B, L, D], got shape {tuple(x.shape)}")
    B, L, D = x.shape
    if w.dim() != 2 or w.shape[0] != D or bias.shape != (D,):
        raise ValueError(f"expected w [D, W] and bias [D] with D = {D}, got {tuple(w.shape)} and {tuple(bias.shape)}")
    W = w.shape[1]
    varlen = cu_seqlens is not None and cu_seqlens.numel() > 1
    if varlen and B != 1:
        raise ValueError(f"packed sequences need B = 1, got B = {B}")
    if x.stride(2) != 1:
        x = x.contiguous()
    w = w.contiguous()
    bias = bias.contiguous()
    y = torch.empty((B, L, D), dtype=x.dtype, device=x.device)
    if B == 0 or L == 0 or D == 0:
        return y
    if varlen:
        cu = cu_seqlens.to(device=x.device, dtype=torch.int32).contiguous()
        nseq = cu.numel() - 1
    else:
        cu = torch.zeros(1, dtype=torch.int32, device=x.device)
        nseq = 0
    steps = max(1, nseq.bit_length())  # ceil(log2(nseq)) + 1 halvings of [0, nseq)
    path = _path or "tile"
    args = (x, w, bias, cu, y, L, D, nseq, steps, x.stride(0), x.stride(1), y.stride(0), y.stride(1))
    if path == "tile":
        block_l = _block_l or _BLOCK_L
        block_d = _block_d or min(_BLOCK_D, max(16, triton.next_power_of_2(D)))
        grid = (triton.cdiv(L, block_l), triton.cdiv(D, block_d), B)
        warps = max(1, min(16, block_l * block_d // 512))  # 16 elements per thread: 64 x 128 at 16 warps
        _causal_conv1d_tile_kernel[grid](*args, W=W, W_P2=triton.next_power_of_2(W), BLOCK_L=block_l,
                                         BLOCK_D=block_d, VARLEN=varlen, num_warps=warps)
    elif path == "rolling":
        if W > _MAX_ROLL_W:
            raise ValueError(f"the rolling path keeps at most {_MAX_ROLL_W - 1} earlier inputs; W = {W}")
        run = _run or _RUN
        block_d = _block_d or min(_ROLL_D, max(16, triton.next_power_of_2(D)))
        grid = (triton.cdiv(L, run), triton.cdiv(D, block_d), B)
        _causal_conv1d_rolling_kernel[grid](*args, W=W, RUN=run, BLOCK_D=block_d, VARLEN=varlen, num_warps=1)
    else:
        raise ValueError(f"unknown path {path!r}")
    return y


def kernel(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, cu_seqlens: torch.Tensor | None) -> torch.Tensor:
    """Submission entry point: the fused causal depthwise conv1d + bias + SiLU."""
    return causal_conv1d(x, w, bias, cu_seqlens)
