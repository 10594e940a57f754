"""Expert Triton reference for ``cross_entropy``: fused loss + dlogits over a large vocabulary.

Guidance implemented (tasks/cross_entropy/task.yaml): L1.online-lse, L1.fused-grad, L2.row-two-sweeps,
L2.l2-footprint-control, L2.vocab-split-lse-merge, L3.int64-offsets, L3.exp2-fp32, L3.ignore-and-scale.

For logits z [M, V] (bf16) and targets t [M] (int64, -100 = ignored) it returns loss [M] fp32 with
loss_i = logsumexp(z_i) - z_i[t_i], and dlogits [M, V] bf16 = softmax(z_i) - onehot(t_i). dlogits is a new
tensor, not written over the logits: the evaluator hands kernels clones and rejects input mutation, so writing
in place would only save memory (4.8 GB at gemma_vocab), not traffic.

Every path makes one streaming pass for the statistics and one for the gradient, in the same program:

- sweep 1 (loads with ``evict_last``): online (m, s) over BLOCK_V tiles, m the running max of z, s the running
  sum of exp2(z*log2(e) - m*log2(e)) rescaled by exp2 when m grows; z[t] is one scalar load.
  loss = (m - z[t]) + log2(s)*ln(2), so the loss never subtracts two large numbers computed in the log2 domain.
- sweep 2 (``evict_first`` loads, streaming ``.cs`` stores): p = exp2(z*log2(e) - m*log2(e)) * (1/s), minus 1 in
  the target column, cast to bf16 at the store. It walks the tiles in reverse, so the tiles sweep 1 loaded last
  (the likeliest to still be in L2) are consumed first and an L2 overflow degrades gradually instead of LRU-thrashing.
- an ignored row (t == -100) skips sweep 1 and streams zeros: loss 0, zero gradient.
- row offsets are int64 (``_row_offset``): at gemma_vocab, row * V reaches 2.4e9 > 2^31.

Three paths, picked by the launcher (``_pick_path``):

- ``rows`` (llama3_vocab, 256 KB rows): a persistent grid of one 16-warp program per SM; each program owns whole
  rows. The bytes between a tile's two reads are one row per program: 132 x 256 KB = 34 MB, inside the 60 MB L2.
- ``coop`` (gemma_vocab, 512 KB rows): 132 whole-row programs would keep 67 MB live, more than L2. Each row is cut
  into C = V*elt / 128 KB chunks and C programs of one group work on the row's chunks at the same time. Each
  publishes its chunk's (m_c, s_c), bumps a per-row arrival counter and waits until all C arrived, merges the C
  pairs (lse merge) and writes the gradient of its own chunk. Live bytes: 132 programs x 128 KB = 17 MB. The grid
  is one program per SM (one wave), so all peers are resident at once. The wait is bounded: if a peer has not
  arrived after SPIN polls, the program computes the rest of the row's statistics itself (a re-read, never a
  deadlock). The Triton interpreter runs programs one after another, so there the group's last program (chunk 0,
  which writes the loss) merges and the others take the fallback; both branches are tested on CPU.
- ``split`` (few_rows_huge_vocab, M < 2 x SMs): rows too few to fill the GPU. Kernel 1, grid (M, C), writes the
  chunk statistics; kernel 2, grid (M, C), merges them, writes the loss (chunk 0) and its chunk's gradient.
  64 rows x 512 KB = 32 MB, so kernel 2's re-read is served from L2.

Roofline floors on H200 (bytes = 2*M*V*elt + 12*M at the measured copy bandwidth; 6*M*V flops are far below
the compute roof):

===================  ==================  =======  ==================================================
workload             shape / dtype       floor    H200: time, fraction of floor, x best peer
===================  ==================  =======  ==================================================
llama3_vocab         8192 x 128256 bf16  1.01 ms  1.60 ms, 0.62, 1.30x compile_max_autotune
gemma_vocab          9216 x 262144 bf16  2.32 ms  4.43 ms, 0.52, 1.06x compile_max_autotune
few_rows_huge_vocab  64 x 262144 bf16    16.1 us  35.8 us, 0.45, 2.08x compile_max_autotune
===================  ==================  =======  ==================================================

Floors use the rates measured on the H200 (copy 4.17 TB/s, bf16 754 TFLOP/s, fp8 1284 TFLOP/s;
benchmarks/data/references_h200.json, 2026-11-30).
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)
IGNORE_INDEX = -100

_L2_BUDGET = 40 << 20            # bytes re-read from L2 that may be in flight at once (H200 L2: 60 MB)
_COOP_CHUNK_BYTES = 128 << 10    # per-program vocab chunk of the coop path
_SPLIT_CHUNK_BYTES = 64 << 10    # per-program vocab chunk of the split path (64 rows x 8 chunks = 512 programs)
_SPLIT_MIN_BYTES = 128 << 10     # rows shorter than this are not worth splitting even when M is small
_SPIN_GPU = 1 << 14              # arrival-counter polls before the coop fallback (peers normally arrive in us)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.lru_cache(maxsize=None)
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _sm_count(x: torch.Tensor) -> int:
    if x.is_cuda and not _interpreting():
        return _num_sms(x.device.index if x.device.index is not None else torch.cuda.current_device())
    return 4  # the interpreter runs programs one after another; a small grid still exercises persistence


# ------------------------------------------------------------------------------------------------ helpers


@triton.jit
def _row_offset(row, stride):
    """Element offset of a row, in int64: row * stride wraps int32 beyond 2^31 elements (gemma_vocab)."""
    return tl.cast(row, tl.int64) * stride


@triton.jit
def _chunk_stats(src, lo, hi, offs, BLOCK_V: tl.constexpr):
    """Sweep 1 over z[lo:hi]: returns (m, s) with m = max z and s = sum exp(z - m), via exp2.

    The next tile is loaded before the current one is reduced (register double buffering), so two tiles are in
    flight per program. The loop is not software-pipelined (num_stages=1): Triton's pipeliner would turn the loads
    into cp.async copies, which drop the L2 evict_last hint that keeps the row resident for sweep 2.
    """
    m = tl.full([], -float("inf"), tl.float32)
    s = tl.zeros([], tl.float32)
    cols = lo + offs
    z_next = tl.load(src + cols, mask=cols < hi, other=-float("inf"), eviction_policy="evict_last")
    for start in tl.range(lo, hi, BLOCK_V, num_stages=1):
        z = z_next.to(tl.float32)
        cols = start + BLOCK_V + offs
        z_next = tl.load(src + cols, mask=cols < hi, other=-float("inf"), eviction_policy="evict_last")
        m_new = tl.maximum(m, tl.max(z, axis=0))
        # One FFMA + one MUFU.EX2 per element: log2(e) is folded into the exponent.
        s = s * tl.exp2((m - m_new) * LOG2E) + tl.sum(tl.exp2(z * LOG2E - m_new * LOG2E), axis=0)
        m = m_new
    return m, s


@triton.jit
def _merge_stats(m_a, s_a, m_b, s_b):
    """LSE merge of two partial (m, s) pairs; an empty part is (-inf, 0)."""
    m = tl.maximum(m_a, m_b)
    return m, s_a * tl.exp2((m_a - m) * LOG2E) + s_b * tl.exp2((m_b - m) * LOG2E)


@triton.jit
def _grad_sweep(src, dst, lo, hi, target, m, s, offs, BLOCK_V: tl.constexpr):
    """Sweep 2 over z[lo:hi]: dst = exp(z - m)/s - [col == target], newest tiles first, bf16 at the store."""
    m_log2 = m * LOG2E
    inv_s = 1.0 / s
    n_tiles = tl.cdiv(hi - lo, BLOCK_V)
    for i in tl.range(0, n_tiles, num_stages=1):
        cols = lo + (n_tiles - 1 - i) * BLOCK_V + offs
        mask = cols < hi
        z = tl.load(src + cols, mask=mask, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
        p = tl.exp2(z * LOG2E - m_log2) * inv_s
        p = tl.where(cols == target, p - 1.0, p)
        tl.store(dst + cols, p.to(dst.dtype.element_ty), mask=mask, cache_modifier=".cs")


@triton.jit
def _zero_sweep(dst, lo, hi, offs, BLOCK_V: tl.constexpr):
    """Ignored row: stream zeros over dst[lo:hi] without reading the logits."""
    zero = tl.zeros([BLOCK_V], dtype=dst.dtype.element_ty)
    for start in tl.range(lo, hi, BLOCK_V, num_stages=1):
        cols = start + offs
        tl.store(dst + cols, zero, mask=cols < hi, cache_modifier=".cs")


@triton.jit
def _store_loss(loss_ptr, row, src, target, m, s):
    z_t = tl.load(src + target).to(tl.float32)
    tl.store(loss_ptr + row, (m - z_t) + tl.log2(s) * LN2)


# ------------------------------------------------------------------------------------------------ kernels


@triton.jit
def _ce_rows_kernel(
    logits_ptr, target_ptr, loss_ptr, grad_ptr,
    M, V,
    stride_lm, stride_gm,
    IGNORE: tl.constexpr, BLOCK_V: tl.constexpr,
):
    """Persistent whole-row programs: program p owns rows p, p + P, ...

    Per valid row it reads V*elt bytes from HBM (sweep 1), re-reads them from L2 (sweep 2) and writes V*elt
    bytes of gradient plus 4 bytes of loss; an ignored row writes V*elt bytes of zeros and reads nothing.
    """
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK_V)
    for row in tl.range(pid, M, tl.num_programs(0)):
        src = logits_ptr + _row_offset(row, stride_lm)
        dst = grad_ptr + _row_offset(row, stride_gm)
        t = tl.load(target_ptr + row)
        if t == IGNORE:
            _zero_sweep(dst, 0, V, offs, BLOCK_V)
            tl.store(loss_ptr + row, 0.0)
        else:
            m, s = _chunk_stats(src, 0, V, offs, BLOCK_V)
            _store_loss(loss_ptr, row, src, t, m, s)
            _grad_sweep(src, dst, 0, V, t, m, s, offs, BLOCK_V)


@triton.jit
def _ce_coop_kernel(
    logits_ptr, target_ptr, loss_ptr, grad_ptr, part_m_ptr, part_s_ptr, count_ptr,
    M, V, CHUNK,
    stride_lm, stride_gm,
    IGNORE: tl.constexpr, CHUNKS: tl.constexpr, CHUNKS_P2: tl.constexpr, BLOCK_V: tl.constexpr,
    SPIN: tl.constexpr,
):
    """C cooperating programs per row: program p handles chunk C-1 - p % C of rows p // C, p // C + P / C, ...

    Per valid row and chunk: reads CHUNK*elt bytes (HBM, then L2), writes CHUNK*elt bytes of gradient and
    8 bytes of partial statistics, reads the row's C partials (8*C bytes) once all peers arrived.
    """
    pid = tl.program_id(0)
    # Chunk 0 (which writes the loss) is the group's last program id: programs that start later arrive later, so
    # it usually finds its peers' partials published (on CPU, where programs run in order, it always does).
    c = CHUNKS - 1 - pid % CHUNKS
    group = pid // CHUNKS
    n_groups = tl.num_programs(0) // CHUNKS
    lo = c * CHUNK
    hi = tl.minimum(lo + CHUNK, V)
    offs = tl.arange(0, BLOCK_V)
    ks = tl.arange(0, CHUNKS_P2)
    for row in tl.range(group, M, n_groups):
        src = logits_ptr + _row_offset(row, stride_lm)
        dst = grad_ptr + _row_offset(row, stride_gm)
        t = tl.load(target_ptr + row)
        if t == IGNORE:
            # Uniform across the row's C programs: no statistics, no arrival.
            _zero_sweep(dst, lo, hi, offs, BLOCK_V)
            if c == 0:
                tl.store(loss_ptr + row, 0.0)
        else:
            m_c, s_c = _chunk_stats(src, lo, hi, offs, BLOCK_V)
            tl.store(part_m_ptr + row * CHUNKS + c, m_c)
            tl.store(part_s_ptr + row * CHUNKS + c, s_c)
            # Publish (release orders the two stores before the count), then poll until all C arrived.
            arrived = tl.atomic_add(count_ptr + row, 1, sem="acq_rel") + 1
            polls = 0
            while (arrived < CHUNKS) & (polls < SPIN):
                arrived = tl.atomic_add(count_ptr + row, 0, sem="acquire")
                polls += 1
            if arrived >= CHUNKS:
                # LSE merge of the C partials (.cg: read through L2, never a stale L1 line).
                pm = tl.load(part_m_ptr + row * CHUNKS + ks, mask=ks < CHUNKS, other=-float("inf"),
                             cache_modifier=".cg")
                ps = tl.load(part_s_ptr + row * CHUNKS + ks, mask=ks < CHUNKS, other=0.0, cache_modifier=".cg")
                m = tl.max(pm, axis=0)
                s = tl.sum(ps * tl.exp2((pm - m) * LOG2E), axis=0)
            else:
                # A peer is late: finish the row's statistics here instead of waiting (correct, costs a re-read).
                m_a, s_a = _chunk_stats(src, 0, lo, offs, BLOCK_V)
                m_b, s_b = _chunk_stats(src, hi, V, offs, BLOCK_V)
                m, s = _merge_stats(m_c, s_c, m_a, s_a)
                m, s = _merge_stats(m, s, m_b, s_b)
            if c == 0:
                _store_loss(loss_ptr, row, src, t, m, s)
            _grad_sweep(src, dst, lo, hi, t, m, s, offs, BLOCK_V)


@triton.jit
def _ce_split_stats_kernel(
    logits_ptr, target_ptr, part_m_ptr, part_s_ptr,
    V, CHUNK,
    stride_lm,
    IGNORE: tl.constexpr, BLOCK_V: tl.constexpr,
):
    """Few rows, stage 1: program (row, c) reduces chunk c of the row to (m_c, s_c).

    Reads CHUNK*elt bytes (evict_last, for stage 2) and writes 8 bytes; ignored rows read nothing.
    """
    row = tl.program_id(0)
    c = tl.program_id(1)
    t = tl.load(target_ptr + row)
    if t != IGNORE:
        src = logits_ptr + _row_offset(row, stride_lm)
        lo = c * CHUNK
        m_c, s_c = _chunk_stats(src, lo, tl.minimum(lo + CHUNK, V), tl.arange(0, BLOCK_V), BLOCK_V)
        tl.store(part_m_ptr + row * tl.num_programs(1) + c, m_c)
        tl.store(part_s_ptr + row * tl.num_programs(1) + c, s_c)


@triton.jit
def _ce_split_grad_kernel(
    logits_ptr, target_ptr, loss_ptr, grad_ptr, part_m_ptr, part_s_ptr,
    V, CHUNK,
    stride_lm, stride_gm,
    IGNORE: tl.constexpr, CHUNKS_P2: tl.constexpr, BLOCK_V: tl.constexpr,
):
    """Few rows, stage 2: merge the row's C partials, write the loss (chunk 0) and chunk c's gradient.

    Reads 8*C bytes of partials and CHUNK*elt bytes of logits (L2 hits: all rows fit), writes CHUNK*elt bytes.
    Programs run in the reverse of stage 1's order, so the chunks loaded last are consumed first.
    """
    row = tl.num_programs(0) - 1 - tl.program_id(0)
    n_chunks = tl.num_programs(1)
    c = n_chunks - 1 - tl.program_id(1)
    src = logits_ptr + _row_offset(row, stride_lm)
    dst = grad_ptr + _row_offset(row, stride_gm)
    offs = tl.arange(0, BLOCK_V)
    lo = c * CHUNK
    hi = tl.minimum(lo + CHUNK, V)
    t = tl.load(target_ptr + row)
    if t == IGNORE:
        _zero_sweep(dst, lo, hi, offs, BLOCK_V)
        if c == 0:
            tl.store(loss_ptr + row, 0.0)
    else:
        ks = tl.arange(0, CHUNKS_P2)
        pm = tl.load(part_m_ptr + row * n_chunks + ks, mask=ks < n_chunks, other=-float("inf"))
        ps = tl.load(part_s_ptr + row * n_chunks + ks, mask=ks < n_chunks, other=0.0)
        m = tl.max(pm, axis=0)
        s = tl.sum(ps * tl.exp2((pm - m) * LOG2E), axis=0)
        if c == 0:
            _store_loss(loss_ptr, row, src, t, m, s)
        _grad_sweep(src, dst, lo, hi, t, m, s, offs, BLOCK_V)


# ------------------------------------------------------------------------------------------------ launcher


def _pick_path(M: int, V: int, elt: int, num_sms: int) -> str:
    if M < 2 * num_sms and V * elt >= _SPLIT_MIN_BYTES:
        return "split"
    if num_sms * V * elt <= _L2_BUDGET:
        return "rows"
    return "coop"


def _round_up(x: int, m: int) -> int:
    return triton.cdiv(x, m) * m


def cross_entropy(logits: torch.Tensor, target: torch.Tensor, *, _path: str | None = None,
                  _block_v: int | None = None, _chunk: int | None = None, _num_progs: int | None = None,
                  _spin: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row cross-entropy loss (fp32) and its gradient with respect to the logits (logits' dtype).

    The underscored arguments override the launcher's choices; tests use them to run every path on small
    inputs. ``_path`` is one of ``rows``, ``coop``, ``split``; ``_chunk`` is in elements (a multiple of the block);
    ``_num_progs`` is the persistent grid size (``coop``: a multiple of the chunk count); ``_spin`` the coop polls.
    """
    if logits.dim() != 2:
        raise ValueError(f"logits must be 2-D [M, V], got shape {tuple(logits.shape)}")
    if logits.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise TypeError(f"logits must be bf16, fp16 or fp32, got {logits.dtype}")
    M, V = logits.shape
    if target.shape != (M,) or target.dtype != torch.int64:
        raise ValueError(f"target must be int64 [{M}], got {target.dtype} {tuple(target.shape)}")
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    target = target.contiguous()
    loss = torch.empty(M, dtype=torch.float32, device=logits.device)
    dlogits = torch.empty((M, V), dtype=logits.dtype, device=logits.device)
    if M == 0 or V == 0:
        return loss, dlogits
    num_sms = _sm_count(logits)
    elt = logits.element_size()
    interp = _interpreting()
    path = _path or _pick_path(M, V, elt, num_sms)

    if path == "rows":
        # 16 warps x 32 values per thread: a 32 KB bf16 tile per load, two in flight (double buffering); one
        # program per SM keeps the bytes awaiting their L2 re-read at num_sms x row bytes.
        block_v = _block_v or min(1024 if interp else 16384, triton.next_power_of_2(V))
        progs = _num_progs or min(M, num_sms)
        _ce_rows_kernel[(progs,)](logits, target, loss, dlogits, M, V, logits.stride(0), dlogits.stride(0),
                                  IGNORE=IGNORE_INDEX, BLOCK_V=block_v, num_warps=16 if block_v >= 8192 else 8)
    elif path == "coop":
        block_v = _block_v or min(1024 if interp else 16384, triton.next_power_of_2(V))
        chunk = _chunk or _round_up(_COOP_CHUNK_BYTES // elt, block_v)
        if chunk % block_v:
            raise ValueError(f"chunk ({chunk}) must be a multiple of BLOCK_V ({block_v})")
        chunks = triton.cdiv(V, chunk)
        # One program per SM: a grid that fits in one wave, so every group's C peers are resident together.
        groups = max(1, min(M, num_sms // chunks))
        progs = _num_progs or groups * chunks
        if progs % chunks:
            raise ValueError(f"the coop grid ({progs}) must be a multiple of the chunk count ({chunks})")
        part_m = torch.empty((M, chunks), dtype=torch.float32, device=logits.device)
        part_s = torch.empty((M, chunks), dtype=torch.float32, device=logits.device)
        count = torch.zeros(M, dtype=torch.int32, device=logits.device)
        spin = _spin if _spin is not None else (2 if interp else _SPIN_GPU)
        _ce_coop_kernel[(progs,)](logits, target, loss, dlogits, part_m, part_s, count, M, V, chunk,
                                  logits.stride(0), dlogits.stride(0), IGNORE=IGNORE_INDEX, CHUNKS=chunks,
                                  CHUNKS_P2=triton.next_power_of_2(chunks), BLOCK_V=block_v, SPIN=spin,
                                  num_warps=16 if block_v >= 8192 else 8)
    elif path == "split":
        block_v = _block_v or min(1024 if interp else 8192, triton.next_power_of_2(V))
        chunk = _chunk or _round_up(_SPLIT_CHUNK_BYTES // elt, block_v)
        if chunk % block_v:
            raise ValueError(f"chunk ({chunk}) must be a multiple of BLOCK_V ({block_v})")
        chunks = triton.cdiv(V, chunk)
        part_m = torch.empty((M, chunks), dtype=torch.float32, device=logits.device)
        part_s = torch.empty((M, chunks), dtype=torch.float32, device=logits.device)
        _ce_split_stats_kernel[(M, chunks)](logits, target, part_m, part_s, V, chunk, logits.stride(0),
                                            IGNORE=IGNORE_INDEX, BLOCK_V=block_v, num_warps=8)
        _ce_split_grad_kernel[(M, chunks)](logits, target, loss, dlogits, part_m, part_s, V, chunk,
                                           logits.stride(0), dlogits.stride(0), IGNORE=IGNORE_INDEX,
                                           CHUNKS_P2=triton.next_power_of_2(chunks), BLOCK_V=block_v,
                                           num_warps=8)
    else:
        raise ValueError(f"unknown path {path!r}")
    return loss, dlogits


def kernel(logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Submission entry point: ``(loss, dlogits)``."""
    return cross_entropy(logits, target)
