"""GPU timing that a kernel cannot flatter, and that gives the same figure run after run.

The timed calls of one function run as one batch, queued back to back with a single synchronize at the end
(:func:`timed_reps`)::

    warm-up: ~25 ms of L2 flushes, so the GPU is busy before the first timed call
    per rep r, all queued without a host sync:
        prepare: copy a pre-generated input set into this rep's buffers     (outside the timed region)
        flush.zero_()                                                        (evict L2: a 256 MB+ write, >= 4x L2)
        spin for pad_ms                                                      (see below)
        start[r].record(); out = kernel(*buffers); end[r].record()
        check out on the GPU (:class:`Recheck`), then poison it             (outside the timed region)
    torch.cuda.synchronize()                                                 (device-wide: every stream drained)
    read the per-rep event times and the per-rep counts of bad elements

Why a batch (benchmarks/data/runs/timing_study_h200.json, H200, softmax reference, five fresh processes): the loop of
run 1 synchronized after every call and checked the output on the host, so the GPU idled between calls. The same
kernel then ran up to 70% slower, by a different amount in each process: the medians of 5 processes spread by
37-73% (20 or 100 reps), and by 3-62% with the host check removed but the per-call sync kept, while NVML read
the SM clock at 1980 MHz throughout (what slows it is not visible there). Queued back to back, the spread was
0.2-1.0% at 100 reps (0.5-2.2% at 20), with or without the warm-up, which the study could not tell apart (idle
gaps of 0.3 s); it is kept because the SM clock does idle at 345 MHz after longer pauses. Through the evaluator
(benchmarks/data/runs/references_h200_quick_run2.json, five evaluations, 150 reps): 0.24-0.64% on the three softmax
workloads whose host code is faster than their kernels.

The flush and the pad are queued before ``start``, so the host enqueues the call's launches while the GPU is
still busy and their latency is not timed (as in Triton's ``do_bench``): the figure is the device time of the
call's work; ``wall_batch`` reports the host-clock time of back-to-back calls beside it. The pad (:func:`pad_for`:
1.5x the host time of one rep, measured by the caller's probe) is what makes that hold for calls whose host code
is slower than their kernels: without it, the softmax reference on 16 rows of 2M (two launches, ~150 us of host
code, 60 us of GPU work) timed at 60 us in three evaluations and 136-150 us in two, as the GPU caught up with the
host between the two launches or not. With it the GPU stays busy between reps and the host stays ahead. A call
that synchronizes inside waits for ``start`` too, so the wait is timed.

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
WARMUP_MS = 25.0
"""GPU work queued before the timed calls (see :func:`warm_up`): insurance against a GPU that idled long enough to
drop its clock (345 MHz idle on the H200). 100 ms until round 13: that was about 12 batches a workload, 1.2 s, and
the timing study could not tell a warm-up from none at idle gaps of 0.3 s, longer than those between batches."""
PAD_FACTOR = 1.5
MAX_PAD_MS = 5.0
SPIN_HZ = 2.0e9
"""Clock assumed when a pad is turned into spin cycles: above the H200's 1980 MHz, so a pad never runs short."""
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
    """Checks every timed output without a host sync, then poisons it.

    ``check(content, out)`` screens the output objects on the host (plain tensor, count, dtype, shape: no sync)
    and queues the comparison on the current stream. The first output for each input content is compared with the
    reference in float64 (:func:`bad_count`, ~15x the cost of a memory-bound kernel) and a copy of it is kept; every
    later output for that content is compared with that copy bit for bit (:func:`bits_differ`, about one read of
    both), which is the same test when the copy passed. The counts stay on the GPU until :meth:`settle` reads them
    all at once, after the batch's synchronize. If any output differed from the first one for its content (a
    nondeterministic kernel, or one that changes its answers), ``redo`` is set and from then on every output is
    compared with the reference (``full``): the caller times that batch again, so no published sample comes from
    a call whose output was not compared with the reference, directly or through identical bits.
    """

    def __init__(self, refs: Sequence[tuple[torch.Tensor, ...]], tols: Sequence[tuple[float, float]],
                 device: torch.device, full: bool = False) -> None:
        self.refs = refs
        self.tols = list(tols)
        self.device = device
        self.full = full
        """Compare every output with the reference (no bitwise shortcut)."""
        self.redo = False
        """Set by :meth:`settle`: an output differed from the first output for its content; time the batch again."""
        self.problems: list[str] = []
        self.calls = 0
        self._first: dict[tuple[int, int], torch.Tensor] = {}
        self._bad_first: set[tuple[int, int]] = set()
        self._pending: list[tuple[str, tuple[int, int], int, torch.Tensor]] = []

    def __call__(self, content: int, out: Any) -> None:
        self.calls += 1
        outs = output_tuple(out)
        refs = self.refs[content]
        if len(outs) != len(refs):
            self.problems.append(f"returned {len(outs)} outputs, expected {len(refs)}")
        for i, (o, r, (atol, rtol)) in enumerate(zip(outs, refs, self.tols, strict=False)):
            why = bad_output(o, self.device)
            if why:
                self.problems.append(why)
                continue
            if o.dtype != r.dtype:
                self.problems.append(f"dtype {o.dtype}, expected {r.dtype}")
                continue
            if o.shape != r.shape:
                self.problems.append(f"shape {tuple(o.shape)}, expected {tuple(r.shape)}")
                continue
            key = (content, i)
            first = None if self.full else self._first.get(key)
            if first is None:
                self._pending.append(("ref", key, r.numel(), bad_count(o, r, atol, rtol)))
                if not self.full:
                    self._first[key] = o.detach().clone()
            else:
                self._pending.append(("bits", key, r.numel(), bits_differ(o, first)))
        for o in outs:
            poison(o)

    def settle(self) -> None:
        """Turn the queued counts into problems (one device-to-host copy; waits for the current stream)."""
        if not self._pending:
            return
        counts = torch.stack([c for *_, c in self._pending]).tolist()
        for (kind, key, n, _), k in zip(self._pending, counts, strict=True):
            if kind == "ref":
                if k:
                    self.problems.append(f"{k} of {n} elements out of tolerance")
                    self._bad_first.add(key)
            elif k:
                self.redo = True
            elif key in self._bad_first:
                self.problems.append(f"the same wrong output as the first call on this input ({n} elements)")
        self._pending.clear()
        if self.redo:
            self.full = True
            self._first.clear()


def bits_differ(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Words whose bits differ between two tensors of one dtype and shape (0-d int64 on the device; no sync).
    Compared as the widest integer words the size and alignment allow, so NaN payloads and -0.0 count."""
    av = a.detach().contiguous().view(-1).view(torch.uint8)
    bv = b.detach().contiguous().view(-1).view(torch.uint8)
    for wide in (torch.int64, torch.int32, torch.int16):
        size = torch.empty((), dtype=wide).element_size()
        if av.numel() % size == 0 and av.data_ptr() % size == 0 and bv.data_ptr() % size == 0:
            av, bv = av.view(wide), bv.view(wide)
            break
    return (av != bv).sum()


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


def pad_for(host_ms_per_rep: float) -> float:
    """GPU spin per rep that keeps the host ahead of the GPU: :data:`PAD_FACTOR` x the host time of one rep."""
    return min(MAX_PAD_MS, PAD_FACTOR * max(0.0, host_ms_per_rep))


def spin(device: torch.device, ms: float) -> None:
    """Queue a kernel that keeps the GPU busy for about ``ms`` (no memory traffic; a no-op off CUDA)."""
    if ms > 0 and device.type == "cuda":
        torch.cuda._sleep(int(ms * 1e-3 * SPIN_HZ))


def timed_reps(call: Callable[[tuple[torch.Tensor, ...]], Any], rotation: Rotation, reps: int,
               flush: torch.Tensor, check: Recheck | None = None, start_rep: int = 0,
               warmup_ms: float = WARMUP_MS, pad_ms: float = 0.0, stats: dict[str, float] | None = None
               ) -> list[float]:
    """Event-timed milliseconds of ``reps`` calls queued back to back, each on rotated inputs after an L2 flush and
    a ``pad_ms`` spin, each output checked by ``check`` on the GPU (see the module docstring). Uses rotation slots
    ``start_rep .. start_rep + 2*reps`` (the second half only when the batch is timed again, see :class:`Recheck`).
    ``stats`` receives ``host_ms_per_rep``: host time to queue one rep (what :func:`pad_for` needs)."""
    samples = _batch(call, rotation, reps, flush, check, start_rep, warmup_ms, pad_ms, stats)
    if check is not None and check.redo:
        check.redo = False
        samples = _batch(call, rotation, reps, flush, check, start_rep + reps, warmup_ms, pad_ms, stats)
    return samples


def _batch(call: Callable[[tuple[torch.Tensor, ...]], Any], rotation: Rotation, reps: int, flush: torch.Tensor,
           check: Recheck | None, start_rep: int, warmup_ms: float, pad_ms: float,
           stats: dict[str, float] | None) -> list[float]:
    dev = flush.device
    warm_up(flush, warmup_ms)
    events = []
    t0 = time.perf_counter()
    for r in range(start_rep, start_rep + reps):
        args, content = rotation.prepare(r)
        flush.zero_()
        spin(dev, pad_ms)
        start, end = _event(dev), _event(dev)
        start.record()
        out = call(args)
        end.record()
        events.append((start, end))
        if check is not None:
            check(content, out)
        del out
    if stats is not None:
        stats["host_ms_per_rep"] = 1e3 * (time.perf_counter() - t0) / max(reps, 1)
    _sync(dev)
    if check is not None:
        check.settle()
    return [s.elapsed_time(e) for s, e in events]


def wall_batch(call: Callable[[tuple[torch.Tensor, ...]], Any], rotation: Rotation, rounds: int,
               check: Recheck | None = None, start_rep: int = 0) -> dict[str, float]:
    """Host wall-clock and event time per call of back-to-back launches (one per buffer, ``rounds`` times).
    Measured again, with every output compared with the reference, if ``check`` asks for it."""
    out = _wall(call, rotation, rounds, check, start_rep)
    if check is not None and check.redo:
        check.redo = False
        out = _wall(call, rotation, rounds, check, start_rep + rounds * rotation.size)
    return out


def _wall(call: Callable[[tuple[torch.Tensor, ...]], Any], rotation: Rotation, rounds: int,
          check: Recheck | None, start_rep: int) -> dict[str, float]:
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
        del outs
    if check is not None:
        check.settle()
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
