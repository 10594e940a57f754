"""Very large inputs (a 17 GB page pool, a 10 GB embedding table): passed as they are, never cloned or rotated,
and verified unchanged after every call by a keyed fingerprint.

The worker normally hands the kernel clones and keeps the originals (``input_mutated`` compares them bit for bit),
and the timing rotation keeps 2-4 input sets plus their buffers. At 17 GB an input that costs 2x per trial and
2x per rotated set does not fit beside its own task on a 141 GB H200, so an input whose size reaches
:data:`HUGE_INPUT_BYTES` (``EvalOptions.huge_input_bytes``) takes another path:

- Correctness trials give the kernel the harness's own tensor and fingerprint it before and after the call; a
  changed fingerprint is ``input_mutated`` (rejected), found before the reference reads the input.
- Rotation: only the small inputs rotate. Every set shares set 0's huge tensors (sets ``j >= 1`` are drawn in
  full and their huge inputs replaced by set 0's, so the reference of each set is computed on what the kernel
  gets), and the buffer of a huge input is the tensor itself (``copy_`` onto itself is a no-op in ATen). The
  fingerprint is queued after each timed call, outside the timed region, and compared when the batch settles.

The fingerprint (:func:`fingerprint`) reads the whole storage once as 32-bit words, in chunks viewed as
[rows, 4096]: ``sum_rc w[r, c] * a[c] * b[r] * k_j`` mod 2^64, with odd secret weights ``a``, ``b`` and an odd
key ``k_j`` per chunk. A change of one word by d != 0 moves it by d times an odd number, which is never 0 mod 2^64,
so a single changed element is always caught; a change that cancels needs the secret weights. It stays on the
device (no host sync) until compared (:func:`changed`). On CUDA one Triton kernel computes it reading every word
once (~4 ms for 17 GB at the H200's 4.3 TB/s, an estimate: not yet measured); elsewhere PyTorch, with ~9 bytes of
memory traffic per input byte (its int64 temporaries). Both give the same integers (int64 arithmetic modulo 2**64
does not depend on the order of a sum; tests/runner/test_big_inputs.py compares them under the interpreter). The
same checksum binds a timed batch's reps to their set's first output (:func:`fingerprint_rows`): in round 11 on
the H200 the PyTorch version took ~1 s of the verify step per batch of ~60 GB of staged outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import torch

HUGE_INPUT_BYTES = 1 << 30
"""Inputs of at least this many bytes are shared and fingerprinted instead of cloned and rotated."""
COLS = 4096
ROWS = 16384
"""A chunk is ROWS x COLS 32-bit words: 256 MB, so a 17 GB input takes ~70 chunks of ~6 launches each (~2 ms of
host time per fingerprint, queued behind the timed call); its two int64 temporaries are 512 MB each."""
_MASK62 = (1 << 62) - 1


def huge_mask(task: Any, spec: Any, threshold: int) -> tuple[bool, ...]:
    """Per input of ``task`` (in order): whether it reaches ``threshold`` bytes on ``spec``'s shapes."""
    out = []
    for t in task.inputs:
        n = 1
        for d in spec.shapes[t.name]:
            n *= int(d)
        elt = torch.empty((), dtype=spec.dtypes[t.name]).element_size()
        out.append(n * elt >= threshold)
    return tuple(out)


def rotation_contents(make: Callable[[int], tuple[torch.Tensor, ...]], sets: int, mask: Sequence[bool]
                      ) -> list[tuple[torch.Tensor, ...]]:
    """``sets`` input sets from ``make(j)``; sets after the first reuse the first set's huge inputs (each set's
    own huge draw is dropped as soon as it is made, so at most two copies of a huge input ever exist)."""
    contents: list[tuple[torch.Tensor, ...]] = []
    for j in range(sets):
        c = make(j)
        if contents:
            c = tuple(c0 if h else t for t, c0, h in zip(c, contents[0], mask, strict=True))
        contents.append(c)
    return contents


@lru_cache(maxsize=16)
def _weights(key: int, device: torch.device, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Column and row weights, made once per key and device: a host-to-device copy from pageable memory waits
    for the stream, which would stall a timed batch."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(key & _MASK62)
    w = torch.randint(0, 1 << 62, (rows + COLS,), generator=gen, dtype=torch.int64) | 1
    return w[:COLS].to(device), w[COLS:].to(device)


def _chunk_key(key: int, j: int) -> int:
    return ((key * 0x9E3779B97F4A7C15 + j * 0xBF58476D1CE4E5B9) & _MASK62) | 1


def fingerprint(t: torch.Tensor, key: int) -> torch.Tensor:
    """A keyed checksum of every byte of ``t``'s storage, as a 0-d int64 tensor on its device (nothing is
    synchronized; compare two of them with :func:`differs`)."""
    storage = t.untyped_storage()
    dev = t.device
    nbytes = storage.nbytes()
    if nbytes == 0:
        return torch.zeros((), dtype=torch.int64, device=dev)
    raw = torch.empty(0, dtype=torch.uint8, device=dev).set_(storage)
    nwords = nbytes // 4
    acc = _digest(raw[:nwords * 4].view(torch.int32).view(1, nwords), key)[0] if nwords else \
        torch.zeros((), dtype=torch.int64, device=dev)
    if nwords * 4 < nbytes:  # storages whose size is not a multiple of 4 bytes (odd-length uint8, fp8, bool)
        col_w, _ = _weights(key, dev, ROWS)
        tail = raw[nwords * 4:].to(torch.int64)
        acc = acc + (tail * col_w[:tail.numel()]).sum() * _chunk_key(key, -2)
    return acc


ROW_GROUP_WORDS = 1 << 25
"""Words of a group of rows the PyTorch checksum takes at once (its int64 temporaries: 256 MB each)."""
DIGEST_BLOCK = 8192
"""Words per program of the Triton checksum."""


def fingerprint_rows(t: torch.Tensor, key: int) -> list[int]:
    """``[int(fingerprint(t[r].clone(), key)) for r in range(len(t))]`` for a contiguous ``t`` of reps (a timed
    batch's staged outputs), all rows at once with one device-to-host copy at the end instead of one synchronize
    per row."""
    reps = int(t.shape[0]) if t.dim() else 0
    if reps == 0:
        return []
    row_bytes = t[0].numel() * t.element_size()
    if row_bytes == 0:
        return [0] * reps
    if not t.is_contiguous() or row_bytes % 4:  # odd-sized rows (uint8, fp8, bool outputs): one row at a time
        return [int(fingerprint(t[r].clone(), key)) for r in range(reps)]
    return [int(v) for v in _digest(t.reshape(reps, -1).view(torch.uint8).view(torch.int32), key).tolist()]


def _digest(words: torch.Tensor, key: int) -> torch.Tensor:
    """Per row of ``words`` ([rows, n] int32, rows contiguous): ``sum_j k_j sum_{i,c} w[j, i, c] * a[c] * b[i]``
    over its chunks of ROWS x COLS words viewed as [i, c], plus the last chunk's words past its whole [*, COLS]
    rows, ``sum_c w[c] * a[c] * k'``; int64 modulo 2**64, in which the order of a sum does not matter, so the
    Triton kernel (CUDA: one read of the words) and the PyTorch version (elsewhere, or without Triton: ~9 bytes of
    traffic per byte) give the same integers. Returns an int64 tensor [rows] on the words' device."""
    if words.is_cuda and words.shape[1] and _triton_digest() is not None:
        return _digest_triton(words, key)
    return _digest_torch(words, key)


def _digest_torch(words: torch.Tensor, key: int) -> torch.Tensor:
    reps, nwords = words.shape
    col_w, row_w = _weights(key, words.device, ROWS)
    chunk = ROWS * COLS
    group = max(1, ROW_GROUP_WORDS // max(1, min(nwords, chunk)))
    acc = torch.zeros(reps, dtype=torch.int64, device=words.device)
    for g0 in range(0, reps, group):
        rows = slice(g0, min(reps, g0 + group))
        for j, start in enumerate(range(0, nwords, chunk)):
            w = words[rows, start:start + chunk]
            full = w.shape[1] // COLS * COLS
            k = _chunk_key(key, j)
            if full:
                m = w[:, :full].reshape(w.shape[0], -1, COLS).to(torch.int64)
                acc[rows] += ((m * col_w).sum(dim=2) * row_w[:m.shape[1]]).sum(dim=1) * k
                del m
            if full < w.shape[1]:
                rest = w[:, full:].to(torch.int64)
                acc[rows] += (rest * col_w[:rest.shape[1]]).sum(dim=1) * _chunk_key(k, -1)
    return acc


def _digest_triton(words: torch.Tensor, key: int) -> torch.Tensor:
    kernel = _triton_digest()
    reps, nwords = words.shape
    chunk = ROWS * COLS
    nchunks = -(-nwords // chunk)
    last = (nchunks - 1) * chunk
    full_last = (nwords - last) // COLS * COLS
    col_w, row_w = _weights(key, words.device, ROWS)
    keys = _chunk_keys(key, nchunks, words.device)
    nblocks = -(-nwords // DIGEST_BLOCK)
    parts = torch.empty(reps * nblocks, dtype=torch.int64, device=words.device)
    kernel[(reps * nblocks,)](words, words.stride(0), nwords, nblocks, last + full_last,
                              _chunk_key(_chunk_key(key, nchunks - 1), -1), keys, col_w, row_w, parts,
                              CHUNK=chunk, COLS=COLS, BLOCK=DIGEST_BLOCK)
    return parts.view(reps, nblocks).sum(dim=1)


@lru_cache(maxsize=64)
def _chunk_keys(key: int, n: int, device: torch.device) -> torch.Tensor:
    return torch.tensor([_chunk_key(key, j) for j in range(n)], dtype=torch.int64).to(device)


@lru_cache(maxsize=1)
def _triton_digest() -> Any:
    """The Triton checksum kernel, or None where Triton is missing."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def digest_kernel(words_ptr, row_stride, nwords, nblocks, tail_start, tail_key, keys_ptr, col_ptr, row_ptr,
                      out_ptr, CHUNK: tl.constexpr, COLS: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        r = pid // nblocks
        b = pid - r * nblocks
        t = b * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
        live = t < nwords
        w = tl.load(words_ptr + r * row_stride + t, mask=live, other=0).to(tl.int64)
        j = t // CHUNK
        p = t - j * CHUNK
        i = p // COLS
        c = p - i * COLS
        tail = t >= tail_start  # the last chunk's words past its whole [*, COLS] rows
        head = live & (t < tail_start)
        kj = tl.load(keys_ptr + j, mask=head, other=0)
        rw = tl.load(row_ptr + i, mask=head, other=0)
        cw = tl.load(col_ptr + tl.where(tail, t - tail_start, c), mask=live, other=0)
        coef = tl.where(tail, cw * tail_key, cw * rw * kj)
        tl.store(out_ptr + pid, tl.sum(w * coef, axis=0))

    return digest_kernel


def fingerprints(tensors: Sequence[torch.Tensor], key: int) -> torch.Tensor:
    """:func:`fingerprint` of each tensor, stacked (an empty int64 tensor for none)."""
    if not tensors:
        return torch.zeros(0, dtype=torch.int64)
    return torch.stack([fingerprint(t, _chunk_key(key, i)) for i, t in enumerate(tensors)])


def changed(before: torch.Tensor, after: torch.Tensor) -> list[int]:
    """Positions whose fingerprints differ (one device-to-host copy)."""
    if before.numel() == 0:
        return []
    return [i for i, (a, b) in enumerate(zip(before.tolist(), after.tolist(), strict=True)) if a != b]


__all__ = ["HUGE_INPUT_BYTES", "huge_mask", "rotation_contents",
           "fingerprint", "fingerprint_rows", "fingerprints", "changed"]
