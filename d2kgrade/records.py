"""Machine-written records that cross the runner/grader boundary: evaluation results.

The runner writes them (``d2kgrade eval --json``, the run store); the grader reads them (score, report). Both
sides import only this module and :mod:`d2kgrade.schema`. Every record carries ``schema_version``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

EvalStatus = Literal["passed", "incorrect", "rejected", "compile_error", "runtime_error", "timeout", "crashed"]
"""Outcome of an evaluation. ``rejected``: the harness caught a rule break (mutated inputs, forbidden calls,
patched harness, an impossible time). The others are what they say."""

EVAL_STATUSES: tuple[str, ...] = ("passed", "incorrect", "rejected", "compile_error", "runtime_error", "timeout",
                                  "crashed")


class Record(BaseModel):
    """Base of persisted records: unknown keys are errors, attribute docstrings become descriptions."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Flag(Record):
    """Something the harness noticed: a tripwire, a suspicious timing, a patched function."""

    code: str
    """Stable machine code, e.g. ``static.stream_creation``, ``input_mutated``, ``below_roofline``."""
    message: str
    """What was seen, for people."""
    line: int | None = None
    """Line of the submission, for static tripwires."""
    severity: Literal["info", "warning", "reject"] = "reject"
    """``reject`` flags make the status ``rejected``."""


class OutputError(Record):
    """Error measures of one output tensor on one trial."""

    name: str
    """Output name."""
    ok: bool
    """Within tolerance everywhere."""
    reason: str = ""
    """Why not, for people (first mismatch, dtype or shape problem)."""
    max_abs_err: float = 0.0
    """Largest |out - ref| over finite elements."""
    max_rel_err: float = 0.0
    """Largest |out - ref| / |ref| over finite elements."""
    tol_ratio: float = 0.0
    """Largest |out - ref| / (atol + rtol*|ref|) over finite elements: the share of the tolerance the worst
    element uses (above 1 fails; ``inf`` for an exact-match output that differs)."""
    n_bad: int = 0
    """Elements out of tolerance."""
    n_total: int = 0
    """Elements compared."""
    first_bad_index: list[int] | None = None
    """Index of the first element out of tolerance."""


class Timing(Record):
    """A timed function: median and spread over repetitions, in milliseconds."""

    median_ms: float
    """Median time of one call."""
    iqr_ms: float = 0.0
    """Interquartile range of the repetitions."""
    min_ms: float = 0.0
    """Fastest repetition."""
    reps: int = 0
    """Repetitions timed."""


class WorkloadResult(Record):
    """Evaluation of one workload."""

    name: str
    """Workload name (``smoke``, a catalog name, or ``hidden`` for the per-run drawn shape)."""
    status: EvalStatus
    """Outcome on this workload."""
    params: dict[str, int | float | bool | str] = {}
    """The parameters used (for the hidden workload, the drawn ones)."""
    trials: int = 0
    """Input draws checked."""
    errors: list[OutputError] = []
    """Error measures of the worst trial, per output."""
    message: str = ""
    """Detail for people (first failure, trimmed log)."""
    time: Timing | None = None
    """The submission's timing; None where timing is unavailable (CPU, or failed)."""
    eager: Timing | None = None
    """The task's PyTorch baseline, eager, timed the same way in the same run."""
    compiled: Timing | None = None
    """The baseline under torch.compile."""
    speedup_eager: float | None = None
    """eager median / submission median."""
    speedup_compiled: float | None = None
    """compiled median / submission median."""
    roofline_floor_ms: float | None = None
    """Lowest possible time from the task's cost model and this GPU's measured ceilings."""
    roofline_fraction: float | None = None
    """floor / submission median (1.0 = at the roofline)."""
    hidden: bool = False
    """The per-run hidden workload (correctness only, never timed)."""
    host_ms: float | None = None
    """Host wall-clock time per call of back-to-back launches: the cross-check for work the CUDA events miss."""
    checked_calls: int = 0
    """Calls whose outputs were checked beyond the correctness trials (every timed call, or the CPU rotation)."""
    compile_warmup_s: float | None = None
    """Seconds the first torch.compile call of the baseline took (compilation), not part of ``compiled``."""
    wall_s: float = 0.0
    """Evaluator wall time spent on this workload with the submission loaded (trials, timing, checks)."""


class Environment(Record):
    """Where an evaluation ran."""

    device: str
    """``cuda`` or ``cpu``."""
    gpu: str | None = None
    """GPU name."""
    driver: str | None = None
    """Driver version."""
    cuda: str | None = None
    """CUDA runtime version torch was built with."""
    torch: str | None = None
    """torch version."""
    triton: str | None = None
    """triton version."""
    python: str | None = None
    """Python version."""
    interpreter: bool = False
    """Triton ran under TRITON_INTERPRET=1."""


class EvalResult(Record):
    """The result of ``d2kgrade eval``: one submission on one task."""

    schema_version: Literal[1] = 1
    """Version of this format."""
    task: str
    """Task id."""
    submission: str = ""
    """Path of the evaluated file, as given."""
    submission_sha256: str = ""
    """Hash of the evaluated source."""
    status: EvalStatus
    """Overall outcome: the first non-passing workload's status, or a harness-level one."""
    correct: bool
    """Passed on every evaluated workload (hidden one included)."""
    message: str = ""
    """Summary for people."""
    flags: list[Flag] = []
    """What the harness noticed."""
    workloads: list[WorkloadResult] = []
    """Per-workload results."""
    environment: Environment
    """Where it ran."""
    seed_hash: str = ""
    """Hash of the per-run secret seed (the seed itself is never written where a submission could read it)."""
    wall_s: float = 0.0
    """Wall time of the whole evaluation."""
    ceilings: dict[str, Any] | None = None
    """This GPU's measured ceilings the roofline floors used (copy bandwidth, matmul rates, MUFU rate)."""
    log: str = ""
    """What the submission printed (trimmed); never parsed."""
