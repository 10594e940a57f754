"""Expert Triton reference for ``rmsnorm_residual``: h = x + residual, residual_out = h, y = h * rstd(h) * w.

Guidance implemented (tasks/rmsnorm_residual/task.yaml): L1.fuse-add-norm, L1.fp32-sumsq, L2.row-in-registers,
L2.tile-long-rows, L2.weight-hoist-persistent, L3.vector-io, L3.streaming-hints, L3.rsqrt-once.

One fused kernel reads x and residual once and writes residual_out and y once (4 element-passes; a separate
add kernel followed by a norm kernel takes 6). h is formed in fp32, its sum of squares accumulates in fp32
(h*h in fp16 overflows once |h| > 255), rstd = rsqrt(mean + eps) is computed once per row, and y = h * rstd * w
is cast to the storage dtype only at the store.

Two paths, picked by the launcher:

- ``rows``: N <= 16384. The fp32 row h (up to 64 KB) stays in registers across the add, the reduction and the
  scaling; one program per row, 64 fp32 values of h per thread (num_warps = BLOCK_N / 2048, at least 1). The
  kernel can loop over rows (w loaded once per program, evict_last, before the loop), but on the H200 a persistent
  grid of resident programs was 6-14% slower than one program per row (benchmarks/data/runs/round7/tune_*.json), so
  the launcher uses num_progs = M.
- ``tiled``: N > 16384. Pass 1 over column tiles adds, stores residual_out (evict_last, so it stays in L2) and
  accumulates h*h; pass 2 re-reads residual_out from L2 and writes y. y is then computed from h rounded to the
  storage dtype, which adds at most one storage ulp of error (within the task's tolerances).

The ``rows`` kernel puts no hints on x, residual, y and residual_out: with evict_first loads and ``.cs`` stores it was
5-7% slower on the H200 at every warp count and grid size swept (benchmarks/data/runs/round7/tune_hints_ab.json:
prefill_8k 280 vs 262 us), most of it from the evict_first loads (tune_no_evict_first.json). The ``tiled`` path keeps
them: its pass 1 must leave residual_out in L2 for pass 2 and nothing else.

Roofline floors on H200 (bytes = 4*M*N*elt + N*elt at the measured copy bandwidth):

=============  =================  =======  ==================================================
workload       shape / dtype      floor    H200: time, fraction of floor, x best peer
=============  =================  =======  ==================================================
prefill_8k     16384 x 8192 bf16  258 us   265 us, 0.97, 0.96x compile_max_autotune
wide_rows_16k  2048 x 16384 bf16  64.4 us  71.5 us, 0.89, 0.97x compile
fp16_outliers  8192 x 8192 fp16   129 us   135 us, 0.94, 0.96x compile
=============  =================  =======  ==================================================

Floors use the rates measured on the H200 (copy 4.17 TB/s, bf16 754 TFLOP/s, fp8 1284 TFLOP/s;
benchmarks/data/references_h200.json, 2026-11-30).
The last column is benchmarks/summary.py's row for the workload: the newest evaluation against every baseline
candidate, and the fastest candidate correct in every evaluation (benchmarks/docstring_figures.py writes it).
Below the best baseline (torch.compile) on every workload, by 3.5-4%: prefill_8k (0.97x of 257 us), wide_rows_16k
(0.96x of 69.0 us), fp16_outliers (0.96x of 132 us); compile max-autotune (round 20, one evaluation) is no faster
but on prefill_8k (255 us).
Investigation notes: references/rmsnorm_residual/NOTES.md.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

EPS = 1e-6
_MAX_REG_N = 16384  # an fp32 row of up to 64 KB stays in one program's registers
_TILE_N = 4096      # column tile of the two-pass path


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.lru_cache(maxsize=None)
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _sm_count(x: torch.Tensor) -> int:
    if x.is_cuda and not _interpreting():
        return _num_sms(x.device.index if x.device.index is not None else torch.cuda.current_device())
    return 4  # the interpreter runs programs one after another; a small grid still exercises persistence


# ------------------------------------------------------------------------------------------------ kernels


@triton.jit
def _rmsnorm_residual_kernel(
    x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr,
    M, N,
    stride_xm, stride_rm, stride_ym, stride_om,
    num_progs, eps,
    BLOCK_N: tl.constexpr,
):
    """Rows in registers: a program loads w once, then handles rows pid, pid + num_progs, ...

    Per row it reads 2 * N * elt bytes (x, residual) and writes 2 * N * elt bytes (residual_out, y);
    w (N * elt bytes) is read once per program and kept in registers.
    """
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    # w is hoisted out of the row loop; evict_last keeps it in L2 for the other programs.
    w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    # The row loop is not software-pipelined (no num_stages): Triton 3.6 would turn the loads into cp.async, which
    # drops the eviction hints (checked in sm_90 PTX). 2 x 16 KB of loads per 8k bf16 row are in flight anyway.
    for row in tl.range(pid, M, num_progs):
        row64 = tl.cast(row, tl.int64)
        x = tl.load(x_ptr + row64 * stride_xm + cols, mask=mask, other=0.0)
        r = tl.load(res_ptr + row64 * stride_rm + cols, mask=mask, other=0.0)
        # Fused add in fp32; residual_out is written from the same registers that feed the norm.
        h = x.to(tl.float32) + r.to(tl.float32)
        tl.store(res_out_ptr + row64 * stride_om + cols, h.to(res_out_ptr.dtype.element_ty), mask=mask)
        # fp32 sum of squares, one rsqrt per row, then FMAs.
        rstd = tl.math.rsqrt(tl.sum(h * h, axis=0) / N + eps)
        tl.store(y_ptr + row64 * stride_ym + cols, (h * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rmsnorm_residual_tiled_kernel(
    x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr,
    M, N,
    stride_xm, stride_rm, stride_ym, stride_om,
    num_progs, eps,
    BLOCK_N: tl.constexpr,
):
    """Rows too long for registers: two passes over BLOCK_N column tiles per row, rows pid, pid + num_progs, ...

    Pass 1 reads 2 * N * elt bytes from HBM and writes residual_out (N * elt); pass 2 re-reads residual_out
    (an L2 hit) and w, and writes y (N * elt).
    """
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    for row in tl.range(pid, M, num_progs):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * stride_xm
        r_row = res_ptr + row64 * stride_rm
        o_row = res_out_ptr + row64 * stride_om
        y_row = y_ptr + row64 * stride_ym
        # Pass 1: add, store residual_out (kept in L2 for pass 2), per-lane fp32 partial sums of h*h.
        acc = tl.zeros([BLOCK_N], tl.float32)
        for start in tl.range(0, N, BLOCK_N):
            cols = start + offs
            mask = cols < N
            x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_first")
            r = tl.load(r_row + cols, mask=mask, other=0.0, eviction_policy="evict_first")
            h = x.to(tl.float32) + r.to(tl.float32)
            tl.store(o_row + cols, h.to(res_out_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_last")
            acc += h * h
        rstd = tl.math.rsqrt(tl.sum(acc, axis=0) / N + eps)
        # Pass 2: residual_out back from L2, scale, store y.
        for start in tl.range(0, N, BLOCK_N):
            cols = start + offs
            mask = cols < N
            h = tl.load(o_row + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + cols, (h * rstd * w).to(y_ptr.dtype.element_ty), mask=mask, cache_modifier=".cs")


# ------------------------------------------------------------------------------------------------ launcher


def _row_warps(block_n: int) -> int:
    # 64 fp32 values of h per thread: best or within 1% of it on all three workloads (4-32 warps swept).
    return max(1, min(16, block_n // 2048))


def rmsnorm_residual(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor, eps: float = EPS, *,
                     _path: str | None = None, _block_n: int | None = None,
                     _num_progs: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused ``h = x + residual``; returns ``(rmsnorm(h) * w, h)`` in the storage dtype of x.

    The underscored arguments override the launcher's choices; tests use them to run every path on small
    inputs. ``_path`` is ``rows`` or ``tiled``.
    """
    if x.dim() != 2 or residual.shape != x.shape or w.shape != (x.shape[1],):
        raise ValueError(f"expected x, residual [M, N] and w [N], got {tuple(x.shape)}, {tuple(residual.shape)}, "
                         f"{tuple(w.shape)}")
    if x.dtype not in (torch.bfloat16, torch.float16, torch.float32) or residual.dtype != x.dtype \
            or w.dtype != x.dtype:
        raise TypeError(f"x, residual and w must share one of bf16/fp16/fp32, got {x.dtype}, {residual.dtype}, "
                        f"{w.dtype}")
    x, residual, w = (t if t.stride(-1) == 1 else t.contiguous() for t in (x, residual, w))
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    res_out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return y, res_out
    num_sms = _sm_count(x)
    path = _path or ("rows" if N <= _MAX_REG_N else "tiled")
    args = (x, residual, w, y, res_out, M, N, x.stride(0), residual.stride(0), y.stride(0), res_out.stride(0))

    if path == "rows":
        block_n = _block_n or triton.next_power_of_2(N)
        if block_n < N:
            raise ValueError(f"rows path needs BLOCK_N >= N, got {block_n} < {N}")
        warps = _row_warps(block_n)
        progs = _num_progs or M
        _rmsnorm_residual_kernel[(progs,)](*args, progs, eps, BLOCK_N=block_n, num_warps=warps)
    elif path == "tiled":
        block_n = _block_n or _TILE_N
        progs = _num_progs or min(M, num_sms * 2)
        _rmsnorm_residual_tiled_kernel[(progs,)](*args, progs, eps, BLOCK_N=block_n, num_warps=8)
    else:
        raise ValueError(f"unknown path {path!r}")
    return y, res_out


def kernel(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Submission entry point: ``(y, residual_out)``."""
    return rmsnorm_residual(x, residual, w)
