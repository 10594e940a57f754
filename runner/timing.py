"""GPU timing that a kernel cannot flatter, and that gives the same figure run after run.

The timed calls of one function run as one batch, queued back to back with a single synchronize at the end
(:func:`timed_reps`)::

    warm-up: ~100 ms of L2 flushes, so the SM clock has left idle before the first timed call
    per rep r, all queued without a host sync:
        prepare: copy a pre-generated input set into this rep's buffers     (outside the timed region)
        flush.zero_()                                                        (evict L2: a 256 MB+ write, >= 4x L2)
        start[r].record(); out = kernel(*buffers); end[r].record()
        check out against this set's reference on the GPU, then poison it  (outside the timed region)
    torch.cuda.synchronize()                                                 (device-wide: every stream drained)
    read the per-rep event times and the per-rep counts of bad elements

Why a batch: the H200's SM clock idles at 345 MHz and ramps to 1980 MHz under load. Timing one call at a time,
with a host sync and a host-side check between calls, left the GPU idle most of the time, so calls ran at
whatever clock the driver had settled on: medians of one honest softmax moved by 17-109% between evaluations
(benchmarks/runs/references_h200_quick_run1.json). Queued back to back the GPU stays busy, and the warm-up takes
the clock out of idle before the first timed call (benchmarks/runs/timing_study_h200.json has the numbers).

The flush is queued before ``start``, so the host enqueues the kernel while the GPU is still flushing and the
launch latency of an honest kernel is not timed (as in Triton's ``do_bench``); a kernel whose host code is slower
than the GPU work queued ahead of it pays for it, which is fair. A kernel that synchronizes inside its call waits
for ``start`` too, so the wait is timed.

Inputs rotate (:class:`Rotation`): S buffers and S contents, rep r runs on buffer ``r % S`` holding content
``(r + r // S) % S``, so the same buffer never holds the same content twice in a row. A cache keyed by the
pointer returns the last content's answer and fails the check; one that returns a tensor it kept fails because
every checked output is poisoned (filled with NaN) before it is released; one keyed by a full fingerprint of
the inputs pays for reading them (no gain on memory-bound tasks) and runs under the roofline floor on
compute-bound ones. Every timed output is checked (:class:`Recheck`), on the GPU, in the order of the current
stream, right after ``end``: an output must be complete when the call's own stream reaches that point, so work
left running on a side stream is caught there too. A kernel right only on its first calls fails.

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

from runner.trials import bad_output, output_tuple, poison

FLUSH_MIN_BYTES = 256 << 20
WARMUP_MS = 100.0
"""GPU work queued before the timed calls. From idle the H200 needs tens of ms to reach its full SM clock; see
:func:`warm_up` and the study in benchmarks/runs/timing_study_h200.json."""
CHECK_CHUNK = 1 << 26
"""Elements compared per chunk (float64 temporaries of 512 MB each)."""


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
        """Queue the copy of rep r's content into its buffers; returns the buffers and the content index."""
        b, c = self.slot(r)
        for dst, src in zip(self.buffers[b], self.contents[c], strict=True):
            dst.copy_(src)
        return self.buffers[b], c

    @classmethod
    def make(cls, contents: list[tuple[torch.Tensor, ...]], refs: list[tuple[torch.Tensor, ...]] | None = None
             ) -> Rotation:
        return cls(contents, [tuple(t.clone() for t in c) for c in contents], list(refs or []))


class Recheck:
    """Checks each timed output against its content's reference without a host sync, then poisons it.

    ``check(content, out)`` screens the output objects on the host (plain tensor, count, dtype, shape: no sync
    needed) and queues the element comparison (:func:`bad_count`) and the poisoning on the current stream; the
    per-call counts stay on the GPU until :meth:`settle` reads them all at once, after the batch's synchronize.
    """

    def __init__(self, refs: Sequence[tuple[torch.Tensor, ...]], tols: Sequence[tuple[float, float]],
                 device: torch.device) -> None:
        self.refs = refs
        self.tols = list(tols)
        self.device = device
        self.problems: list[str] = []
        self.calls = 0
        self._pending: list[tuple[int, torch.Tensor]] = []

    def __call__(self, content: int, out: Any) -> None:
        self.calls += 1
        outs = output_tuple(out)
        refs = self.refs[content]
        if len(outs) != len(refs):
            self.problems.append(f"returned {len(outs)} outputs, expected {len(refs)}")
        for o, r, (atol, rtol) in zip(outs, refs, self.tols, strict=False):
            why = bad_output(o, self.device)
            if why:
                self.problems.append(why)
                continue
            if o.dtype != r.dtype:
                self.problems.append(f"dtype {o.dtype}, expected {r.dtype}")
            elif o.shape != r.shape:
                self.problems.append(f"shape {tuple(o.shape)}, expected {tuple(r.shape)}")
            else:
                self._pending.append((r.numel(), bad_count(o, r, atol, rtol)))
        for o in outs:
            poison(o)

    def settle(self) -> None:
        """Turn the queued counts into problems (one device-to-host copy; waits for the current stream)."""
        if not self._pending:
            return
        counts = torch.stack([c for _, c in self._pending]).tolist()
        for (n, _), k in zip(self._pending, counts, strict=True):
            if k:
                self.problems.append(f"{k} of {n} elements out of tolerance")
        self._pending.clear()


def flush_buffer(device: torch.device) -> torch.Tensor:
    """A buffer whose zeroing evicts L2: at least 256 MB and four times the L2 size."""
    if device.type != "cuda":
        return torch.empty(1 << 20, dtype=torch.uint8, device=device)
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0
    return torch.empty(max(FLUSH_MIN_BYTES, 4 * int(l2)), dtype=torch.uint8, device=device)


def warm_up(flush: torch.Tensor, ms: float) -> None:
    """Keep the GPU busy with L2 flushes for ``ms`` of host time, so the timed calls start at full clock.

    Paced by the host clock with a sync every few flushes (the first flushes run at whatever clock the GPU idled
    at, so their cost is unknown in advance); the last group is left queued, so the GPU is still busy when the
    first timed rep is enqueued behind it."""
    if ms <= 0 or flush.device.type != "cuda":
        return
    stop = time.perf_counter() + ms / 1e3
    while True:
        for _ in range(8):
            flush.zero_()
        if time.perf_counter() >= stop:
            return
        torch.cuda.synchronize()


def timed_reps(call: Callable[[tuple[torch.Tensor, ...]], Any], rotation: Rotation, reps: int,
               flush: torch.Tensor, check: Recheck | None = None, start_rep: int = 0,
               warmup_ms: float = WARMUP_MS) -> list[float]:
    """Event-timed milliseconds of ``reps`` calls queued back to back, each on rotated inputs after an L2 flush,
    each output checked by ``check`` on the GPU (see the module docstring)."""
    dev = flush.device
    warm_up(flush, warmup_ms)
    events = []
    for r in range(start_rep, start_rep + reps):
        args, content = rotation.prepare(r)
        flush.zero_()
        start, end = _event(dev), _event(dev)
        start.record()
        out = call(args)
        end.record()
        events.append((start, end))
        if check is not None:
            check(content, out)
        del out
    _sync(dev)
    if check is not None:
        check.settle()
    return [s.elapsed_time(e) for s, e in events]


def wall_batch(call: Callable[[tuple[torch.Tensor, ...]], Any], rotation: Rotation, rounds: int,
               check: Recheck | None = None, start_rep: int = 0) -> dict[str, float]:
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
        if check is not None:
            for (_, content), out in zip(staged, outs, strict=True):
                check(content, out)
            check.settle()
        del outs
    return {"wall_ms": 1e3 * wall / max(calls, 1), "event_ms": 1e3 * event / max(calls, 1), "calls": calls}


def choose_reps(per_rep_s: float, target_s: float, lo: int, hi: int) -> int:
    """Repetitions that fill about ``target_s`` of wall time, clamped to [lo, hi]."""
    if per_rep_s <= 0:
        return hi
    return max(lo, min(hi, int(target_s / per_rep_s)))


def bad_count(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float, chunk: int = CHECK_CHUNK
              ) -> torch.Tensor:
    """Elements of ``out`` outside ``atol + rtol*|ref|``, as a 0-d int64 tensor on their device (no sync).

    Compared in float64 with ``torch.isclose(equal_nan=True)``: where ``ref`` is finite the output must be finite
    and within tolerance, where it is Inf or NaN the output must be the same. Shapes must match."""
    o = out.detach().reshape(-1)
    r = ref.detach().reshape(-1)
    bad = torch.zeros((), dtype=torch.int64, device=o.device)
    for i in range(0, o.numel(), chunk):
        oc = o[i:i + chunk].to(torch.float64)
        rc = r[i:i + chunk].to(torch.float64)
        bad += (~torch.isclose(oc, rc, rtol=rtol, atol=atol, equal_nan=True)).sum()
    return bad


def count_bad(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float, chunk: int = CHECK_CHUNK) -> int:
    """:func:`bad_count` as an int (a shape mismatch counts every element as bad)."""
    if out.shape != ref.shape:
        return max(out.numel(), ref.numel(), 1)
    return int(bad_count(out, ref, atol, rtol, chunk))
