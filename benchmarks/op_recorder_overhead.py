"""Host overhead of the always-on op recorder (runner.profile_proof.OpRecorder) per kernel call.

The recorder is a TorchDispatchMode, so its cost is host-side Python per ATen op plus one enter/exit per call; it
is the same on a GPU host (the ops it sees are the wrapper's allocations and views, dispatched on the CPU side).
Measured here on wrappers without a launch, so the figure is the recorder's alone:

- ``empty``: a call that does nothing but enter and leave the recorder;
- ``wrapper_3_ops``: reshape + empty_like + view, the glue of a typical launcher;
- ``wrapper_10_ops``: a heavier launcher (contiguous copies, casts, slices, a small index_select);
- ``per_op``: the marginal cost of one more op (slope over 1 to 200 views);
- ``forwarding_mode``: the same with a dispatch mode that only forwards, the floor of this approach.

Each figure is the median over rounds of the mean over a batch of calls, in CPU time of the calling thread
(``time.thread_time``), so that other processes on a shared machine do not inflate it. Usage::

    .venv/bin/python benchmarks/op_recorder_overhead.py [--out benchmarks/data/op_recorder_overhead.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from runner.profile_proof import OpRecorder

ROUNDS = 15
BATCH = 400


class _Forward(TorchDispatchMode):
    """A dispatch mode that only forwards: the floor of any recorder built on TorchDispatchMode."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        return func(*args, **(kwargs or {}))


def _per_call_us(fn: Callable[[], object], mode: type | None) -> float:
    def once() -> None:
        if mode is not None:
            with mode():
                fn()
        else:
            fn()

    for _ in range(50):
        once()
    rounds = []
    for _ in range(ROUNDS):
        t0 = time.thread_time()
        for _ in range(BATCH):
            once()
        rounds.append((time.thread_time() - t0) / BATCH * 1e6)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "data" / "op_recorder_overhead.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    x = torch.randn(64, 1024)
    w = torch.randn(1024, dtype=torch.float16)
    cache = torch.randn(4096, 16)
    pos = torch.randint(0, 4096, (13,))

    def wrapper_3() -> object:
        x2 = x.reshape(-1, x.shape[-1])
        y = torch.empty_like(x2)
        return y.view(x.shape)

    def wrapper_10() -> object:
        x2 = x.reshape(-1, x.shape[-1]).t().contiguous()
        w32 = w.to(torch.float32)
        cos = cache.index_select(0, pos)
        y = torch.empty((x2.shape[1], x2.shape[0]), dtype=torch.float32)
        return y[:512].view(-1), w32[:10], cos.T, torch.zeros(3)

    cases = {"empty": lambda: None, "wrapper_3_ops": wrapper_3, "wrapper_10_ops": wrapper_10}
    result: dict[str, object] = {"torch": torch.__version__, "python": platform.python_version(),
                                 "machine": platform.processor() or platform.machine(), "rounds": ROUNDS,
                                 "batch": BATCH, "load_average_before": os.getloadavg()[0], "per_call_us": {}}
    for name, fn in cases.items():
        plain, forward, recorded = (_per_call_us(fn, m) for m in (None, _Forward, OpRecorder))
        result["per_call_us"][name] = {  # type: ignore[index]
            "plain": round(plain, 2), "forwarding_mode": round(forward, 2), "recorded": round(recorded, 2),
            "overhead": round(recorded - plain, 2)}
    for key, mode in (("per_op_us", OpRecorder), ("per_op_us_forwarding_mode", _Forward)):
        views = {n: _per_call_us(lambda n=n: [x.view(-1) for _ in range(n)], mode)
                 - _per_call_us(lambda n=n: [x.view(-1) for _ in range(n)], None) for n in (1, 200)}
        result[key] = round((views[200] - views[1]) / 199, 2)
    result["load_average_after"] = os.getloadavg()[0]
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
