"""Expert Triton reference for ``softmax``: y = softmax(x, dim=-1), x [M, N] bf16 or fp32, fp32 math.

Guidance implemented (tasks/softmax/task.yaml): L1.one-read-one-write, L1.online-normalizer, L2.row-in-registers,
L2.rows-per-program, L2.tiled-two-sweep, L2.split-row-combine, L3.exp2-fold, L3.vector-io, L3.reciprocal-scale.

Four paths, picked by the launcher from the row length N and the row count M:

- ``tile``: N <= 1024. One program per [BLOCK_M, BLOCK_N] tile of 1024 elements (4 rows of 256 at 4 warps),
  reduced along axis 1, so reductions stay inside a warp. The kernel can loop over tiles, but a persistent grid
  of 2-8 programs per SM was 2-9% slower on the H200 (benchmarks/data/runs/round7/tune_memory_bound.json).
- ``rows``: 1024 < N <= 16384. One program per row, BLOCK_N = next_pow2(N) held in registers, num_warps
  4 / 8 / 16 as BLOCK_N grows (<= 32 fp32 values per thread, no spills).
- ``two_sweep``: N > 16384 and M >= 2 x SMs. One program per row (persistent over rows) sweeps the row twice:
  online (max, sum) with evict_last loads, then a re-read (from L2) that normalizes. The number of programs is
  capped so that the rows in flight fit in ~40 MB of L2.
- ``split``: N > 16384 and M < 2 x SMs. Each row is cut into C chunks; kernel 1 writes per-chunk (m, s) to an
  fp32 [M, C] workspace, kernel 2 merges the C pairs with exp2 and normalizes its own chunk.

Every path reads x once from HBM and writes y once (the second sweeps re-read from L2), uses exp2 with
log2(e) applied to (x - m) (pre-scaling x itself would overflow fp32 for |x| > 2.3e38), computes 1/s once per
row, accumulates in fp32 and casts at the store. Row offsets are int64.

Roofline floors on H200 (bytes = 2*M*N*elt at the measured copy bandwidth):

===============  ==================  =======  ==================================================
workload         shape / dtype       floor    H200: time, fraction of floor, x best peer
===============  ==================  =======  ==================================================
rows_4k          16384 x 4096 bf16   64.4 us  72.0 us, 0.89, 0.97x liger
short_rows_fp32  262144 x 256 fp32   129 us   130 us, 0.99, 1.00x compile_max_autotune
vocab_rows       1024 x 128256 bf16  126 us   202 us, 0.62, 1.40x compile_max_autotune
few_huge_rows    16 x 2097152 bf16   32.2 us  60.1 us, 0.53, 1.40x compile_max_autotune
===============  ==================  =======  ==================================================

Floors use the rates measured on the H200 (copy 4.17 TB/s, bf16 754 TFLOP/s, fp8 1284 TFLOP/s;
benchmarks/data/references_h200.json, 2026-11-30).
The last column is benchmarks/summary.py's row for the workload: the newest evaluation against every baseline
candidate, and the fastest candidate correct in every evaluation (benchmarks/docstring_figures.py writes it).
Against the best baseline: short_rows_fp32 1.01x of torch.compile's 131 us (0.92x with the persistent tile grid),
1.00x of compile max-autotune's 129 us (round 20, one evaluation).
few_huge_rows re-reads 64 MB, about the L2 size.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)

_SHORT_N = 1024          # rows up to this length go through the 2-D tile path
_MAX_REG_N = 16384       # an fp32 row of up to 64 KB stays in one program's registers
_SHORT_TILE = 1024       # elements of a tile-path program: [4, 256] at 4 warps, 8 per thread
_TILE_BYTES = 16384      # bytes of x per program per iteration in the split path
_SWEEP_BYTES = 32768     # two-sweep path: one 16-warp program per SM keeps 32 KB of loads in flight
_L2_BUDGET = 40 << 20    # bytes of evict_last rows in flight in the two-sweep path (H200 L2: 60 MB)


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
def _softmax_tile_kernel(
    x_ptr, y_ptr,
    M, N,
    stride_xm, stride_ym,
    num_progs,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Short rows: each iteration normalizes BLOCK_M whole rows held as one [BLOCK_M, BLOCK_N] tile.

    A program visits row blocks pid, pid + num_progs, ...; per iteration it reads and writes
    BLOCK_M * N * elt bytes (~16 KB) once.
    """
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols[None, :] < N
    for rb in tl.range(pid, tl.cdiv(M, BLOCK_M), num_progs, num_stages=2):
        rows = rb * BLOCK_M + tl.arange(0, BLOCK_M)
        # Rows past M re-read row M-1 (their store is masked), so no row is all -inf and no NaN is formed.
        # num_stages=2 prefetches the next tile (cp.async); x is read once, so no L2 hint is needed here.
        src = tl.minimum(rows, M - 1).to(tl.int64)
        x = tl.load(x_ptr + src[:, None] * stride_xm + cols[None, :], mask=col_mask,
                    other=-float("inf")).to(tl.float32)
        # Row max and sum along axis 1: the layout keeps one row inside a warp.
        m = tl.max(x, axis=1)
        p = tl.exp2((x - m[:, None]) * LOG2E)
        inv = 1.0 / tl.sum(p, axis=1)
        dst = rows.to(tl.int64)
        tl.store(y_ptr + dst[:, None] * stride_ym + cols[None, :], (p * inv[:, None]).to(y_ptr.dtype.element_ty),
                 mask=(rows[:, None] < M) & col_mask)


@triton.jit
def _softmax_rows_kernel(
    x_ptr, y_ptr,
    N,
    stride_xm, stride_ym,
    BLOCK_N: tl.constexpr,
):
    """One row per program, held whole in registers: reads and writes N * elt bytes once."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_xm + cols, mask=mask, other=-float("inf"),
                eviction_policy="evict_first").to(tl.float32)
    m = tl.max(x, axis=0)
    p = tl.exp2((x - m) * LOG2E)
    inv = 1.0 / tl.sum(p, axis=0)
    tl.store(y_ptr + row * stride_ym + cols, (p * inv).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_two_sweep_kernel(
    x_ptr, y_ptr,
    M, N,
    stride_xm, stride_ym,
    num_progs,
    BLOCK_N: tl.constexpr,
):
    """Long rows, many of them: a program owns rows pid, pid + num_progs, ... and sweeps each twice.

    Sweep 1 reads N * elt bytes from HBM (kept in L2 with evict_last) and builds (m, s) online;
    sweep 2 re-reads them from L2 and writes N * elt bytes.
    """
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    for row in tl.range(pid, M, num_progs):
        x_row = x_ptr + tl.cast(row, tl.int64) * stride_xm
        y_row = y_ptr + tl.cast(row, tl.int64) * stride_ym
        # Sweep 1: running max m and running sum s of exp(x - m), rescaled when m grows. The sweeps are not
        # software-pipelined (no num_stages): Triton 3.6 would turn the loads into cp.async, which drops the
        # eviction hints (checked in sm_90 PTX). 32 KB tiles keep enough bytes in flight instead.
        m = tl.full([], -float("inf"), tl.float32)
        s = tl.zeros([], tl.float32)
        for start in tl.range(0, N, BLOCK_N):
            cols = start + offs
            x = tl.load(x_row + cols, mask=cols < N, other=-float("inf"),
                        eviction_policy="evict_last").to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=0))
            s = s * tl.exp2((m - m_new) * LOG2E) + tl.sum(tl.exp2((x - m_new) * LOG2E), axis=0)
            m = m_new
        inv = 1.0 / s
        # Sweep 2: the row is still in L2; stream it out and write y.
        for start in tl.range(0, N, BLOCK_N):
            cols = start + offs
            mask = cols < N
            x = tl.load(x_row + cols, mask=mask, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
            y = tl.exp2((x - m) * LOG2E) * inv
            tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask, cache_modifier=".cs")


@triton.jit
def _softmax_chunk_stats_kernel(
    x_ptr, m_ptr, s_ptr,
    N, CHUNK,
    stride_xm,
    BLOCK_N: tl.constexpr,
):
    """Split rows, stage 1: program (row, c) reduces x[row, c*CHUNK : (c+1)*CHUNK] to one (m_c, s_c) pair.

    Reads CHUNK * elt bytes (evict_last, for stage 2), writes 8 bytes to the [M, C] fp32 workspace.
    """
    row = tl.program_id(0)
    c = tl.program_id(1)
    num_chunks = tl.num_programs(1)
    x_row = x_ptr + row.to(tl.int64) * stride_xm
    offs = tl.arange(0, BLOCK_N)
    lo = c * CHUNK
    m = tl.full([], -float("inf"), tl.float32)
    s = tl.zeros([], tl.float32)
    for start in tl.range(lo, tl.minimum(lo + CHUNK, N), BLOCK_N):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < N, other=-float("inf"), eviction_policy="evict_last").to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp2((m - m_new) * LOG2E) + tl.sum(tl.exp2((x - m_new) * LOG2E), axis=0)
        m = m_new
    tl.store(m_ptr + row * num_chunks + c, m)
    tl.store(s_ptr + row * num_chunks + c, s)


@triton.jit
def _softmax_chunk_normalize_kernel(
    x_ptr, y_ptr, m_ptr, s_ptr,
    N, CHUNK,
    stride_xm, stride_ym,
    BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr,
):
    """Split rows, stage 2: merge the row's C (m_c, s_c) pairs, then normalize one chunk.

    Reads 8*C bytes of workspace and CHUNK * elt bytes of x (mostly L2 hits), writes CHUNK * elt bytes.
    Programs run in the reverse of stage 1's order, so the chunks stage 1 loaded last (most likely still in L2)
    are consumed first.
    """
    num_rows = tl.num_programs(0)
    num_chunks = tl.num_programs(1)
    row = num_rows - 1 - tl.program_id(0)
    c = num_chunks - 1 - tl.program_id(1)
    # Merge: m = max_c m_c, s = sum_c s_c * exp(m_c - m).
    k = tl.arange(0, BLOCK_C)
    kmask = k < num_chunks
    m_c = tl.load(m_ptr + row * num_chunks + k, mask=kmask, other=-float("inf"))
    s_c = tl.load(s_ptr + row * num_chunks + k, mask=kmask, other=0.0)
    m = tl.max(m_c, axis=0)
    inv = 1.0 / tl.sum(s_c * tl.exp2((m_c - m) * LOG2E), axis=0)
    # Normalize this chunk.
    x_row = x_ptr + row.to(tl.int64) * stride_xm
    y_row = y_ptr + row.to(tl.int64) * stride_ym
    offs = tl.arange(0, BLOCK_N)
    lo = c * CHUNK
    for start in tl.range(lo, tl.minimum(lo + CHUNK, N), BLOCK_N):
        cols = start + offs
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
        y = tl.exp2((x - m) * LOG2E) * inv
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask, cache_modifier=".cs")


# ------------------------------------------------------------------------------------------------ launcher


def _row_warps(block_n: int) -> int:
    # <= 32 fp32 values per thread: 4 warps up to 2k, 8 up to 8k, 16 beyond.
    return 4 if block_n <= 2048 else 8 if block_n <= 8192 else 16


def _pick_path(M: int, N: int, num_sms: int) -> str:
    if N <= _SHORT_N:
        return "tile"
    if N <= _MAX_REG_N:
        return "rows"
    return "two_sweep" if M >= 2 * num_sms else "split"


def softmax(x: torch.Tensor, *, _path: str | None = None, _block_n: int | None = None,
            _block_m: int | None = None, _num_progs: int | None = None, _chunk: int | None = None) -> torch.Tensor:
    """Row-wise softmax over the last dimension of a 2-D tensor.

    The underscored arguments override the launcher's choices; tests use them to run every path on small
    inputs. ``_path`` is one of ``tile``, ``rows``, ``two_sweep``, ``split``.
    """
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [M, N], got shape {tuple(x.shape)}")
    if x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise TypeError(f"x must be bf16, fp16 or fp32, got {x.dtype}")
    if x.stride(1) != 1:
        x = x.contiguous()
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return y
    num_sms = _sm_count(x)
    elt = x.element_size()
    path = _path or _pick_path(M, N, num_sms)

    if path == "tile":
        block_n = _block_n or triton.next_power_of_2(N)
        block_m = _block_m or max(1, min(triton.next_power_of_2(M), _SHORT_TILE // block_n))
        warps = 4 if block_m * block_n <= 4096 else 8
        # One program per row block: on the H200 a persistent grid (2-8 programs per SM) was 2-9% slower than
        # [4, 256] tiles with a program each (benchmarks/data/runs/round7/tune_memory_bound.json: 130 vs 141 us).
        progs = _num_progs or triton.cdiv(M, block_m)
        _softmax_tile_kernel[(progs,)](x, y, M, N, x.stride(0), y.stride(0), progs,
                                       BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps)
    elif path == "rows":
        block_n = _block_n or triton.next_power_of_2(N)
        if block_n < N:
            raise ValueError(f"rows path needs BLOCK_N >= N, got {block_n} < {N}")
        _softmax_rows_kernel[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=block_n,
                                   num_warps=_row_warps(block_n))
    elif path == "two_sweep":
        block_n = _block_n or _SWEEP_BYTES // elt
        # One program per SM, or more while the evict_last rows in flight still fit the L2 budget.
        per_sm = max(1, _L2_BUDGET // (N * elt) // num_sms)
        progs = _num_progs or min(M, num_sms * per_sm)
        _softmax_two_sweep_kernel[(progs,)](x, y, M, N, x.stride(0), y.stride(0), progs,
                                            BLOCK_N=block_n, num_warps=16)
    elif path == "split":
        block_n = _block_n or _TILE_BYTES // elt
        if _chunk is None:
            # ~4 programs per SM in one wave: C chunks per row, each a whole number of BLOCK_N tiles.
            chunks = max(1, triton.cdiv(4 * num_sms, M))
            chunk = triton.cdiv(triton.cdiv(N, chunks), block_n) * block_n
        else:
            chunk = _chunk
        if chunk % block_n:
            raise ValueError(f"chunk ({chunk}) must be a multiple of BLOCK_N ({block_n})")
        chunks = triton.cdiv(N, chunk)
        m_ws = torch.empty((M, chunks), dtype=torch.float32, device=x.device)
        s_ws = torch.empty((M, chunks), dtype=torch.float32, device=x.device)
        _softmax_chunk_stats_kernel[(M, chunks)](x, m_ws, s_ws, N, chunk, x.stride(0),
                                                 BLOCK_N=block_n, num_warps=8)
        _softmax_chunk_normalize_kernel[(M, chunks)](x, y, m_ws, s_ws, N, chunk, x.stride(0), y.stride(0),
                                                     BLOCK_N=block_n, BLOCK_C=triton.next_power_of_2(chunks),
                                                     num_warps=8)
    else:
        raise ValueError(f"unknown path {path!r}")
    return y


def kernel(x: torch.Tensor) -> torch.Tensor:
    """Submission entry point: ``softmax(x)``."""
    return softmax(x)
