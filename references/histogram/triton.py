"""Expert Triton reference for ``histogram``: counts[v] = #{i : x[i] == v}, x [N] int32 in [0, NB), counts int32.

Two paths, picked by the launcher from the number of bins:

- ``private`` (NB <= 1024): a persistent grid of 2 programs per SM grid-strides over the keys in 8192-key tiles
  (32 keys = eight 128-bit loads per thread, 8 warps). Each tile is counted with ``tl.histogram``, which lowers to
  one ballot-and-popcount histogram per warp (log2(NB) ballots per 32 keys, so equal keys in a warp become one
  count: a 90%-hot bin costs one shared-memory add per warp, not 32) and one shared-memory add per (warp, bin)
  to merge the warps: the per-warp sub-histograms of the CUDA design, built by the compiler. The program keeps its
  private histogram in registers across all its tiles and merges it into the global counts once, at the end, with
  one relaxed atomic per non-zero bin. Each program counts key v in slot (v - shift_p) mod NB_P2 with its own
  shift_p, so at the merge the programs' lanes hit different bins at the same moment (a staggered merge).
- ``global`` (NB > 1024): the ballot histogram's per-key cost grows with NB/32 (every lane owns NB/32 bins and
  popcounts each), and 128k int32 counters do not fit on chip, so each key is added straight into the global
  counts with a relaxed ``tl.atomic_add`` whose result is unused (REDG.E.ADD in SASS): near bandwidth when keys
  are spread over many bins. The input is read once on both paths; it is never looped over per bin range.

Roofline floors on H200 (bytes = 4*N + 4*NB at the measured copy bandwidth):

===========  =========================  =======  ==================================================
workload     N / NB                     floor    H200: time, fraction of floor, x eager / x compile
===========  =========================  =======  ==================================================
uniform_256  268435456 / 256            258 us   1.01 ms, 0.25, 2.09x / 2.13x
hot_bin_256  268435456 / 256 (90% hot)  258 us   1.01 ms, 0.25, 26.41x / 26.48x
vocab_bins   67108864 / 131072          64.5 us  739 us, 0.09, 1.45x / 1.45x
===========  =========================  =======  ==================================================

Floors use the rates measured on the H200 (copy 4.17 TB/s, bf16 754 TFLOP/s, fp8 1284 TFLOP/s;
benchmarks/references_h200.json, 2026-11-30).

Why the roofline fractions are low (from the SASS of both kernels, compiled for sm_90a by Triton 3.6 on a CPU with the
JIT's 16-byte divisibility of pointers and N; no profiler was run, so pipe-level claims are marked "likely"):

- uniform_256, hot_bin_256 (0.25): bound by instructions, not by HBM or atomics. The two take the same time (1.0140
  and 1.0139 ms) although 90% of one's keys hit bin 0: the ballot histogram does the same work for any keys, and the
  global merge is at most 256 atomics per program (67,584 per call). 1.01 ms is 265 G keys/s (1.06 TB/s of keys),
  1.01 keys per SM per clock at 1.98 GHz; reading at copy speed (the 0.258 ms floor) needs 4. The private loop is
  1,826 SASS instructions per warp per 8192-key tile (1,024 keys per warp; 8 LDG.128 per thread, 64 registers). Per
  32 keys: 8 VOTE (a ballot per bit of the slot), 8 POPC (the 8 bins a lane owns), ~26 LOP3, 7 SHF. That is 1.78
  warp instructions per key: at 4 issued per clock per SM the loop needs >= 0.46 ms, and its 37.6 integer-ALU lane
  operations per key (LOP3, SHF, IADD3, ISETP) need >= 0.60 ms on the 64 INT32 lanes of a Hopper SM. The 8 POPC per
  key likely run at 16 per clock per SM (CUDA guide table for sm_90; >= 0.51 ms alone), so ALU + POPC give 0.60-1.1 ms
  depending on overlap, bracketing the measured 1.01 ms; ncu's pipe utilization (sm__inst_executed_pipe_alu, issue
  active) would confirm. The ballot lowering costs about (NB/32) * log2(NB) lane operations per key; reaching the
  floor needs <= 16 integer lane operations per key.
- vocab_bins (0.09): bound by global atomics in L2, not by reading keys. The global loop is 567 SASS instructions per
  warp per tile (0.55 per key: issue would allow ~7 keys per SM per clock; the run does 0.35) with 32 REDG.E.ADD per
  thread, each a warp-wide scatter of 32 adds that almost always hit 32 different 32-byte sectors of the 512 KB counter
  array (which stays in L2). 67.1 M adds in 0.739 ms are 90.9 G atomic updates/s (46 per clock GPU-wide at 1.98 GHz)
  while the keys stream at only 0.36 TB/s; the cost model charges the 4-byte key read and none of the 67 M L2
  read-modify-writes. That this is the L2 atomic units' rate is likely, not measured (ncu lts__t_requests_op_red and
  L2 throughput would show it); torch.bincount's global atomics reach 62.9 G/s (1.07 ms). Measurement caveat: x (268
  MB) is under the 1 GiB huge-input size, so the timing rotation alternates catalog keys with the hot_tail_runs draw
  (a quarter of the keys sent to bin NB-1, sorted in runs of 1024, so whole warps add to one counter); the 12.2 ms
  iqr means about a quarter of the 29 calls took >= 12 ms, likely those. 14 or 15 of the 29 calls were catalog (2 or
  4 sets), so the 0.739 ms median sits at the edge of the catalog group: likely a uniform-key time, to be re-timed on
  catalog keys alone. uniform_256 and hot_bin_256 are exactly 1 GiB and not rotated: all their calls see catalog keys.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

_PRIVATE_MAX_BINS = 1024  # above this, global red.add per key (see the module docstring)
_BLOCK = 8192             # keys per tile: 32 per thread at 8 warps, eight 16-byte loads each
_PROGS_PER_SM = 2         # 2 x 8 warps per SM, 64 KB of keys in flight per SM
_STAGGER = 37             # bin offset between consecutive programs at the merge (odd: all slots visited)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.lru_cache(maxsize=None)
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _sm_count(x: torch.Tensor) -> int:
    if x.is_cuda and not _interpreting():
        return _num_sms(x.device.index if x.device.index is not None else torch.cuda.current_device())
    return 3  # the interpreter runs programs one after another; a small grid still exercises persistence


# ------------------------------------------------------------------------------------------------ kernels


@triton.jit
def _histogram_private_kernel(
    x_ptr, counts_ptr,
    N, NB,
    num_progs,
    BLOCK: tl.constexpr, NB_P2: tl.constexpr, STAGGER: tl.constexpr,
):
    """Private histogram of tiles pid, pid + num_progs, ... of x, merged once into counts.

    Reads 4 * BLOCK bytes of keys per tile (each key once) and issues at most NB atomics per program.
    """
    pid = tl.program_id(0)
    # Slot of key v is (v - shift) mod NB_P2: the merge below then starts this program at bin shift.
    shift = (pid * STAGGER) & (NB_P2 - 1)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([NB_P2], dtype=tl.int32)
    for tile in tl.range(pid, tl.cdiv(N, BLOCK), num_progs):
        idx = tl.cast(tile, tl.int64) * BLOCK + offs
        mask = idx < N
        # Keys are read once: evict_first keeps them from displacing anything in L2.
        x = tl.load(x_ptr + idx, mask=mask, other=0, eviction_policy="evict_first")
        slot = (x + (NB_P2 - shift)) & (NB_P2 - 1)
        # Per-warp ballot histograms merged across warps in shared memory; accumulated in registers.
        acc += tl.histogram(slot, NB_P2, mask=mask)
    # Sparse, staggered merge: one relaxed atomic per non-zero bin, result unused (RED).
    slots = tl.arange(0, NB_P2)
    bins = (slots + shift) & (NB_P2 - 1)
    tl.atomic_add(counts_ptr + bins, acc, mask=(acc > 0) & (bins < NB), sem="relaxed")


@triton.jit
def _histogram_global_kernel(
    x_ptr, counts_ptr,
    N,
    num_progs,
    BLOCK: tl.constexpr,
):
    """Many bins: tiles pid, pid + num_progs, ... add each key straight into the global counts.

    Reads 4 * BLOCK bytes of keys per tile and issues one relaxed red.add per key (spread over NB counters).
    """
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    ones = tl.full([BLOCK], 1, dtype=tl.int32)
    for tile in tl.range(pid, tl.cdiv(N, BLOCK), num_progs):
        idx = tl.cast(tile, tl.int64) * BLOCK + offs
        mask = idx < N
        x = tl.load(x_ptr + idx, mask=mask, other=0, eviction_policy="evict_first")
        tl.atomic_add(counts_ptr + x, ones, mask=mask, sem="relaxed")


# ------------------------------------------------------------------------------------------------ launcher


def _pick_path(NB: int) -> str:
    return "private" if NB <= _PRIVATE_MAX_BINS else "global"


def histogram(x: torch.Tensor, NB: int, *, _path: str | None = None, _block: int | None = None,
              _num_progs: int | None = None) -> torch.Tensor:
    """Counts of each value in [0, NB) among the int32 keys ``x`` (values outside [0, NB) are not allowed).

    The underscored arguments override the launcher's choices; tests use them to run every path on small
    inputs. ``_path`` is ``private`` or ``global``.
    """
    if x.dim() != 1:
        raise ValueError(f"x must be 1-D [N], got shape {tuple(x.shape)}")
    if x.dtype != torch.int32:
        raise TypeError(f"x must be int32, got {x.dtype}")
    NB = int(NB)
    if NB < 1:
        raise ValueError(f"NB must be >= 1, got {NB}")
    x = x.contiguous()
    (N,) = x.shape
    counts = torch.zeros(NB, dtype=torch.int32, device=x.device)  # both paths add into it
    if N == 0:
        return counts
    path = _path or _pick_path(NB)
    block = _block or _BLOCK
    tiles = triton.cdiv(N, block)
    progs = _num_progs or min(tiles, _PROGS_PER_SM * _sm_count(x))
    if path == "private":
        nb_p2 = max(32, triton.next_power_of_2(NB))  # the ballot histogram needs >= 32 bins (one per lane)
        _histogram_private_kernel[(progs,)](x, counts, N, NB, progs, BLOCK=block, NB_P2=nb_p2, STAGGER=_STAGGER,
                                            num_warps=8)
    elif path == "global":
        _histogram_global_kernel[(progs,)](x, counts, N, progs, BLOCK=block, num_warps=8)
    else:
        raise ValueError(f"unknown path {path!r}")
    return counts


def kernel(x: torch.Tensor, *, NB: int) -> torch.Tensor:
    """Submission entry point: ``torch.bincount(x, minlength=NB)`` as int32."""
    return histogram(x, NB)
