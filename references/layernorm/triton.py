"""LayerNorm forward with saved statistics, in Triton: y = (x - mean) * rstd * w + b, plus mean and rstd in fp32.

Guidance implemented (tasks/layernorm/task.yaml): L1.stable-variance, L1.single-pass-io, L2.row-in-registers,
L2.multi-row-hoisted-params, L2.tiled-chan-merge, L3.rsqrt-fma, L3.vector-io, L3.cache-hints.

LayerNorm is memory-bound (8 flops per 4-8 bytes), so the design target is one read of x and one write of y.
Two kernels cover every row length:

* ``_layernorm_fwd_kernel`` (N <= 4096): rows live in registers. One program owns a [ROWS, BLOCK_N] tile of 4096
  elements (ROWS = 4 at N = 1024) at 2 warps, 64 fp32 values of x per thread, with w and b loaded once per program
  (evict_last: every program reuses them). The kernel can loop over row blocks ``pid, pid + num_progs, ...``, but
  the launcher gives every tile its own program: on the H200 a persistent grid of resident programs took 160-170
  us on many_short_rows and large_offset_fp32 against 133-134 us (benchmarks/data/runs/round7/tune_*.json). x and y
  carry no eviction hints; evict_first / .cs cost 4-7% there (tune_hints_ab.json).
* ``_layernorm_fwd_tiled_kernel`` (N > 4096): sweep 1 walks BLOCK_N = 2048 tiles at 4 warps and merges per-tile
  (count, mean, M2) of x - x[0] with Chan's formula, loading with evict_last so the row stays in L2; sweep 2
  re-reads the tiles (L2 hits, evict_first) and writes y. HBM traffic stays near one read and one write. At
  llama_hidden_8k this took 155 us where holding the 8192-wide row in registers took >= 201 us at any warp count:
  the small programs keep many rows in flight per SM, as torch.compile's looped reduction does.

Numerics: the variance is always computed from centered values. In registers we use the corrected two-pass
(mean0 = sum(x)/N; xc = x - mean0; d = sum(xc)/N; var = sum(xc^2)/N - d^2; mean = mean0 + d): the correction d
removes the fp32 rounding of mean0, which matters at the large_offset_fp32 workload (mean 1000, std 1), where
E[x^2] - E[x]^2 is off by up to ~20%. The tiled kernel gets the same effect by working on x - x[0]. Everything is
fp32 in registers; y is rounded once, at the store. Measured on CPU (interpreter, fp32 math) against the float64
oracle at offset 1000: max |y error| ~1e-6 on both kernels (fp32 tolerance 1e-3). On the H200
(benchmarks/data/tolerance_audit_h200.json) y uses at most 3e-4 of the fp32 tolerance at large_offset_fp32, where the
eager baseline (torch.native_layer_norm) uses 2.34x of it on the "shifted" draw, and <= 0.69 of the bf16
tolerance on the other workloads.

Roofline floors on the H200 (cost model bytes at the measured copy bandwidth):

=================  ===========  ======  ==================================================
workload           bytes        floor   H200: time, fraction of floor, x best peer
=================  ===========  ======  ==================================================
llama_hidden_8k    537,034,752  129 us  156 us, 0.82, 0.97x compile
many_short_rows    537,923,584  129 us  134 us, 0.95, 0.98x compile_max_autotune
large_offset_fp32  537,034,752  129 us  132 us, 0.97, 0.99x compile
=================  ===========  ======  ==================================================

Floors use the rates measured on the H200 (copy 4.17 TB/s, bf16 754 TFLOP/s, fp8 1284 TFLOP/s;
benchmarks/data/references_h200.json, 2026-11-30).
The last column is benchmarks/summary.py's row for the workload: the newest evaluation against every baseline
candidate, and the fastest candidate correct in every evaluation (benchmarks/docstring_figures.py writes it).
Below the best baseline (torch.compile): llama_hidden_8k (0.97x of 153 us) and large_offset_fp32 (0.99x of 132 us,
within the run-to-run spread); many_short_rows ties it (1.00x) and is 0.98x of compile max-autotune's 132 us (round
20, one evaluation).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

EPS = 1e-5
MAX_REGISTER_BLOCK = 4096  # rows up to this length live in registers; longer ones take the two-sweep kernel
ROW_TILE = 4096  # elements of the [ROWS, BLOCK_N] register tile: 64 fp32 per thread at 2 warps
TILE_N = 2048  # column tile of the two-sweep kernel: 16 fp32 values per thread at 4 warps


@triton.jit
def _layernorm_fwd_kernel(
    X, W, B, Y, MEAN, RSTD,
    M, N,
    stride_xm, stride_ym,
    eps, num_progs,
    ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """One program normalizes row blocks pid, pid + num_progs, ... of ROWS rows each.

    Per row it reads N elements of x and writes N elements of y plus two fp32 scalars; w and b (2N elements) are
    read once per program.
    """
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    # w and b are reused by every row of every block: load once, keep in L2 for the other programs.
    w = tl.load(W + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(B + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    num_blocks = tl.cdiv(M, ROWS)
    for blk in tl.range(pid, num_blocks, num_progs):
        rows = blk * ROWS + tl.arange(0, ROWS)
        row_ok = rows < M
        mask = row_ok[:, None] & col_ok[None, :]
        # x is read exactly once: stream it past L2.
        # No evict_first / .cs on x and y here: on the H200 they made this kernel 4-7% slower
        # (benchmarks/data/runs/round7/tune_hints_ab.json); w and b keep their evict_last.
        x = tl.load(X + rows[:, None].to(tl.int64) * stride_xm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        # Corrected two-pass over registers: center on a first mean, then fix the mean with the centered sum.
        mean0 = tl.sum(x, axis=1) / N
        xc = tl.where(mask, x - mean0[:, None], 0.0)
        d = tl.sum(xc, axis=1) / N
        var = tl.maximum(tl.sum(xc * xc, axis=1) / N - d * d, 0.0)
        rstd = tl.math.rsqrt(var + eps)
        y = (xc - d[:, None]) * rstd[:, None] * w[None, :] + b[None, :]
        tl.store(Y + rows[:, None].to(tl.int64) * stride_ym + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
        tl.store(MEAN + rows, mean0 + d, mask=row_ok)
        tl.store(RSTD + rows, rstd, mask=row_ok)


@triton.jit
def _layernorm_fwd_tiled_kernel(
    X, W, B, Y, MEAN, RSTD,
    N,
    stride_xm, stride_ym,
    eps,
    BLOCK_N: tl.constexpr,
):
    """One program normalizes one row of any length, in BLOCK_N column tiles.

    Sweep 1 reads the row from HBM and merges per-tile (count, mean, M2) with Chan's formula; sweep 2 reads it
    again from L2 and writes y. HBM traffic: N elements in, N out, w and b from L2 after the first rows.
    """
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_xm
    y_row = Y + row * stride_ym
    cols = tl.arange(0, BLOCK_N)
    # Shift by the row's first element: statistics of x - k are small numbers, so the merged mean keeps its
    # precision (an fp32 mean of 1000 alone carries a 3e-5 rounding error into every (x - mean)).
    k = tl.load(x_row).to(tl.float32)
    n_acc = 0.0
    mean = 0.0
    m2 = 0.0
    # Sweep 1: Welford/Chan merge of per-tile (count, mean, M2); evict_last keeps the row in L2 for sweep 2.
    for start in tl.range(0, N, BLOCK_N):
        offs = start + cols
        ok = offs < N
        x = tl.load(x_row + offs, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        xs = tl.where(ok, x - k, 0.0)
        n_t = tl.minimum(N - start, BLOCK_N).to(tl.float32)
        t_mean = tl.sum(xs, axis=0) / n_t
        xc = tl.where(ok, xs - t_mean, 0.0)
        t_m2 = tl.sum(xc * xc, axis=0)
        n_new = n_acc + n_t
        delta = t_mean - mean
        mean = mean + delta * (n_t / n_new)
        m2 = m2 + t_m2 + delta * delta * (n_acc * n_t / n_new)
        n_acc = n_new
    rstd = tl.math.rsqrt(m2 / N + eps)
    tl.store(MEAN + row, k + mean)
    tl.store(RSTD + row, rstd)
    # Sweep 2: normalize; this is the last use of x.
    for start in tl.range(0, N, BLOCK_N):
        offs = start + cols
        ok = offs < N
        x = tl.load(x_row + offs, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(W + offs, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        b = tl.load(B + offs, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        y = ((x - k) - mean) * rstd * w + b
        tl.store(y_row + offs, y.to(Y.dtype.element_ty), mask=ok, cache_modifier=".cs")


def _plan(N: int, *, max_block: int = MAX_REGISTER_BLOCK, row_tile: int = ROW_TILE, tile_n: int = TILE_N,
          rows: int | None = None) -> dict:
    """Which kernel a row length takes, and its tile: {path, rows, block_n, num_warps}.

    Swept on the H200 (benchmarks/data/runs/round7/tune_*.json: rows 1-16, 2-16 warps, persistent or not, tiles of
    512-4096): rows of up to 4096 do best as [ROWS, BLOCK_N] tiles of 4096 elements at 2 warps, one program per
    tile (many_short_rows 134 us, large_offset_fp32 133 us; a persistent grid of resident programs took 160-170
    us). An 8192-wide row held in registers took >= 201 us at any warp count, against 155 us for the two-sweep
    kernel with 2048-element tiles at 4 warps: small programs, many of them resident, the second sweep from L2.
    """
    block_n = triton.next_power_of_2(N)
    if block_n > max_block:
        tile = min(tile_n, block_n)
        return dict(path="tiled", rows=1, block_n=tile, num_warps=max(1, min(16, tile // 512)))
    r = rows or max(1, row_tile // block_n)
    return dict(path="rows", rows=r, block_n=block_n, num_warps=max(1, min(16, r * block_n // 2048)))


def layernorm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = EPS, *,
              _max_block: int = MAX_REGISTER_BLOCK, _row_tile: int = ROW_TILE, _tile_n: int = TILE_N,
              _rows: int | None = None, _num_progs: int | None = None):
    """LayerNorm over the last dim of a 2-D ``x``; returns ``(y, mean, rstd)``.

    The underscored arguments move the path thresholds and tiles so tests can reach every path with small shapes;
    ``_num_progs`` makes the row kernel loop over several row blocks per program (a persistent grid).
    """
    assert x.dim() == 2 and w.shape == b.shape == (x.shape[1],)
    assert x.stride(1) == 1 and w.is_contiguous() and b.is_contiguous()
    M, N = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(M, device=x.device, dtype=torch.float32)
    rstd = torch.empty(M, device=x.device, dtype=torch.float32)
    if M == 0:
        return y, mean, rstd
    plan = _plan(N, max_block=_max_block, row_tile=_row_tile, tile_n=_tile_n, rows=_rows)
    if plan["path"] == "tiled":
        _layernorm_fwd_tiled_kernel[(M,)](
            x, w, b, y, mean, rstd, N, x.stride(0), y.stride(0), eps,
            BLOCK_N=plan["block_n"], num_warps=plan["num_warps"])
        return y, mean, rstd
    progs = _num_progs or triton.cdiv(M, plan["rows"])
    _layernorm_fwd_kernel[(progs,)](x, w, b, y, mean, rstd, M, N, x.stride(0), y.stride(0), eps, progs,
                                    ROWS=plan["rows"], BLOCK_N=plan["block_n"], num_warps=plan["num_warps"])
    return y, mean, rstd


def kernel(x, w, b):
    return layernorm(x, w, b)
