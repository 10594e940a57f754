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
device (no host sync) until compared (:func:`changed`). Cost: ~9 bytes of memory traffic per input byte (the int64
temporaries of one chunk), so ~35 ms for 17 GB at the H200's 4.3 TB/s (an estimate: not yet measured), all
outside timed regions.
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
    acc = torch.zeros((), dtype=torch.int64, device=dev)
    nbytes = storage.nbytes()
    if nbytes == 0:
        return acc
    raw = torch.empty(0, dtype=torch.uint8, device=dev).set_(storage)
    col_w, row_w = _weights(key, dev, ROWS)
    nwords = nbytes // 4
    words = raw[:nwords * 4].view(torch.int32)
    chunk = ROWS * COLS
    for j, start in enumerate(range(0, nwords, chunk)):
        w = words[start:start + chunk]
        full = w.numel() // COLS * COLS
        k = _chunk_key(key, j)
        if full:
            m = w[:full].view(-1, COLS).to(torch.int64)
            acc += ((m * col_w).sum(dim=1) * row_w[:m.shape[0]]).sum() * k
            del m
        if full < w.numel():
            rest = w[full:].to(torch.int64)
            acc += (rest * col_w[:rest.numel()]).sum() * _chunk_key(k, -1)
    if nwords * 4 < nbytes:  # storages whose size is not a multiple of 4 bytes (odd-length uint8, fp8, bool)
        tail = raw[nwords * 4:].to(torch.int64)
        acc += (tail * col_w[:tail.numel()]).sum() * _chunk_key(key, -2)
    return acc


ROW_GROUP_WORDS = 1 << 25
"""Words of a group of rows :func:`fingerprint_rows` checksums at once (its int64 temporaries: 256 MB each)."""


def fingerprint_rows(t: torch.Tensor, key: int) -> list[int]:
    """``[int(fingerprint(t[r].clone(), key)) for r in range(len(t))]`` for a contiguous ``t`` of reps (a timed
    batch's staged outputs), computed a group of rows at a time with one device-to-host copy at the end instead of
    one synchronize per row. The same integers: every step is int64 arithmetic modulo 2**64, in which the order of
    a sum does not matter."""
    reps = int(t.shape[0]) if t.dim() else 0
    if reps == 0:
        return []
    row_bytes = t[0].numel() * t.element_size()
    if row_bytes == 0:
        return [0] * reps
    if not t.is_contiguous() or row_bytes % 4:  # odd-sized rows (uint8, fp8, bool outputs): one row at a time
        return [int(fingerprint(t[r].clone(), key)) for r in range(reps)]
    words = t.reshape(reps, -1).view(torch.uint8).view(torch.int32)
    nwords = words.shape[1]
    col_w, row_w = _weights(key, t.device, ROWS)
    chunk = ROWS * COLS
    group = max(1, ROW_GROUP_WORDS // min(nwords, chunk))
    acc = torch.zeros(reps, dtype=torch.int64, device=t.device)
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
    return [int(v) for v in acc.tolist()]


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
