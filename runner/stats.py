"""Statistics the parent computes from raw samples the worker ships (no torch here)."""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Sequence

HIDDEN_WORK_RATIO = 2.0
HIDDEN_WORK_SLACK_MS = 0.05
"""In one back-to-back batch, host wall time per call above ``2 x event time + 50 us`` means work the events on
the current stream did not see. Both clocks span the same calls, so a host-bound kernel (the GPU waits for the
host between launches, and the events see the same gaps) stays near a ratio of 1."""


def summarize(samples_ms: Sequence[float]) -> dict[str, float]:
    """Median, interquartile range (inclusive quartiles), min and count of timing samples in milliseconds."""
    xs = sorted(float(x) for x in samples_ms)
    if not xs:
        return {"median_ms": 0.0, "iqr_ms": 0.0, "min_ms": 0.0, "reps": 0}
    if len(xs) >= 4:
        q = statistics.quantiles(xs, n=4, method="inclusive")
        iqr = q[2] - q[0]
    else:
        iqr = xs[-1] - xs[0]
    return {"median_ms": statistics.median(xs), "iqr_ms": iqr, "min_ms": xs[0], "reps": len(xs)}


def hidden_work(event_per_call_ms: float, wall_per_call_ms: float) -> bool:
    """Whether the host clock saw much more time per call than the CUDA events did in the same batch."""
    return wall_per_call_ms > HIDDEN_WORK_RATIO * event_per_call_ms + HIDDEN_WORK_SLACK_MS


def derive_seed(seed: int, *parts: object) -> int:
    """A per-trial seed from the run's secret seed (63 bits, so every torch generator accepts it)."""
    digest = hashlib.sha256(":".join([str(seed), *map(str, parts)]).encode()).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


def seed_hash(seed: int) -> str:
    """What a result records instead of the seed."""
    return hashlib.sha256(f"d2kgrade-seed:{seed}".encode()).hexdigest()[:16]
