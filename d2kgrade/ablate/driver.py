"""``d2kgrade ablate``: remove each present design property from a kernel, check correctness, time the variants.

For one kernel (:func:`ablate_kernel`):

1. The static rater grades the file; a property it does not find present is ``not_present``.
2. Each present property with a transform gets its ablated variant (:func:`d2kgrade.ablate.apply.ablate_source`);
   one without, or whose transform finds nothing to change, is ``no_transform``.
3. The original and every variant run through the evaluator for correctness (hidden workload included). A
   variant that fails is ``broke_correctness`` and is never timed.
4. On CUDA, the original and the passing variants are timed in interleaved rounds (orig, v1, v2, ..., orig
   again, then the next round), with ``hidden=False`` and no baselines; :mod:`d2kgrade.ablate.stats` turns the
   rounds into slowdowns with bootstrap intervals, and the original-vs-original noise decides ``load_bearing``.
   On CPU nothing is timed: a passing variant is ``untimed``.

For a run directory (:func:`ablate_run`): the same for every episode's final kernel, plus the expert reference of
each task (``reference:<task>``), whose figures stand in for the properties an agent's kernel lacks
(``estimated_from_reference``). Records are appended to ``RUN_DIR/ablations.jsonl`` as each kernel finishes;
kernels already there are skipped, so an interrupted run resumes.

The evaluator is a parameter (``evaluate``), so tests drive the whole flow with a fake; the default imports
:mod:`runner.evaluate` when first called.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

from d2kgrade.ablate.apply import Variant, ablate_source
from d2kgrade.ablate.results import (REFERENCE_PREFIX, AblationRecord, WorkloadAblation, append_record, code_sha256,
                                     read_records)
from d2kgrade.ablate.stats import load_bearing, ratio_of_medians
from d2kgrade.ablate.transforms._base import NotApplicable
from d2kgrade.errors import MissingDependencyError, UserError
from d2kgrade.records import EvalResult
from d2kgrade.runstore import now_iso
from d2kgrade.schema import Property, Rubric
from d2kgrade.suite import Suite

log = logging.getLogger(__name__)

Evaluate = Callable[..., EvalResult]
"""``evaluate(task_id, path, *, device, workloads, seed, timeout_s, hidden, timing) -> EvalResult``."""
Progress = Callable[[str], None]


@dataclass(frozen=True)
class AblateConfig:
    """How to ablate: device, timing rounds, workloads, seed."""

    device: str | None = None
    """``cuda`` or ``cpu`` (default: cuda when present)."""
    rounds: int = 5
    """Interleaved timing rounds on CUDA (each round times every variant once, and the original twice)."""
    workloads: str | list[str] = "all"
    """Workloads to time (``all``, ``smoke`` or names); on CPU only the smoke workload runs."""
    seed: int | None = None
    """One seed for every evaluation of a kernel (default: a fresh one per kernel)."""
    timeout_s: float | None = None
    """Wall limit of each evaluation."""
    resamples: int = 2000
    """Bootstrap resamples of the rounds."""
    suite_root: Path | None = None
    """Suite folder passed to the evaluator."""


@dataclass(frozen=True)
class Subject:
    """One kernel file to ablate, and who wrote it."""

    task: str
    path: Path
    episode: str
    arm: str | None = None
    model: str | None = None
    seed: int | None = None


def default_evaluator(suite_root: Path | None = None, timing_options: dict[str, Any] | None = None) -> Evaluate:
    """The real evaluator (:func:`runner.evaluate.run_evaluation`) with the options ablation rounds need;
    ``timing_options`` (``EvalOptions`` fields: ``target_s``, ``trials``...) apply to the timed rounds only.

    Raises:
        MissingDependencyError: torch or triton is not installed.
    """
    try:
        from runner.evaluate import EvalOptions, run_evaluation
    except ImportError as exc:
        raise MissingDependencyError(getattr(exc, "name", None) or "torch", "gpu") from None
    names = {f.name for f in dataclasses.fields(EvalOptions)}
    # Rounds time the kernel, not the baselines again: `baselines` where the evaluator has it, else at least no
    # torch.compile baseline.
    quiet = {"baselines": False} if "baselines" in names else {"compile_baseline": False}

    def evaluate(task_id: str, path: Path, *, device: str | None, workloads: str | list[str], seed: int | None,
                 timeout_s: float | None, hidden: bool, timing: bool) -> EvalResult:
        opts = EvalOptions(**quiet, **(timing_options or {})) if timing else EvalOptions(**quiet)
        return run_evaluation(task_id, path, suite_root=suite_root, device=device, workloads=workloads, seed=seed,
                              timeout_s=timeout_s, hidden=hidden, timing=timing, options=opts)

    return evaluate


def select_properties(rubric: Rubric, wanted: Iterable[str] | None) -> list[Property]:
    """The rubric's live properties, or those named in ``wanted`` (full ids, or ids without the task prefix).

    Raises:
        UserError: a name that is no property of the rubric.
    """
    props = [p for p in rubric.properties if not p.deprecated]
    if not wanted:
        return props
    by_id = {p.id: p for p in props}
    out = []
    for w in wanted:
        hits = [p for p in props if p.id == w or p.id == f"{rubric.task}.{w}" or p.id.endswith("." + w)]
        if len(hits) != 1:
            raise UserError(f"--properties: {w!r} is {'ambiguous' if hits else 'not a property'} of {rubric.task}; "
                            f"known: {', '.join(sorted(by_id))}")
        out.append(hits[0])
    return out


def _slug(pid: str) -> str:
    return pid.replace(".", "_").replace("-", "_")


def _failure(res: EvalResult) -> str:
    bad = [w for w in res.workloads if w.status != "passed"]
    where = f" on {bad[0].name}: {bad[0].message}" if bad and bad[0].message else (f" on {bad[0].name}" if bad else "")
    return f"{res.status}{where}" + (f" ({res.message})" if res.message and not bad else "")


def _times(res: EvalResult) -> dict[str, float]:
    return {w.name: w.time.median_ms for w in res.workloads if not w.hidden and w.time is not None
            and w.status == "passed" and w.time.median_ms > 0}


class _Ablation:
    """The ablation of one kernel: plan, correctness, timing, records."""

    def __init__(self, subject: Subject, rubric: Rubric, config: AblateConfig, evaluate: Evaluate,
                 work_dir: Path, progress: Progress | None) -> None:
        self.s, self.rubric, self.cfg, self.evaluate = subject, rubric, config, evaluate
        self.work_dir, self.progress = work_dir, progress or (lambda _msg: None)
        self.source = subject.path.read_text(encoding="utf-8")
        self.sha = hashlib.sha256(self.source.encode()).hexdigest()
        self.code_sha = code_sha256(self.source)
        self.seed = config.seed
        self.records: dict[str, AblationRecord] = {}
        self.variants: dict[str, tuple[Property, Variant, Path]] = {}
        self.env_device: str | None = config.device
        """Where the evaluations ran (known after the first one)."""

    def _record(self, prop: Property, **fields: Any) -> None:
        base = dict(task=self.s.task, episode=self.s.episode, arm=self.s.arm, model=self.s.model, seed=self.s.seed,
                    property=prop.id, level=prop.level, kernel_sha256=self.sha, code_sha256=self.code_sha,
                    created_at=now_iso(),
                    device=self.env_device)
        self.records[prop.id] = AblationRecord(**{**base, **fields})

    # ----------------------------------------------------------------- steps

    def plan(self, props: list[Property]) -> None:
        from d2kgrade.static import grade_file

        grades = {g.property_id: g for g in grade_file(self.rubric, self.s.path).properties}
        self.work_dir.mkdir(parents=True, exist_ok=True)
        for p in props:
            g = grades.get(p.id)
            if g is None or g.verdict != "present":
                why = "the static rater does not find it" if g is None or g.verdict == "absent" else (
                    f"the static rater cannot tell ({g.reason})")
                self._record(p, present=False, status="not_present", message=why)
                continue
            try:
                v = ablate_source(self.source, p)
            except (NotApplicable, UserError) as exc:  # nothing to change; a file libcst cannot parse
                self._record(p, present=True, status="no_transform", message=str(exc))
                continue
            except Exception as exc:  # a transform's own fault on an unusual file: reported, the run goes on
                log.exception("ablation of %s in %s failed", p.id, self.s.path)
                self._record(p, present=True, status="no_transform",
                             message=f"the transform failed on this file: {type(exc).__name__}: {exc}")
                continue
            path = self.work_dir / f"{_slug(p.id)}.py"
            path.write_text(v.source, encoding="utf-8")
            self.variants[p.id] = (p, v, path)

    def check(self) -> bool:
        """Correctness of the original and of every variant; failing variants are recorded and dropped."""
        self.progress(f"{self.s.episode}: correctness of the original")
        orig = self._eval(self.s.path, hidden=True, timing=False)
        self.env_device = orig.environment.device
        if not orig.correct:
            for p, v, _path in self.variants.values():
                self._record(p, present=True, status="untimed", transform=v.transform,
                             message=f"the original itself fails ({_failure(orig)}); variant not evaluated: "
                                     + v.summary())
            self.variants.clear()
            return False
        for pid, (p, v, path) in list(self.variants.items()):
            self.progress(f"{self.s.episode}: correctness without {pid}")
            res = self._eval(path, hidden=True, timing=False)
            if res.status == "unsupported_on_cpu":  # an interpreter limitation, not a wrong kernel
                self._record(p, present=True, status="untimed", transform=v.transform,
                             message=f"the interpreter cannot run the variant ({_failure(res)}); {v.summary()}")
                del self.variants[pid]
            elif not res.correct:
                self._record(p, present=True, status="broke_correctness", transform=v.transform,
                             message=f"{_failure(res)}; {v.summary()}")
                del self.variants[pid]
        return True

    def time(self) -> None:
        """Interleaved rounds: orig, v1, ..., vn, orig; then the statistics."""
        live = dict(self.variants)
        names = ["orig_a", *live, "orig_b"]
        series: dict[str, dict[str, list[float | None]]] = {n: {} for n in names}
        gpu = None
        for r in range(self.cfg.rounds):
            for n in names:
                if n not in live and not n.startswith("orig"):
                    continue
                path = self.s.path if n.startswith("orig") else live[n][2]
                self.progress(f"{self.s.episode}: round {r + 1}/{self.cfg.rounds}, {n}")
                res = self._eval(path, hidden=False, timing=True)
                gpu = gpu or res.environment.gpu
                if not res.correct and not n.startswith("orig"):
                    p, v, _ = live.pop(n)
                    self._record(p, present=True, status="broke_correctness", transform=v.transform,
                                 message=f"failed in timing round {r + 1}: {_failure(res)}; {v.summary()}")
                    continue
                t = _times(res)
                for w in set(t) | set(series[n]):
                    series[n].setdefault(w, [None] * r).append(t.get(w))
            for n in names:  # keep every series one entry per round
                for w, xs in series[n].items():
                    xs.extend([None] * (r + 1 - len(xs)))
        noise, noise_w = ratio_of_medians(series["orig_b"], series["orig_a"], resamples=self.cfg.resamples,
                                          seed=1)
        noise_pct = noise.half_width_pct if noise else None
        for pid, (p, v, _path) in live.items():
            sd, per_w = ratio_of_medians(series[pid], series["orig_a"], resamples=self.cfg.resamples, seed=2)
            if sd is None:
                self._record(p, present=True, status="untimed", transform=v.transform,
                             message="no workload was timed in two rounds; " + v.summary())
                continue
            wl = [WorkloadAblation(name=w, slowdown=round(x.value, 5), ci_low=round(x.low, 5),
                                   ci_high=round(x.high, 5),
                                   noise_pct=round(noise_w[w].half_width_pct, 3) if w in noise_w else None,
                                   original_ms=_med(series["orig_a"][w]), ablated_ms=_med(series[pid][w]))
                  for w, x in sorted(per_w.items())]
            bearing = noise_pct is not None and load_bearing(sd, noise_pct)
            self._record(p, present=True, status="load_bearing" if bearing else "not_load_bearing",
                         transform=v.transform, slowdown=round(sd.value, 5), ci_low=round(sd.low, 5),
                         ci_high=round(sd.high, 5), noise_pct=None if noise_pct is None else round(noise_pct, 3),
                         workloads=wl, gpu=gpu, rounds=self.cfg.rounds, message=v.summary())

    def untimed(self) -> None:
        for p, v, _path in self.variants.values():
            self._record(p, present=True, status="untimed", transform=v.transform,
                         message=f"passes the evaluator on {self.env_device}; timing needs cuda. {v.summary()}")

    def _eval(self, path: Path, *, hidden: bool, timing: bool) -> EvalResult:
        return self.evaluate(self.s.task, path, device=self.cfg.device, workloads=self.cfg.workloads,
                             seed=self.seed, timeout_s=self.cfg.timeout_s, hidden=hidden, timing=timing)


def _med(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return round(median(vals), 6) if vals else None


def ablate_kernel(subject: Subject, suite: Suite, config: AblateConfig, *, properties: Iterable[str] | None = None,
                  evaluate: Evaluate | None = None, work_dir: Path | None = None,
                  progress: Progress | None = None) -> list[AblationRecord]:
    """Ablate every selected property of one kernel (module docstring); records in rubric order.

    Raises:
        UserError: unknown task, missing file, unknown property, bad rubric ablation arguments.
    """
    if not subject.path.is_file():
        raise UserError(f"{subject.path}: file not found")
    rubric = suite.load_rubric(subject.task)
    props = select_properties(rubric, properties)
    evaluate = evaluate or default_evaluator(config.suite_root)
    with tempfile.TemporaryDirectory(prefix="d2k_ablate_") as tmp:
        ab = _Ablation(subject, rubric, config, evaluate, Path(work_dir or tmp), progress)
        if ab.seed is None:
            import secrets

            ab.seed = secrets.randbits(62)
        ab.plan(props)
        if ab.variants and ab.check() and ab.variants:
            if ab.env_device == "cuda" and config.rounds >= 2:
                ab.time()
            else:
                ab.untimed()
        return [ab.records[p.id] for p in props if p.id in ab.records]


def estimate_from_reference(records: list[AblationRecord], reference: dict[str, AblationRecord]) -> list[
        AblationRecord]:
    """For each ``not_present`` record, the reference's timed slowdown of that property (if it has one)."""
    out = []
    for r in records:
        ref = reference.get(r.property)
        if r.status == "not_present" and ref is not None and ref.slowdown is not None:
            r = r.model_copy(update={"slowdown": ref.slowdown, "ci_low": ref.ci_low, "ci_high": ref.ci_high,
                                     "noise_pct": ref.noise_pct, "estimated_from_reference": True,
                                     "transform": ref.transform,
                                     "message": f"{r.message}; estimated from {ref.episode} ({ref.status})"})
        out.append(r)
    return out


def ablate_run(run_dir: Path, suite: Suite, config: AblateConfig, *, references: bool = True,
               evaluate: Evaluate | None = None, progress: Progress | None = None,
               properties: Iterable[str] | None = None) -> list[AblationRecord]:
    """Ablate the final kernel of every episode of a run (and each task's reference) into
    ``RUN_DIR/ablations.jsonl``; returns every record in the file afterwards.

    Raises:
        UserError: not a run directory, or a line of an existing ablations file that is not a record.
    """
    from d2kgrade.ablate.results import ABLATIONS_FILE
    from d2kgrade.runstore import load_run

    try:
        episodes = load_run(run_dir)["episodes"]
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    out = Path(run_dir) / ABLATIONS_FILE
    done = {r.key() for r in read_records(out)}
    evaluate = evaluate or default_evaluator(config.suite_root)
    work = Path(run_dir) / "ablations"

    def run_one(subject: Subject, wanted: list[str]) -> None:
        if wanted and all((subject.episode, p) in done for p in wanted):
            return
        recs = ablate_kernel(subject, suite, config, properties=properties, evaluate=evaluate,
                             work_dir=work / _slug(subject.episode), progress=progress)
        if not subject.episode.startswith(REFERENCE_PREFIX):
            ref = {r.property: r for r in read_records(out) if r.episode == REFERENCE_PREFIX + subject.task}
            recs = estimate_from_reference(recs, ref)
        for r in recs:
            append_record(out, r)
            done.add(r.key())

    for task_id, group in episodes.groupby("task", sort=True):
        task_id = str(task_id)
        rubric = suite.load_rubric(task_id)
        wanted = [p.id for p in select_properties(rubric, properties)]
        if references:
            kernels = suite.reference_kernels(task_id)
            if "triton" in kernels:
                run_one(Subject(task_id, kernels["triton"], REFERENCE_PREFIX + task_id, arm="reference"), wanted)
        for ep in group.itertuples(index=False):
            rel = ep.kernel_path
            if not isinstance(rel, str) or not rel or not (Path(run_dir) / rel).is_file():
                log.info("%s: no final kernel; skipped", ep.episode_id)
                continue
            seed = None if ep.seed is None or (isinstance(ep.seed, float) and math.isnan(ep.seed)) else int(ep.seed)
            run_one(Subject(task_id, Path(run_dir) / rel, str(ep.episode_id), arm=str(ep.arm),
                            model=ep.model if isinstance(ep.model, str) else None, seed=seed), wanted)
    return read_records(out)
