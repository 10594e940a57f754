"""A fake evaluator that plays a GPU, for the driver and benchmark-script tests."""

from __future__ import annotations

import random
from pathlib import Path

from d2kgrade.records import Environment, EvalResult, Timing, WorkloadResult

COST = {"softmax_L3_exp2_fold": 1.2, "softmax_L2_tiled_two_sweep": 1.0}
BROKEN = {"softmax_L2_split_row_combine"}


class FakeGPU:
    """An evaluator: 1 ms per workload times COST of the file, 0.3% noise; BROKEN files fail correctness."""

    def __init__(self, device: str = "cuda") -> None:
        self.calls: list[tuple[str, bool, bool]] = []
        self.rng = random.Random(0)
        self.device = device

    def __call__(self, task_id: str, path: Path, *, device, workloads, seed, timeout_s, hidden, timing) -> EvalResult:
        name = Path(path).stem
        self.calls.append((name, hidden, timing))
        ok = name not in BROKEN
        wls = []
        for w in ("rows_4k", "vocab_rows"):
            t = Timing(median_ms=COST.get(name, 1.0) * (1 + self.rng.gauss(0, 0.003))) if timing and ok else None
            wls.append(WorkloadResult(name=w, status="passed" if ok else "incorrect", time=t,
                                      message="" if ok else "y[3, 7] out of tolerance"))
        return EvalResult(task=task_id, submission=str(path), status="passed" if ok else "incorrect", correct=ok,
                          environment=Environment(device=self.device, gpu="FakeGPU" if self.device == "cuda" else None),
                          workloads=wls)
