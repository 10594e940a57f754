"""Machine-written records that cross the runner/grader boundary: evaluation results.

The runner writes them (``d2kgrade eval --json``, the run store); the grader reads them (score, report). What
the runner may import from ``d2kgrade`` is named in :mod:`d2kgrade.boundary`. Every record carries
``schema_version``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

EvalStatus = Literal["passed", "incorrect", "rejected", "compile_error", "runtime_error", "timeout", "crashed",
                     "unsupported_on_cpu"]
"""Outcome of an evaluation. ``rejected``: the harness caught a rule break (mutated inputs, forbidden calls,
patched harness, an impossible time). ``unsupported_on_cpu``: the submission uses something the Triton
interpreter cannot run (the message names the limitation); it says nothing about the kernel's correctness and
is never counted as a wrong kernel. The others are what they say."""

EVAL_STATUSES: tuple[str, ...] = ("passed", "incorrect", "rejected", "compile_error", "runtime_error", "timeout",
                                  "crashed", "unsupported_on_cpu")

BaselineStatus = Literal["ok", "incorrect", "unavailable", "failed", "not_timed"]
"""Outcome of one baseline candidate on one workload: ``ok`` (correct and timed), ``incorrect`` (out of the
task's tolerance there, so excluded from the best baseline), ``unavailable`` (its library is not installed, or
not on this device), ``failed`` (it raised), ``not_timed`` (no timing on this device, e.g. CPU)."""


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


class BaselineTiming(Record):
    """One baseline candidate (``Task.baselines``) on one workload, timed like the submission."""

    name: str
    """Candidate name (``eager``, ``compile``, ``compile_max_autotune``, ``sdpa_cudnn``, ...)."""
    kind: Literal["eager", "compile", "peer"]
    """How it runs (see ``d2kgrade.schema.BaselineCandidate``)."""
    status: BaselineStatus
    """Whether it counts: only ``ok`` candidates compete for the best baseline."""
    reason: str = ""
    """Why it does not count, for people (the missing module, the first mismatch, the exception)."""
    time: Timing | None = None
    """Its timing; None unless ``ok`` (an incorrect candidate's time is kept here too, for the record)."""
    vendor: bool = False
    """The task's vendor library (cuBLAS, cuDNN, SDPA backends)."""
    max_tol_ratio: float | None = None
    """Share of the task's tolerance its worst element used (above 1: incorrect)."""
    cached: bool = False
    """The figure came from the baseline cache rather than a measurement in this evaluation."""
    measured_at: str | None = None
    """When the figure was measured (ISO 8601, UTC)."""
    cache_key: str | None = None
    """Hash of what the figure depends on (GPU, driver, versions, workload, candidate, timing method)."""
    compile_warmup_s: float | None = None
    """Seconds its first torch.compile call took (compile candidates)."""


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
    time_by_dist: dict[str, Timing] = {}
    """The same samples by the input distribution of their set (the task's ``DISTRIBUTIONS``, the catalog's first;
    the timed sets alternate them), where more than one was timed: how much the pooled ``time`` depends on the
    mix (a kernel 15x slower on one distribution has a bimodal pool, and its median sits on the edge of a group)."""
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
    baselines: list[BaselineTiming] = []
    """Every baseline candidate of the task on this workload (``eager`` and ``compile`` are the columns above)."""
    best_baseline: str | None = None
    """Name of the fastest ``ok`` candidate: the baseline the headline speedup is against."""
    speedup_best: float | None = None
    """best baseline median / submission median."""
    evaluator_ms: float | None = None
    """The evaluator's own clock per timed call (from releasing an input set to receiving its output, less the
    measured per-call overhead): the bound the kernel host's CUDA events must agree with."""
    clock: dict[str, bool | int | float] | None = None
    """The evaluator's clock in full: its calibration on a null kernel (``fixed_ms``, ``per_rep_ms``,
    ``noise_ms``), the batches' wall time and reps, the implied and reported per-call times, the margin."""
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
    sandbox: str = ""
    """How the kernel host was isolated (its uid, namespaces, what could not be enforced), for the record."""
    buffers: str = ""
    """How timed batches' input sets and fetched outputs travelled between the evaluator and the kernel host:
    ``gpu`` (shared GPU allocations, :mod:`runner.cuda_share`) or ``host memory`` and why (empty: untimed)."""


class EvalResult(Record):
    """The result of ``d2kgrade eval``: one submission on one task."""

    schema_version: Literal[1, 2] = 2
    """Version of this format (2: baseline candidates, the evaluator's clock, ``unsupported_on_cpu``)."""
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
    import_s: float | None = None
    """Seconds the kernel host took to import the submission (a CUDA ``load_inline`` build that was not cached
    included)."""
    prebuild_s: float | None = None
    """Seconds of the GPU-less prebuild of a CUDA submission before the evaluation (0 when cached)."""
    phases: dict[str, float] = {}
    """Seconds per phase (``start``, ``host_start``, ``ceilings``, ``baselines``, ``calibration``, ``import``,
    ``correctness``, ``rotation``, ``timing``, ``profile``, ``other``, ``teardown``), from the arrival times of
    the evaluator's messages: where an evaluation's time goes (:func:`runner.evaluate.phase_split`)."""
    phase_detail: dict[str, float] = {}
    """The evaluator's own seconds per step of its baselines, calibration and timing (``inputs``, ``references``,
    ``buffers``, ``host_batch``, ``host_verify``, ``check``, ``baselines``; ``batches`` counts timed batches):
    a breakdown inside ``phases``, which overlaps them (:attr:`runner.eval_timing.Timer.cost`)."""
    ceilings: dict[str, Any] | None = None
    """This GPU's measured ceilings the roofline floors used (copy bandwidth, matmul rates, MUFU rate)."""
    log: str = ""
    """What the submission printed (trimmed); never parsed."""
