"""Expert Triton reference for ``gemm_bf16``: C = A @ B^T, A [M, K] and B [N, K] K-contiguous, fp32 accumulation.

Guidance implemented (tasks/gemm_bf16/task.yaml): L1.tiled-tensor-core, L1.grouped-tile-order, L2.smem-pipeline,
L2.persistent-tiles, L2.epilogue-store, L3.tma-descriptors, L3.tile-config-autotune, L3.k-loop-no-masks.

Both paths share the design and the index math:

- Output tiles of 128x128 to 128x256 (BK = 64) computed on tensor cores with ``tl.dot`` into an fp32 accumulator
  held in registers; a BM x BN tile does BM*BN/(BM+BN) FLOPs per byte it loads (64 for 128x128, 85 for 128x256).
- A persistent grid of NUM_SMS programs; program p takes tiles p, p + NUM_SMS, ... in grouped order
  (``_tile_coords``: GROUP_M tile-rows walk down a column band before moving right), so the programs running at
  one time share A and B panels in L2. ``flatten=True`` lets the software pipeline run across tile boundaries,
  overlapping one tile's epilogue with the next tile's first loads.
- ``num_stages`` 3-4 shared-memory stages filled asynchronously by the pipeliner.
- Configs autotuned on (M, N, K): 128x256x64 / 256x128x64 with 8 warps (two consumer warpgroups), 128x128x64.

``tma`` path (Hopper and later, 16-byte-aligned rows): A and B tiles are loaded through device-side tensor
descriptors (``tl.make_tensor_descriptor``, which needs ``triton.set_allocator``): TMA copies into 128 B-swizzled
shared memory, no address arithmetic in registers, out-of-bounds rows and K tails zero-filled, so the K loop has
no masks. The epilogue converts to the output dtype and stores through a descriptor (a TMA store), in two
BM x BN/2 halves for the 128x256 configs, to leave shared memory for pipeline stages.

``ptr`` path (the Triton interpreter, pre-Hopper GPUs, unaligned shapes): the same persistent grouped loop with
pointer loads; edge tiles re-read valid rows (indices modulo M and N) and drop them at the masked store, and an
``EVEN_K`` specialization removes the K masks when K % BK == 0.

Roofline floors on H200 (flops = 2*M*N*K at the dense bf16 rate torch.mm reaches on the H200; the byte floors,
(M*K + N*K + M*N)*2 at the measured copy bandwidth, are far lower): every workload is compute-bound:

================  ====================  =============  ==================================================
workload          M x N x K             compute floor  H200: time, fraction of floor, x best peer
================  ====================  =============  ==================================================
square_8k         8192 x 8192 x 8192    1.46 ms        1.37 ms, 1.06, 1.02x compile
lm_head_vocab     4096 x 128256 x 4096  5.71 ms        5.31 ms, 1.07, 1.07x cublaslt
down_proj_long_k  4096 x 8192 x 28672   2.55 ms        2.40 ms, incorrect at [1e-2, 1e-2] (see below)
================  ====================  =============  ==================================================

Floors use the rates measured on the H200 (copy 4.17 TB/s, bf16 754 TFLOP/s, fp8 1284 TFLOP/s;
benchmarks/data/references_h200.json, 2026-11-30).
lm_head_vocab beats its floor (fraction 1.05): the bf16 rate is torch.mm's best at 8192^3, not the hardware peak.
Below the best baseline: square_8k (0.98x of eager F.linear's 1.43 ms).
down_proj_long_k: the committed run predates the task's current bf16 tolerance. Under the tolerance of that run,
[1e-2, 1e-2], it was marked incorrect: in the timed rechecks 27 of 111 calls returned one element (of 33.5M) out of
tolerance, while every correctness trial passed. That was settled as a tolerance, not a kernel bug
(benchmarks/data/tolerance_down_proj_h200.md): on 512 H200 draws of this workload cuBLAS and this kernel fail the
same "row_col_scaled" draws (14 of 128) with the same worst element, 1-2 elements each, atol-bound and within 0.08
of the fp32 summation bound. The task's bf16 tolerance is now [2e-2, 1e-2] (tasks/gemm_bf16/task.yaml); the atol
those draws need is at most 0.0150, 0.75 of the new atol. The references benchmark has not been re-run under it,
so the JSON's 'incorrect' on this workload is under the old tolerance. Its time, 2.40 ms, is as measured (eager
2.51 ms, torch.compile 2.53 ms); the benchmark reports no fraction or speedup for it.
Investigation notes: references/gemm_bf16/NOTES.md.
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
def _sms_of_device(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _sm_count(t: torch.Tensor) -> int:
    if t.is_cuda and not _interpreting():
        return _sms_of_device(t.device.index if t.device.index is not None else torch.cuda.current_device())
    return 4  # the interpreter runs programs one after another; a small grid still exercises persistence


# ------------------------------------------------------------------------------------------------ kernels


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped tile order: tiles GROUP_M tile-rows tall are numbered down each column band, then rightwards."""
    tiles_per_group = GROUP_M * num_pid_n
    group = tile_id // tiles_per_group
    first_m = group * GROUP_M
    rows_in_group = tl.minimum(num_pid_m - first_m, GROUP_M)  # the last group may be shorter
    local = tile_id % tiles_per_group
    pid_m = first_m + local % rows_in_group
    pid_n = local // rows_in_group
    return pid_m, pid_n


@triton.jit
def _gemm_tma_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_bn, stride_cm,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr, NUM_SMS: tl.constexpr,
):
    """Persistent TMA GEMM: a program computes C tiles pid, pid + NUM_SMS, ... (grouped order).

    Per tile it loads (BM + BN) * K * elt bytes through TMA (mostly L2 hits thanks to the order) and stores
    BM * BN * elt bytes with TMA.
    """
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                       block_shape=[BM, BN // 2 if EPILOGUE_SUBTILE else BN])
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        m0 = pid_m * BM
        n0 = pid_n * BN
        # Mainloop: TMA zero-fills the K tail and rows past M/N, so there are no masks.
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(k_tiles):
            a = a_desc.load([m0, kt * BK])
            b = b_desc.load([n0, kt * BK])
            acc = tl.dot(a, tl.trans(b), acc)
        # Epilogue: convert in registers, TMA store (clipped at the tensor's edge by the descriptor).
        if EPILOGUE_SUBTILE:
            halves = tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1))
            left, right = tl.split(halves)
            c_desc.store([m0, n0], left.to(c_ptr.dtype.element_ty))
            c_desc.store([m0, n0 + BN // 2], right.to(c_ptr.dtype.element_ty))
        else:
            c_desc.store([m0, n0], acc.to(c_ptr.dtype.element_ty))


@triton.jit
def _gemm_ptr_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr, NUM_SMS: tl.constexpr,
):
    """Persistent pointer GEMM: the same tiles and order as ``_gemm_tma_kernel``, loads through pointers.

    Per tile it loads (BM + BN) * K * elt bytes and stores BM * BN * elt bytes.
    """
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    offs_k = tl.arange(0, BK)
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        # Edge tiles re-read valid rows (indices wrap modulo M and N); the masked store drops them.
        rm = ((pid_m * BM + tl.arange(0, BM)) % M).to(tl.int64)
        rn = ((pid_n * BN + tl.arange(0, BN)) % N).to(tl.int64)
        a_ptrs = a_ptr + rm[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + rn[:, None] * stride_bn + offs_k[None, :] * stride_bk
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(k_tiles):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
            else:
                k_left = K - kt * BK
                a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
                b = tl.load(b_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            acc = tl.dot(a, tl.trans(b), acc)
            a_ptrs += BK * stride_ak
            b_ptrs += BK * stride_bk
        # Epilogue: convert once, one masked store of the tile.
        cm = tl.cast(pid_m * BM, tl.int64) + tl.arange(0, BM)
        cn = pid_n * BN + tl.arange(0, BN)
        c_ptrs = c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


# ------------------------------------------------------------------------------------------------ configs

# H200: 227 KB of shared memory per CTA. A 128x256x64 bf16 stage is 48 KB, so 3 stages + a 32 KB half-tile
# epilogue buffer fit, and 4 stages just fit; the autotuner drops configs that run out of resources.
_TMA_CONFIGS = [
    triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8, "EPILOGUE_SUBTILE": True}, num_warps=8, num_stages=3),
    triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8, "EPILOGUE_SUBTILE": True}, num_warps=8, num_stages=4),
    triton.Config({"BM": 256, "BN": 128, "BK": 64, "GROUP_M": 8, "EPILOGUE_SUBTILE": True}, num_warps=8, num_stages=3),
    triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8, "EPILOGUE_SUBTILE": False}, num_warps=8, num_stages=4),
    triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8, "EPILOGUE_SUBTILE": False}, num_warps=4, num_stages=4),
]
_PTR_CONFIGS = [
    triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
    triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=4),
    triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=4, num_stages=4),
    triton.Config({"BM": 64, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=4, num_stages=4),
]
# Under the interpreter: one fixed config, small enough that the smoke shape spans several tiles per program
# and a partial group, so the persistent loop and the grouped order run for real.
_INTERP_CONFIG = {"BM": 32, "BN": 32, "BK": 32, "GROUP_M": 2}

_gemm_tma_tuned = triton.autotune(configs=_TMA_CONFIGS, key=["M", "N", "K"])(_gemm_tma_kernel)
_gemm_ptr_tuned = triton.autotune(configs=_PTR_CONFIGS, key=["M", "N", "K"])(
    triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BK"] == 0})(_gemm_ptr_kernel))


# ------------------------------------------------------------------------------------------------ launcher


def _tma_compatible(A: torch.Tensor, B: torch.Tensor, N: int) -> bool:
    """TMA needs unit inner strides and 16-byte-aligned base addresses and row pitches (C is [M, N] contiguous)."""
    elt = A.element_size()
    return (A.stride(1) == 1 and B.stride(1) == 1
            and all(t.data_ptr() % 16 == 0 and (t.stride(0) * elt) % 16 == 0 for t in (A, B))
            and (N * elt) % 16 == 0)


def _pick_path(A: torch.Tensor, B: torch.Tensor, N: int) -> str:
    if A.is_cuda and not _interpreting() and torch.cuda.get_device_capability(A.device)[0] >= 9 \
            and _tma_compatible(A, B, N):
        return "tma"
    return "ptr"


def gemm(A: torch.Tensor, B: torch.Tensor, *, _path: str | None = None, _config: dict | None = None,
         _num_sms: int | None = None) -> torch.Tensor:
    """``A @ B.T`` for A [M, K] and B [N, K] in bf16 or fp16, accumulated in fp32, returned in A's dtype.

    The underscored arguments override the launcher's choices; tests use them to run both paths and several
    tile configurations under the interpreter. ``_path`` is ``tma`` or ``ptr``; ``_config`` holds
    BM, BN, BK, GROUP_M (and EPILOGUE_SUBTILE for ``tma``) and bypasses the autotuner.
    """
    if A.dim() != 2 or B.dim() != 2 or A.shape[1] != B.shape[1]:
        raise ValueError(f"expected A [M, K] and B [N, K], got {tuple(A.shape)} and {tuple(B.shape)}")
    if A.dtype not in (torch.bfloat16, torch.float16) or B.dtype != A.dtype:
        raise TypeError(f"A and B must both be bf16 or fp16, got {A.dtype} and {B.dtype}")
    M, K = A.shape
    N = B.shape[0]
    C = torch.empty((M, N), dtype=A.dtype, device=A.device)
    if M == 0 or N == 0:
        return C
    if K == 0:
        return C.zero_()
    path = _path or _pick_path(A, B, N)
    num_sms = _num_sms or _sm_count(A)
    config = _config if _config is not None else (_INTERP_CONFIG if _interpreting() else None)

    def grid(meta):
        return (min(num_sms, triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"])),)

    if path == "tma":
        if not _tma_compatible(A, B, N):
            raise ValueError("tma path needs K-contiguous A and B with 16-byte-aligned rows and N*elt % 16 == 0")
        # Device-side descriptors live in a small global scratch buffer that Triton asks for at launch.
        triton.set_allocator(functools.partial(_scratch, device=A.device))
        args = (A, B, C, M, N, K, A.stride(0), B.stride(0), C.stride(0))
        if config is None:
            _gemm_tma_tuned[grid](*args, NUM_SMS=num_sms)
        else:
            cfg = {"EPILOGUE_SUBTILE": True, **config}
            _gemm_tma_kernel[grid(cfg)](*args, **cfg, NUM_SMS=num_sms)
    elif path == "ptr":
        args = (A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1))
        if config is None:
            _gemm_ptr_tuned[grid](*args, NUM_SMS=num_sms)
        else:
            cfg = {k: v for k, v in config.items() if k != "EPILOGUE_SUBTILE"}
            _gemm_ptr_kernel[grid(cfg)](*args, **cfg, EVEN_K=K % cfg["BK"] == 0, NUM_SMS=num_sms)
    else:
        raise ValueError(f"unknown path {path!r}")
    return C


def _scratch(size: int, alignment: int, stream: int | None, *, device: torch.device) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device=device)


def kernel(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Submission entry point: ``C = A @ B.T``."""
    return gemm(A, B)
