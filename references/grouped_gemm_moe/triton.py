"""Expert Triton reference for ``grouped_gemm_moe``: Y[o_e:o_{e+1}] = X[o_e:o_{e+1}] @ W[e]^T for every expert e,
X [T, K] sorted by expert, W [E, N, K], expert_offsets o [E+1] int32, fp32 accumulation.

Guidance implemented (tasks/grouped_gemm_moe/task.yaml): L1.flattened-tile-schedule, L1.rows-by-offsets,
L2.persistent-expert-major, L2.decode-weight-stream, L2.device-side-metadata, L3.int64-expert-base,
L3.tma-per-expert, L3.config-by-rows.

One launch, no host synchronization, no padding:

- Flattened tile schedule built on the device: every program loads expert_offsets once (E+1 int32, before its
  loop), computes per-expert M-tile counts cdiv(rows_e, BM) and their inclusive prefix sum (``tl.cumsum``) in
  registers, and maps each tile index t to its expert by counting the prefix entries <= t (a vector compare over
  E_PAD lanes). Empty experts own no tiles; a hot expert simply owns more.
- Persistent, expert-major: programs stride over the flattened list ``for t in tl.range(pid, total, NUM_PROGS)``;
  the tiles of one expert are consecutive and grouped (GROUP_M m-tiles down each N band), so programs running at
  the same time share that expert's X rows and W[e] panels in L2 and W[e] streams from HBM about once.
- Rows addressed through the offsets: an M tile covers rows o_e + m*BM ... ; rows past o_{e+1} belong to the next
  expert and only feed outputs the row-masked store drops (a full-tile TMA store would overwrite the neighbour,
  so Y is stored through pointers with the expert's row mask).
- Weights through a tensor descriptor over the flattened [E*N, K] weights, loaded at row e*N + n0 (TMA zero-fills
  past E*N; W tile rows past N feed masked-off columns); X through a descriptor over [T, K]. The pointer path
  (interpreter, GPUs without TMA) clamps rows to the expert and wraps columns, with an EVEN_K specialization.
- 64-bit expert base: ``w_ptr + e.to(tl.int64) * stride_we``, hoisted out of the K loop (E*N*K reaches 7.5e9 in
  DeepSeek-V3, 4.7e8 here).
- Config by tokens per expert (T // E, known on the host): < 32 rows (decode) BM = 16, BN = 64, BK = 128, 4-5
  stages and 2 programs per SM, so each touched expert is one M tile whose weights stream once at HBM speed and
  padded MMA rows stay at 16; < 512 rows BM = 64; otherwise BM = 128, BN = 128-256, BK = 64, 8 warps, 3-4 stages.
  Autotuned per bucket, keyed on (ROWS_BUCKET, N, K).

``_config`` / ``_use_tma`` / ``_num_progs`` override the launcher's choices (tests run both load styles and
several tile sizes under the interpreter).

Roofline floors on H200 (flops = 2*T*N*K at the measured dense bf16 rate; bytes from the cost model, which counts
W[e] once per touched expert, at the measured copy bandwidth; the floor is the larger):

====================  ======================  =================  ==================================================
workload              E, T, K, N              floor (bound)      H200: time, fraction of floor, x best peer
====================  ======================  =================  ==================================================
mixtral_prefill       8, 16384, 4096, 14336   2.55 ms (compute)  2.55 ms, 0.96, 1.01x compile_max_autotune
fine_grained_prefill  128, 32768, 2048, 1536  273 us (compute)   406 us, 0.65, 1.08x compile_max_autotune
skewed_routing        64, 16384, 2048, 2816   251 us (compute)   421 us, 0.57, 1.03x grouped_mm
decode_fine_grained   128, 256, 2048, 1536    168 us (HBM)       176 us, 0.95, 1.03x compile_max_autotune
====================  ======================  =================  ==================================================

Floors use the rates measured on the H200 (copy 4.17 TB/s, bf16 754 TFLOP/s, fp8 1284 TFLOP/s;
benchmarks/data/references_h200.json, 2026-11-30).
decode_fine_grained beats its floor (fraction 1.02): the copy rate is the best of 1 GiB copies, not the peak.

mixtral_prefill is bound by the tensor cores; decode_fine_grained by streaming the touched experts' weights; the
two middle workloads sit near the ridge (their HBM floors are not far below the compute floors).
fine_grained_prefill and skewed_routing trail through padded row tiles, a cold-expert tail and per-tile fixed
costs (NOTES.md).
Investigation notes: references/grouped_gemm_moe/NOTES.md.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.lru_cache(maxsize=None)
def _device_props(device_index: int) -> tuple[int, int]:
    props = torch.cuda.get_device_properties(device_index)
    return props.multi_processor_count, props.major


def _sm_count(t: torch.Tensor) -> int:
    if t.is_cuda and not _interpreting():
        return _device_props(t.device.index if t.device.index is not None else torch.cuda.current_device())[0]
    return 4  # the interpreter runs programs one after another; a small grid still exercises persistence


# ------------------------------------------------------------------------------------------------ kernels


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped order inside one expert: GROUP_M m-tiles walk down each N band, then the next band."""
    tiles_per_group = GROUP_M * num_pid_n
    group = tile_id // tiles_per_group
    first_m = group * GROUP_M
    rows_in_group = tl.minimum(num_pid_m - first_m, GROUP_M)
    local = tile_id % tiles_per_group
    return first_m + local % rows_in_group, local // rows_in_group


@triton.jit
def _grouped_gemm_kernel(
    x_ptr, w_ptr, y_ptr, eo_ptr,
    T, N, K, E, ROWS_BUCKET,
    stride_xt, stride_we, stride_wn, stride_yt,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, E_PAD: tl.constexpr,
    NUM_PROGS: tl.constexpr, USE_TMA: tl.constexpr, EVEN_K: tl.constexpr,
):
    """Persistent grouped GEMM: a program computes flattened tiles pid, pid + NUM_PROGS, ... of all experts.

    Per tile (expert e, m-tile, n-tile) it reads BM * K * elt bytes of X rows and BN * K * elt bytes of W[e]
    (mostly L2 hits thanks to the expert-major, grouped order) and writes at most BM * BN * elt bytes of Y.
    """
    # Tile metadata, once per program: rows and m-tiles per expert, inclusive prefix sum of tiles.
    offs_e = tl.arange(0, E_PAD)
    e_ok = offs_e < E
    o_lo = tl.load(eo_ptr + offs_e, mask=e_ok, other=0)
    o_hi = tl.load(eo_ptr + offs_e + 1, mask=e_ok, other=0)
    num_pid_n = tl.cdiv(N, BN)
    m_tiles = tl.cdiv(o_hi - o_lo, BM)          # 0 for empty experts and padding lanes
    tile_end = tl.cumsum(m_tiles * num_pid_n, axis=0)
    total = tl.sum(m_tiles * num_pid_n, axis=0)
    if USE_TMA:
        x_desc = tl.make_tensor_descriptor(x_ptr, shape=[T, K], strides=[stride_xt, 1], block_shape=[BM, BK])
        w_desc = tl.make_tensor_descriptor(w_ptr, shape=[E * N, K], strides=[stride_wn, 1], block_shape=[BN, BK])
    else:
        x_desc = None
        w_desc = None
    for t in tl.range(tl.program_id(0), total, NUM_PROGS, flatten=True):
        # Expert of tile t: the number of experts whose tiles all come before it.
        e = tl.sum((tile_end <= t).to(tl.int32), axis=0)
        sel = offs_e == e
        first_tile = tl.sum(tl.where(sel, tile_end - m_tiles * num_pid_n, 0), axis=0)
        row_lo = tl.sum(tl.where(sel, o_lo, 0), axis=0)
        row_hi = tl.sum(tl.where(sel, o_hi, 0), axis=0)
        pid_m, pid_n = _tile_coords(t - first_tile, tl.sum(tl.where(sel, m_tiles, 0), axis=0), num_pid_n, GROUP_M)
        r0 = row_lo + pid_m * BM
        n0 = pid_n * BN
        rows = r0 + tl.arange(0, BM)
        cols = n0 + tl.arange(0, BN)
        row_ok = rows < row_hi
        # Pointer path: rows clamped into the expert, columns wrapped; both only feed masked-off outputs.
        offs_k = tl.arange(0, BK)
        x_rows = x_ptr + tl.minimum(rows, row_hi - 1).to(tl.int64) * stride_xt
        w_rows = w_ptr + e.to(tl.int64) * stride_we + (cols % N).to(tl.int64) * stride_wn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            if USE_TMA:
                x = x_desc.load([r0, k0])
                w = w_desc.load([e * N + n0, k0])
            elif EVEN_K:
                x = tl.load(x_rows[:, None] + (k0 + offs_k)[None, :])
                w = tl.load(w_rows[:, None] + (k0 + offs_k)[None, :])
            else:
                k_ok = (k0 + offs_k) < K
                x = tl.load(x_rows[:, None] + (k0 + offs_k)[None, :], mask=k_ok[None, :], other=0.0)
                w = tl.load(w_rows[:, None] + (k0 + offs_k)[None, :], mask=k_ok[None, :], other=0.0)
            acc = tl.dot(x, tl.trans(w), acc)
        # Epilogue: only this expert's rows (the next expert's rows share the tile) and the valid columns.
        y_ptrs = y_ptr + rows.to(tl.int64)[:, None] * stride_yt + cols[None, :]
        tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=row_ok[:, None] & (cols[None, :] < N))


# ------------------------------------------------------------------------------------------------ configs

# Buckets of tokens per expert (T // E): config lists per bucket, each autotuned on (ROWS_BUCKET, N, K).
# decode: one 16-row M tile per touched expert; BK = 128 and 4-5 stages keep 60-80 KB of weight loads in
#   flight per program (20 KB per stage), 2 programs per SM (63-113 KB of shared memory each, sm_90a ptxas).
# small prefill (~256 rows per expert, fine_grained_prefill): BM = 64 wastes at most 63 rows per expert.
# large prefill (>= 512 rows, mixtral; skewed_routing's T // E = 256 is small prefill): the dense GEMM's
#   128x128 / 128x256 tiles with 8 warps.
_BUCKETS = (32, 512)
_CONFIGS = {
    0: [triton.Config({"BM": 16, "BN": 64, "BK": 128, "GROUP_M": 1}, num_warps=4, num_stages=4),
        triton.Config({"BM": 16, "BN": 64, "BK": 128, "GROUP_M": 1}, num_warps=4, num_stages=5),
        triton.Config({"BM": 16, "BN": 128, "BK": 128, "GROUP_M": 1}, num_warps=4, num_stages=4)],
    1: [triton.Config({"BM": 64, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=4, num_stages=4),
        triton.Config({"BM": 64, "BN": 256, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=4)],
    2: [triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=4),
        triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=3)],
}
_PROGS_PER_SM = {0: 2, 1: 2, 2: 1}
_grouped_gemm_decode = triton.autotune(configs=_CONFIGS[0], key=["ROWS_BUCKET", "N", "K"])(
    triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BK"] == 0})(_grouped_gemm_kernel))
_grouped_gemm_small = triton.autotune(configs=_CONFIGS[1], key=["ROWS_BUCKET", "N", "K"])(
    triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BK"] == 0})(_grouped_gemm_kernel))
_grouped_gemm_large = triton.autotune(configs=_CONFIGS[2], key=["ROWS_BUCKET", "N", "K"])(
    triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BK"] == 0})(_grouped_gemm_kernel))
# Under the interpreter: small tiles so experts span several m-tiles and programs several experts.
_INTERP_CONFIG = {"BM": 16, "BN": 32, "BK": 32, "GROUP_M": 2}


def rows_bucket(T: int, E: int) -> int:
    """0: decode (< 32 tokens per expert), 1: small prefill (< 512), 2: large prefill."""
    per_expert = T // max(E, 1)
    return sum(per_expert >= b for b in _BUCKETS)


# ------------------------------------------------------------------------------------------------ launcher


def _tma_ok(X: torch.Tensor, W: torch.Tensor) -> bool:
    elt = X.element_size()
    return (X.stride(1) == 1 and W.stride(2) == 1 and W.stride(0) == W.shape[1] * W.stride(1)
            and all(t.data_ptr() % 16 == 0 for t in (X, W))
            and (X.stride(0) * elt) % 16 == 0 and (W.stride(1) * elt) % 16 == 0)


def _scratch(size: int, alignment: int, stream: int | None, *, device: torch.device) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device=device)


def grouped_gemm(X: torch.Tensor, W: torch.Tensor, expert_offsets: torch.Tensor, *, _config: dict | None = None,
                 _use_tma: bool | None = None, _num_progs: int | None = None) -> torch.Tensor:
    """Y [T, N] with Y[o_e:o_{e+1}] = X[o_e:o_{e+1}] @ W[e]^T; X [T, K], W [E, N, K] bf16/fp16, offsets [E+1]."""
    if X.dim() != 2 or W.dim() != 3 or X.shape[1] != W.shape[2]:
        raise ValueError(f"expected X [T, K] and W [E, N, K], got {tuple(X.shape)} and {tuple(W.shape)}")
    T, K = X.shape
    E, N, _ = W.shape
    if expert_offsets.shape != (E + 1,) or expert_offsets.dtype != torch.int32:
        raise ValueError(f"expert_offsets must be int32 [E+1] = [{E + 1}], got {expert_offsets.dtype} "
                         f"{tuple(expert_offsets.shape)}")
    if X.dtype not in (torch.bfloat16, torch.float16) or W.dtype != X.dtype:
        raise TypeError(f"X and W must both be bf16 or fp16, got {X.dtype} and {W.dtype}")
    X = X if X.stride(1) == 1 else X.contiguous()
    W = W if W.stride(2) == 1 and W.stride(0) == N * W.stride(1) else W.contiguous()
    Y = torch.empty((T, N), dtype=X.dtype, device=X.device)
    if T == 0 or N == 0:
        return Y
    if K == 0:
        return Y.zero_()
    interp = _interpreting()
    use_tma = _use_tma if _use_tma is not None else (
        X.is_cuda and not interp and _device_props(X.device.index or 0)[1] >= 9 and _tma_ok(X, W))
    if use_tma:
        if not _tma_ok(X, W):
            raise ValueError("TMA loads need K-contiguous X and W with 16-byte-aligned rows")
        triton.set_allocator(functools.partial(_scratch, device=X.device))
    bucket = rows_bucket(T, E)
    num_sms = _sm_count(X)
    E_PAD = triton.next_power_of_2(E)
    config = _config if _config is not None else (_INTERP_CONFIG if interp else None)

    def grid(meta):
        # Upper bound on the real tile count (sum_e cdiv(rows_e, BM) <= cdiv(T, BM) + E): no .item() needed.
        bound = (triton.cdiv(T, meta["BM"]) + E) * triton.cdiv(N, meta["BN"])
        return (min(meta["NUM_PROGS"], bound),)

    num_progs = _num_progs or (4 if interp else _PROGS_PER_SM[bucket] * num_sms)
    args = (X, W, Y, expert_offsets, T, N, K, E, bucket, X.stride(0), W.stride(0), W.stride(1), Y.stride(0))
    if config is None:
        if bucket == 0:
            tuned = _grouped_gemm_decode
        elif bucket == 1:
            tuned = _grouped_gemm_small
        else:
            tuned = _grouped_gemm_large
        tuned[grid](*args, E_PAD=E_PAD, NUM_PROGS=num_progs, USE_TMA=use_tma)
    else:
        meta = {**config, "NUM_PROGS": num_progs}
        _grouped_gemm_kernel[grid(meta)](*args, **config, E_PAD=E_PAD, NUM_PROGS=num_progs, USE_TMA=use_tma,
                                         EVEN_K=K % config["BK"] == 0)
    return Y


def kernel(X: torch.Tensor, W: torch.Tensor, expert_offsets: torch.Tensor) -> torch.Tensor:
    """Submission entry point: the grouped expert GEMM."""
    return grouped_gemm(X, W, expert_offsets)
