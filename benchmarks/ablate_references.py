"""Which design properties carry the expert references' speed on this GPU: ``d2kgrade ablate`` on every
reference, one JSON.

    python benchmarks/ablate_references.py                          # all 26 references -> ablation_<gpu>.json
    python benchmarks/ablate_references.py --tasks softmax gemm_bf16 --rounds 5
    setsid nohup python benchmarks/ablate_references.py > /tmp/ablate.log 2>&1 &    # outlives one device call

Per reference: the static rater's present properties with a transform are removed one at a time; every variant
passes the evaluator (hidden workload included) or is ``broke_correctness``; then the original and the passing
variants are timed in ``--rounds`` interleaved rounds (orig, v1..vn, orig), no baselines, and each property gets
its slowdown (geomean over the catalog workloads of the ratio of medians), a 95% bootstrap interval over rounds,
and ``load_bearing`` when that interval clears the original-vs-original noise.

Records are appended to ``--jsonl`` (default ``benchmarks/data/runs/ablation/ablations_<gpu>.jsonl``, ``_cpu`` for a
dry run, so a CPU dry run never stands in for a GPU record) as each reference finishes; a rerun skips the
references already there on the same device (but not those with an ``untimed`` property: a failed original is
tried again; nor those whose code changed since their records, docstrings and comments aside), so a run
cut short by a time limit resumes where it stopped
(``--budget-s`` stops cleanly between references). The JSON (``--out``, default ``benchmarks/data/ablation_<gpu>.json``)
is rewritten after each reference.

Budget: a reference with V variants costs 1 + V correctness evaluations and rounds x (V + 2) timed ones; the
references have 119 variants, so 145 correctness and, at the default 5 rounds, 855 timed evaluations: 1.5-4 hours
on the H200 at 5-15 s each through the sandboxed evaluator (docs/ablation.md, "On the GPU").

``--in-process`` (what a lent machine can afford) evaluates the references and their variants in one process
without the sandbox (:mod:`benchmarks.inprocess_eval`: trusted code only): each module is loaded, compiled and
autotuned once, inputs and float64 references are made once per reference, and the rounds time it with the
evaluator's batch (:func:`runner.timing.timed_reps`). ``--warm-jobs N`` first checks every reference and variant in
N parallel processes, which fills Triton's cache (compiling is CPU-bound and the H200's host has 16 cores); the
timed run that follows is alone on the GPU and autotunes afresh (the warm processes keep no autotuning choice). Every
process is supervised: a variant whose evaluation takes the process down (a CUDA fault) or runs past
``--step-timeout-s`` is recorded as ``broke_correctness`` with the reason (as the sandbox's time limit would fail
it), and the process is restarted without it; a reference whose original does so is named under ``crashed``.
``--device cpu`` is the dry run (correctness only).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from d2kgrade.ablate.apply import ablate_source
from d2kgrade.ablate.driver import AblateConfig, Evaluate, Subject, ablate_kernel, default_evaluator, select_properties
from d2kgrade.ablate.results import REFERENCE_PREFIX, AblationRecord, append_record, code_sha256, read_records
from d2kgrade.errors import UserError
from d2kgrade.io import write_json
from d2kgrade.runstore import now_iso
from d2kgrade.suite import Suite

WORK_DIR = Path("/tmp/d2k_ablate_work")
"""Where ``--in-process`` writes the variants: one fixed path per variant, because Triton keys its cache by the
module's name, which :func:`runner.loading.load_module` derives from the path."""
TIMING_OPTIONS = {"target_s": 0.3, "trials": 1}
"""Timed rounds: the variants already passed the full correctness pass, so one trial per workload, and 0.3 s of
timed calls per workload (every timed call is still rechecked)."""


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version()}
    for mod in ("torch", "triton"):
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:
            pass
    return out


def summary(records: list[AblationRecord]) -> dict[str, Any]:
    """Counts by status, and the load-bearing properties sorted by slowdown."""
    timed = [r for r in records if r.slowdown is not None and not r.estimated_from_reference]
    return {
        "references": len({r.task for r in records}),
        "properties": len(records),
        "by_status": dict(sorted(Counter(r.status for r in records).items())),
        "load_bearing": [{"property": r.property, "transform": r.transform, "slowdown": r.slowdown,
                          "ci": [r.ci_low, r.ci_high], "noise_pct": r.noise_pct}
                         for r in sorted(timed, key=lambda r: -(r.slowdown or 0)) if r.status == "load_bearing"],
        "broke_correctness": [{"property": r.property, "message": r.message} for r in records
                              if r.status == "broke_correctness"],
    }


def task_properties(suite: Suite, tasks: list[str], names: list[str] | None) -> dict[str, list[str] | None]:
    """Per task, the ``--properties`` names that are properties of its rubric (None: every property); a task none
    of them names is left out.

    Raises:
        UserError: a name that is a property of none of the tasks.
    """
    if not names:
        return dict.fromkeys(tasks)
    out: dict[str, list[str] | None] = {}
    used: set[str] = set()
    for task in tasks:
        rubric = suite.load_rubric(task)
        mine = []
        for name in names:
            try:
                select_properties(rubric, [name])
            except UserError:
                continue
            mine.append(name)
        used.update(mine)
        if mine:
            out[task] = mine
    unknown = [n for n in names if n not in used]
    if unknown:
        raise UserError(f"--properties: {', '.join(unknown)}: a property of none of the tasks {', '.join(tasks)}")
    return out


def current_file(args: argparse.Namespace) -> Path:
    """Where a supervised process names the reference and the variant it is evaluating (removed when the reference
    is done), so that the supervisor can name what took the process down or hung it."""
    return args.jsonl.with_name(args.jsonl.name + ".current")


def write_marker(path: Path, task: str, prop: str | None, step: str) -> None:
    """Name the reference ``task``, the variant (``prop``; None for the original) and the step being run."""
    path.write_text(json.dumps({"task": task, "property": prop, "step": step}))


def read_marker(path: Path) -> dict[str, Any] | None:
    """What :func:`write_marker` wrote, or None when the file is missing or cut short."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("task"), str) else None


def lost_record(subject: Subject, suite: Suite, prop_id: str, why: str, device: str) -> AblationRecord:
    """The record of a variant whose evaluation hung or took its process down (``why``): it fails the evaluator,
    as a submission past the sandbox's time limit or one that kills its kernel host does."""
    prop = next(p for p in suite.load_rubric(subject.task).properties if p.id == prop_id)
    source = subject.path.read_text(encoding="utf-8")
    v = ablate_source(source, prop)
    return AblationRecord(task=subject.task, episode=subject.episode, arm=subject.arm, property=prop.id,
                          level=prop.level, present=True, status="broke_correctness", transform=v.transform,
                          message=f"{why}; {v.summary()}", device=device, created_at=now_iso(),
                          kernel_sha256=hashlib.sha256(source.encode()).hexdigest(), code_sha256=code_sha256(source))


def default_tasks(suite: Suite) -> list[str]:
    """Every task with a Triton reference."""
    return [t for t in suite.task_ids if "triton" in suite.reference_kernels(t)]


def run(args: argparse.Namespace, evaluate: Evaluate | None = None, gpu: str | None = None,
        clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Ablate the references into ``args.jsonl`` and ``args.out``; returns the JSON written. Records of another
    device in the same file are neither resumed from nor reported."""
    suite = Suite(ROOT)
    wanted = task_properties(suite, args.tasks or default_tasks(suite), args.properties)
    tasks = list(wanted)
    config = AblateConfig(device=args.device, rounds=1 if args.check_only else args.rounds,
                          workloads=args.workloads or "all", seed=args.seed, timeout_s=args.timeout_s, suite_root=ROOT)
    if evaluate is None and args.in_process:
        from benchmarks.inprocess_eval import InProcessEvaluator

        evaluate = InProcessEvaluator(ROOT, target_s=args.target_s)
    evaluate = evaluate or default_evaluator(ROOT, timing_options=TIMING_OPTIONS)

    def mine() -> list[AblationRecord]:
        return [r for r in read_records(args.jsonl) if r.device == args.device
                and r.episode.removeprefix(REFERENCE_PREFIX) in tasks]

    # A reference is done when every selected property has its record (a kill between appends leaves it undone),
    # none is untimed (an original that failed, as round 16's paged_attention_decode ran out of memory, is tried
    # again) and every record was measured on the reference's current code (a reference whose code changed is ablated
    # again; an edit of its docstrings or comments is not a change: code_sha256).
    sha = {t: code_sha256(suite.reference_kernels(t)["triton"].read_text(encoding="utf-8")) for t in tasks}
    have = {r.key() for r in mine() if r.status != "untimed" and r.code_sha256 in (None, sha[r.task])}
    done = {REFERENCE_PREFIX + t for t in tasks if all(
        (REFERENCE_PREFIX + t, p.id) in have for p in select_properties(suite.load_rubric(t), wanted[t]))}
    t0 = clock()
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")

    def write(complete: bool) -> dict[str, Any]:
        records = mine()
        data = {"what": "ablation of the expert references: slowdown when each design property is removed",
                "command": " ".join([Path(sys.executable).name, *sys.argv]), "started": started,
                "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "gpu": gpu, **versions(), "device": args.device,
                "rounds": args.rounds, "complete": complete, "crashed": list(args.crashed),
                **({"evaluator": "in-process (benchmarks/inprocess_eval.py)", "target_s": args.target_s}
                   if args.in_process else {"evaluator": "sandboxed (runner.evaluate)",
                                            "timing_options": TIMING_OPTIONS}),
                "wall_s": round(clock() - t0, 1), "tasks": sorted({r.task for r in records}),
                "summary": summary(records),
                "records": [r.model_dump(mode="json") for r in records]}
        write_json(args.out, data)
        return data

    complete = True
    current = current_file(args)
    lost = dict(item.split("=", 1) for item in args.lost)
    ablated = 0  # the budget stops between references: the first one due always runs, so a rerun gets further
    for i, task in enumerate(tasks):
        episode = REFERENCE_PREFIX + task
        if episode in done or task in args.crashed:
            continue
        if ablated and args.budget_s is not None and clock() - t0 > args.budget_s:
            print(f"budget of {args.budget_s:.0f} s spent; {len(tasks) - i} references left (rerun to resume)",
                  file=sys.stderr)
            complete = False
            break
        t1 = clock()
        props = [p.id for p in select_properties(suite.load_rubric(task), wanted[task])]
        subject = Subject(task, suite.reference_kernels(task)["triton"], episode, arm="reference")

        def progress(msg: str, task: str = task, props: list[str] = props) -> None:
            print(f"[{clock() - t0:7.1f} s] {msg}", file=sys.stderr, flush=True)
            # What the supervisor names if this process dies or hangs here: the reference, and the variant.
            write_marker(current, task, next((p for p in props if msg.endswith(p)), None), msg)

        current.parent.mkdir(parents=True, exist_ok=True)
        write_marker(current, task, None, "start")
        live = [p for p in props if p not in lost]
        recs = ablate_kernel(subject, suite, config, properties=live, evaluate=evaluate,
                             work_dir=args.work_dir / task if args.work_dir else None,
                             progress=progress) if live else []
        recs += [lost_record(subject, suite, p, lost[p], args.device) for p in props if p in lost]
        recs.sort(key=lambda r: props.index(r.property))
        for r in recs:
            append_record(args.jsonl, r)
        current.unlink(missing_ok=True)
        print(f"{task}: {dict(Counter(r.status for r in recs))} in {clock() - t1:.0f} s", file=sys.stderr)
        ablated += 1
        write(False)
    return write(complete)


SAME_RUN = ("gpu", "device", "torch", "triton", "evaluator", "rounds")
"""Fields that the JSONs :func:`merge` joins must share: figures of different setups are not one table."""


def merge(paths: list[Path]) -> dict[str, Any]:
    """One JSON from the JSONs of several runs of this script (rounds that each ablated some references): the
    union of their records (a later file's record replaces an earlier one's for the same reference and
    property), the summary recomputed, and each run's command, dates and references under ``runs``.

    Raises:
        UserError: a file that is not such a JSON, or runs whose GPU, versions, evaluator or rounds differ.
    """
    from d2kgrade.ablate.results import read_ablation_file

    docs, records = [], {}
    for path in paths:
        if path.suffix != ".json":
            raise UserError(f"--merge: {path}: expected the JSON this script writes (ablation_<gpu>.json)")
        for rec in read_ablation_file(path):
            records[rec.key()] = rec
        docs.append((path, json.loads(path.read_text(encoding="utf-8"))))
    for field_ in SAME_RUN:
        values = {str(doc.get(field_)) for _, doc in docs}
        if len(values) > 1:
            raise UserError(f"--merge: the runs differ in {field_!r} ({', '.join(sorted(values))}); "
                            "figures of different setups are not merged")
    recs = sorted(records.values(), key=lambda r: (r.task, r.property))
    first = docs[0][1]
    return {"what": first.get("what"), "command": "python benchmarks/ablate_references.py --merge "
            + " ".join(str(p) for p in paths),
            "runs": [{"file": str(p), "command": d.get("command"), "started": d.get("started"),
                      "date": d.get("date"), "wall_s": d.get("wall_s"), "complete": d.get("complete"),
                      "crashed": d.get("crashed", []), "tasks": d.get("tasks", [])} for p, d in docs],
            "date": max(str(d.get("date")) for _, d in docs),
            **{k: first.get(k) for k in ("gpu", "python", "torch", "triton", "device", "rounds", "evaluator",
                                         "target_s", "timing_options") if k in first},
            "complete": all(d.get("complete") for _, d in docs),
            "crashed": sorted({t for _, d in docs for t in d.get("crashed", [])}),
            "tasks": sorted({r.task for r in recs}), "summary": summary(recs),
            "records": [r.model_dump(mode="json") for r in recs]}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", nargs="*", help="task ids (default: every task with a Triton reference)")
    ap.add_argument("--properties", nargs="*", help="only these properties (ids or ids without the task prefix)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (>= 2; 3 rounds give a \"95%%\" "
                    "interval that covers the truth 72%% of the time: docs/ablation.md)")
    ap.add_argument("--workloads", nargs="*", help="workloads to time (default: every catalog workload)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cuda (cpu: correctness only, a dry run)")
    ap.add_argument("--seed", type=int, default=0, help="evaluation seed (same inputs for every variant)")
    ap.add_argument("--timeout-s", type=float, default=600.0, help="per evaluation")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="stop between references after this long (warm phase included; the first reference due "
                         "always runs, so a rerun gets further)")
    ap.add_argument("--jsonl", type=Path, default=None, help="records, appended as each reference finishes (the "
                    "resume file; default benchmarks/data/runs/ablation/ablations_<gpu>.jsonl)")
    ap.add_argument("--out", type=Path, default=None, help="JSON (default benchmarks/data/ablation_<gpu>.json)")
    ap.add_argument("--in-process", action="store_true", help="evaluate in this process, without the sandbox "
                    "(benchmarks/inprocess_eval.py; the team's references only): minutes instead of hours")
    ap.add_argument("--target-s", type=float, default=0.05, help="--in-process: timed calls per workload and round")
    ap.add_argument("--warm-jobs", type=int, default=0, help="--in-process on cuda: first check every reference "
                    "and variant in this many parallel processes (fills Triton's cache)")
    ap.add_argument("--work-dir", type=Path, default=None, help="where the variants are written (default: a "
                    f"temporary folder; {WORK_DIR} with --in-process, so that the warm processes compile what "
                    "the timed run loads)")
    ap.add_argument("--step-timeout-s", type=float, default=300.0, help="--in-process: kill a process whose "
                    "evaluation of one reference or variant runs longer; the variant is recorded as "
                    "broke_correctness (a reference's original: named under 'crashed') and the run goes on")
    ap.add_argument("--warm-timeout-s", type=float, default=420.0, help="--in-process: kill the warm processes "
                    "still running after this long (the timed run compiles what they did not)")
    ap.add_argument("--merge", nargs="+", type=Path, metavar="JSON", help="write to --out the union of these "
                    "runs' JSONs (later files win) and exit; nothing is evaluated")
    ap.add_argument("--check-only", action="store_true", help=argparse.SUPPRESS)  # a warm process
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # run by the supervisor
    ap.add_argument("--crashed", nargs="*", default=[], help=argparse.SUPPRESS)  # references that took it down
    ap.add_argument("--lost", nargs="*", default=[], help=argparse.SUPPRESS)  # PROPERTY=WHY: variants that did so
    args = ap.parse_args(argv)
    if args.rounds < 2:
        ap.error("--rounds must be >= 2 (the noise needs two rounds)")
    if args.warm_jobs and not args.in_process:
        ap.error("--warm-jobs needs --in-process")
    if args.in_process and args.work_dir is None:
        args.work_dir = WORK_DIR
    return args


def child_argv(args: argparse.Namespace, tasks: list[str], **over: Any) -> list[str]:
    """The command line of a supervised process: these tasks, the same options, ``over`` replacing some."""
    opts: dict[str, Any] = {"rounds": args.rounds, "workloads": args.workloads, "device": args.device,
                            "seed": args.seed, "timeout_s": args.timeout_s, "budget_s": args.budget_s,
                            "jsonl": args.jsonl, "out": args.out, "target_s": args.target_s,
                            "work_dir": args.work_dir, "properties": args.properties, **over}
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", "--in-process", "--tasks", *tasks]
    for key, value in opts.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif isinstance(value, list):
            argv += [flag, *map(str, value)] if value else []
        else:
            argv += [flag, str(value)]
    return argv


@dataclass
class Lane:
    """One supervised child process and what it has lost so far."""

    tasks: list[str]
    marker: Path
    over: dict[str, Any]
    """:func:`child_argv` overrides (``check_only``, ``jsonl``, ``out``)."""
    env: dict[str, str] | None = None
    crashed: list[str] = field(default_factory=list)
    """References whose original took the process down or hung it: left out of its restarts."""
    proc: Any = None
    seen: Any = None
    since: float = 0.0
    done: bool = False
    failed: bool = False


def _lost_why(where: str, step: str, rc: int | None, timeout_s: float) -> str:
    return (f"its evaluation in {where} ({step}) ran past --step-timeout-s {timeout_s:.0f} s and was killed"
            if rc is None else f"its evaluation in {where} ({step}) took the process down (exit code {rc})")


def watch(args: argparse.Namespace, lanes: list[Lane], lost: dict[str, str], *, clock: Callable[[], float],
          spawn: Callable[..., Any], sleep: Callable[[float], None], t0: float,
          deadline: float | None = None) -> None:
    """Run ``lanes`` to the end, restarting a lane past what took its process down or hung it for
    ``--step-timeout-s``: a variant goes into ``lost`` (property -> why; shared by all lanes, so that a variant
    that hung a warm process is not run again), a reference whose original did it into the lane's ``crashed``.
    A lane that dies outside a reference, or twice on the same thing, stops. Past ``deadline`` every lane still
    running is killed."""

    def start(lane: Lane) -> None:
        lane.marker.unlink(missing_ok=True)
        budget = None if args.budget_s is None else max(0.0, args.budget_s - (clock() - t0))
        lane.proc = spawn(child_argv(args, lane.tasks, budget_s=budget, crashed=lane.crashed,
                                     lost=[f"{p}={w}" for p, w in lost.items()], **lane.over),
                          **({"env": lane.env} if lane.env is not None else {}))
        lane.seen, lane.since = None, clock()

    for lane in lanes:
        start(lane)
    while running := [lane for lane in lanes if not (lane.done or lane.failed)]:
        if deadline is not None and clock() > deadline:
            for lane in running:
                lane.proc.kill()
                lane.proc.wait()
                lane.failed = True
            return
        for lane in running:
            rc = lane.proc.poll()
            mark = read_marker(lane.marker)
            if rc is None:
                if mark != lane.seen:
                    lane.seen, lane.since = mark, clock()
                    continue
                if mark is None or clock() - lane.since <= args.step_timeout_s:
                    continue
                lane.proc.kill()
                lane.proc.wait()
            elif rc == 0:
                lane.done = True
                continue
            where = "a warm process" if lane.over.get("check_only") else "the timed process"
            if mark is None:
                print(f"{where} exited with {rc} outside a reference; stopping it", file=sys.stderr)
                lane.failed = True
                continue
            prop, step = mark.get("property"), mark.get("step", "?")
            if isinstance(prop, str) and prop not in lost:
                lost[prop] = _lost_why(where, step, rc, args.step_timeout_s)
                print(f"{mark['task']}: {prop}: {lost[prop]}; going on without it", file=sys.stderr)
            elif prop is None and mark["task"] not in lane.crashed:
                lane.crashed.append(mark["task"])
                how = (f"ran past --step-timeout-s {args.step_timeout_s:.0f} s in {step!r} and was killed"
                       if rc is None else f"ended in {step!r} (exit code {rc})")
                print(f"{mark['task']}: {where} {how}; going on without it", file=sys.stderr)
            else:
                print(f"{where} ended twice on {mark['task']} {prop or ''}; stopping it", file=sys.stderr)
                lane.failed = True
                continue
            start(lane)
        sleep(1.0)


def supervise(args: argparse.Namespace, tasks: list[str], clock: Callable[[], float] = time.monotonic,
              spawn: Callable[..., Any] | None = None, sleep: Callable[[float], None] = time.sleep) -> int:
    """Run the in-process ablation of ``tasks`` in child processes (:func:`watch`): first the warm ones
    (``--warm-jobs``, in parallel, checks only, their records thrown away; those still running after
    ``--warm-timeout-s`` are killed), then one timed process. A variant that hangs a process for
    ``--step-timeout-s`` (round 15's first machine: histogram's strategy-by-bins variant ran for 500 s and more) or
    takes it down is recorded as ``broke_correctness`` with the reason, and the reference goes on without it; a
    reference whose original does it is named under ``crashed``. Returns 0, or 1 if a reference crashed or the
    timed process stopped."""
    spawn = spawn or (lambda argv, **kw: subprocess.Popen(argv, **kw))
    t0 = clock()
    lost: dict[str, str] = {}
    if args.warm_jobs:
        warm = Path(args.work_dir) / "warm"
        warm.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "TRITON_CACHE_AUTOTUNING"}
        lanes = [Lane(tasks[i::args.warm_jobs], warm / f"warm{i}.jsonl.current", env=env,
                      over={"check_only": True, "jsonl": warm / f"warm{i}.jsonl", "out": warm / f"warm{i}.json"})
                 for i in range(min(args.warm_jobs, len(tasks)))]
        watch(args, lanes, lost, clock=clock, spawn=spawn, sleep=sleep, t0=t0, deadline=t0 + args.warm_timeout_s)
        late = [lane.tasks for lane in lanes if not lane.done]
        print(f"warm: {len(lanes)} processes in {clock() - t0:.0f} s"
              + (f"; not finished (killed after {args.warm_timeout_s:.0f} s, or stopped): {late}" if late else ""),
              file=sys.stderr)
    timed = Lane(list(tasks), current_file(args), over={})
    watch(args, [timed], lost, clock=clock, spawn=spawn, sleep=sleep, t0=t0)
    return 1 if timed.crashed or timed.failed else 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.merge:
        if args.out is None:
            print("error: --merge needs --out", file=sys.stderr)
            return 1
        try:
            data = merge(args.merge)
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        write_json(args.out, data)
        print(f"wrote {args.out}: {len(data['tasks'])} references, {data['summary']['by_status']}", file=sys.stderr)
        return 0
    gpu = None
    if args.device == "cuda":
        from runner.evaluate import gpu_info

        info = gpu_info(0)
        if info is None:
            print("no CUDA GPU visible; this benchmark needs one (--device cpu checks correctness only)",
                  file=sys.stderr)
            return 2
        gpu = info["name"]
    slug = "cpu" if gpu is None else "h200" if "H200" in gpu else gpu.lower().replace(" ", "-")
    if args.out is None:
        args.out = ROOT / "benchmarks" / "data" / f"ablation_{slug}.json"
    if args.jsonl is None:
        args.jsonl = ROOT / "benchmarks" / "data" / "runs" / "ablation" / f"ablations_{slug}.jsonl"
    if args.in_process and not args.child:
        return supervise(args, args.tasks or default_tasks(Suite(ROOT)))
    try:
        data = run(args, gpu=gpu)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}: {data['summary']['by_status']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
