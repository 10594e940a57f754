"""GPU timing that a kernel cannot flatter.

One timed call (:func:`timed_reps`)::

    prepare: copy a pre-generated input set into this rep's buffers     (outside the timed region)
    torch.cuda.synchronize()                                             (device-wide: every stream drained)
    flush.zero_()                                                        (evict L2: a 256 MB+ write, >= 4x L2)
    start.record(); out = kernel(*buffers); end.record()
    torch.cuda.synchronize()
    check out against this set's reference, then poison it              (outside the timed region)

The flush is queued before ``start`` without a sync in between, so the host enqueues the kernel while the GPU is
still busy flushing and the launch latency of an honest kernel is not timed (as in Triton's ``do_bench``); a
kernel whose host code is slower than the flush pays for it, which is fair.

Inputs rotate (:class:`Rotation`): S buffers and S contents, rep r runs on buffer ``r % S`` holding content
``(r + r // S) % S``, so the same buffer never holds the same content twice in a row. A cache keyed by the
pointer returns the last content's answer and fails the check; one that returns a tensor it kept fails because
every checked output is poisoned (filled with NaN) before it is released; one keyed by a full fingerprint of
the inputs pays for reading them (no gain on memory-bound tasks) and runs under the roofline floor on
compute-bound ones. Every timed output is checked, so a kernel right only on its first calls fails.

The cross-check (:func:`wall_batch`) launches S calls back to back and measures them with the host clock around
device-wide synchronizes: work hidden on a side stream or a thread is invisible to events on the current stream
but not to the host clock. Figures are medians over enough repetitions for about ``target_s`` of timed work.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

FLUSH_MIN_BYTES = 256 << 20


class HostEvent:
    """A stand-in for ``torch.cuda.Event`` on the host clock: lets the tests drive the timing path on a CPU.
    Never used for a published figure (CPU evaluations report timing as unavailable)."""

    def __init__(self, enable_timing: bool = True) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = time.perf_counter()

    def elapsed_time(self, end: HostEvent) -> float:
        return 1e3 * (end.t - self.t)


def _event(device: torch.device) -> Any:
    return torch.cuda.Event(enable_timing=True) if device.type == "cuda" else HostEvent()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


@dataclass
class Rotation:
    """Pre-generated input contents, the buffers the kernel sees, and each content's reference outputs."""

    contents: list[tuple[torch.Tensor, ...]]
    buffers: list[tuple[torch.Tensor, ...]]
    refs: list[tuple[torch.Tensor, ...]] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.buffers)

    def slot(self, r: int) -> tuple[int, int]:
        """(buffer, content) of rep r."""
        s = self.size
        return r % s, (r + r // s) % s

    def prepare(self, r: int) -> tuple[tuple[torch.Tensor, ...], int]:
        b, c = self.slot(r)
        for dst, src in zip(self.buffers[b], self.contents[c], strict=True):
            dst.copy_(src)
        return self.buffers[b], c

    @classmethod
    def make(cls, contents: list[tuple[torch.Tensor, ...]], refs: list[tuple[torch.Tensor, ...]] | None = None
             ) -> Rotation:
        return cls(contents, [tuple(t.clone() for t in c) for c in contents], list(refs or []))


def flush_buffer(device: torch.device) -> torch.Tensor:
    """A buffer whose zeroing evicts L2: at least 256 MB and four times the L2 size."""
    if device.type != "cuda":
        return torch.empty(1 << 20, dtype=torch.uint8, device=device)
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0
    return torch.empty(max(FLUSH_MIN_BYTES, 4 * int(l2)), dtype=torch.uint8, device=device)


def timed_reps(call: Callable[[tuple[torch.Tensor, ...]], Any], rotation: Rotation, reps: int,
               flush: torch.Tensor, after: Callable[[int, Any], None] | None = None, start_rep: int = 0
               ) -> list[float]:
    """Event-timed milliseconds of ``reps`` calls, each on rotated inputs after an L2 flush."""
    out_ms = []
    dev = flush.device
    start, end = _event(dev), _event(dev)
    for r in range(start_rep, start_rep + reps):
        args, content = rotation.prepare(r)
        _sync(dev)
        flush.zero_()
        start.record()
        out = call(args)
        end.record()
        _sync(dev)
        out_ms.append(start.elapsed_time(end))
        if after is not None:
            after(content, out)
        del out
    return out_ms


def wall_batch(call: Callable[[tuple[torch.Tensor, ...]], Any], rotation: Rotation, rounds: int,
               after: Callable[[int, Any], None] | None = None, start_rep: int = 0) -> dict[str, float]:
    """Host wall-clock and event time per call of back-to-back launches (one per buffer, ``rounds`` times)."""
    wall = 0.0
    event = 0.0
    calls = 0
    dev = rotation.buffers[0][0].device
    start, end = _event(dev), _event(dev)
    for rnd in range(rounds):
        slots = [start_rep + rnd * rotation.size + i for i in range(rotation.size)]
        staged = [rotation.prepare(r) for r in slots]
        _sync(dev)
        t0 = time.perf_counter()
        start.record()
        outs = [call(args) for args, _ in staged]
        end.record()
        _sync(dev)
        wall += time.perf_counter() - t0
        event += start.elapsed_time(end) / 1e3
        calls += len(outs)
        if after is not None:
            for (_, content), out in zip(staged, outs, strict=True):
                after(content, out)
        del outs
    return {"wall_ms": 1e3 * wall / max(calls, 1), "event_ms": 1e3 * event / max(calls, 1), "calls": calls}


def choose_reps(per_rep_s: float, target_s: float, lo: int, hi: int) -> int:
    """Repetitions that fill about ``target_s`` of wall time, clamped to [lo, hi]."""
    if per_rep_s <= 0:
        return hi
    return max(lo, min(hi, int(target_s / per_rep_s)))


def count_bad(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float, chunk: int = 1 << 26) -> int:
    """Elements of ``out`` outside ``atol + rtol*|ref|`` (non-finite where ``ref`` is finite counts as bad)."""
    if out.shape != ref.shape:
        return max(out.numel(), ref.numel(), 1)
    o = out.detach().reshape(-1)
    r = ref.detach().reshape(-1)
    bad = 0
    for i in range(0, o.numel(), chunk):
        oc = o[i:i + chunk].to(torch.float64)
        rc = r[i:i + chunk].to(torch.float64)
        fin = torch.isfinite(rc)
        good = torch.where(fin, torch.isfinite(oc) & ((oc - rc).abs() <= atol + rtol * rc.abs()),
                           (oc == rc) | (torch.isnan(oc) & torch.isnan(rc)))
        bad += int((~good).sum())
    return bad
