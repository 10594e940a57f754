"""``d2kgrade run``: plan the episodes of a run, resume a run directory, and hand the rest to an executor.

Planning is deterministic: an episode's id is ``<task>.<arm>[-<guidance>].s<seed>`` (``softmax.guided-all.s0``,
``softmax.unguided.s0``; reference runs ``softmax.reference-triton.s0``; replays keep the replayed ids), so
rerunning the same command on the same RUN_DIR finds what is done. Resume rules:

- episodes with a row whose status is ``finished``, ``budget_exhausted`` or ``no_submission`` are never repeated;
- ``failed`` episodes and episodes that never ended (a killed run) are run again from scratch, their partial
  rows and files deleted first;
- settings are checked by :func:`runner.agent.config.merge_for_resume` (identity equal, extent may grow), and
  each task's files must hash as they did when its episodes ran (``task_version``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from d2kgrade.errors import SpecError, UserError, require_extra
from d2kgrade.io import sweep_stale_tempdirs
from d2kgrade.runstore import UNSCORED_STATUSES, RunLock, RunStore, load_run, suite_version, task_version
from d2kgrade.suite import Suite
from runner.agent.config import RunConfig, merge_for_resume
from runner.agent.episode import EpisodeSpec
from runner.agent.prompts import gpu_ceilings
from runner.agent.recorder import LocalSink

log = logging.getLogger(__name__)

EventFn = Callable[[str, str, dict[str, Any]], None]
"""``on_event(kind, episode_id, info)``: kinds ``plan`` (info: total, done), ``start``, ``turn`` (info: turn),
``end`` (info: the episode row)."""


@dataclass
class ExecContext:
    """What an executor needs to run a session's episodes."""

    config: RunConfig
    run_dir: Path
    store: RunStore
    suite_root: Path
    hardware: dict[str, Any]
    env_info: dict[str, Any]
    suite_version: str
    task_versions: dict[str, str]
    session_id: int
    api_key: str | None
    on_event: EventFn
    cancel: threading.Event
    attempts: dict[str, int] = field(default_factory=dict)
    evaluate_fn: Any = None
    chat_client_factory: Any = None


@dataclass
class RunResult:
    """What a session did."""

    run_dir: Path
    run_id: str
    config: RunConfig
    planned: int
    already_done: int
    rows: list[dict[str, Any]]
    interrupted: bool = False


# ---------------------------------------------------------------------- environment


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _nvidia_smi() -> list[dict[str, str]]:
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    rows = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            rows.append(dict(zip(("index", "name", "driver", "memory"), parts, strict=True)))
    return rows


def _git(root: Path) -> dict[str, Any]:
    if shutil.which("git") is None or not (root / ".git").exists():
        return {}
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "tasks", "references"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {"commit": head, "suite_dirty": bool(dirty)}


def environment(suite_root: Path, device: str) -> dict[str, Any]:
    """Where this session runs: host, Python, package versions, GPUs and driver, the suite's git commit."""
    from d2kgrade import __version__

    return {"host": socket.gethostname(), "platform": platform.platform(), "python": platform.python_version(),
            "d2kgrade": __version__, "torch": _version("torch"), "triton": _version("triton"),
            "openai": _version("openai"), "ray": _version("ray"), "device": device, "gpus": _nvidia_smi(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "git": _git(suite_root),
            "triton_interpret": os.environ.get("TRITON_INTERPRET")}


def detect_device() -> str:
    """``cuda`` when torch sees a GPU (checked only if nvidia-smi lists one: importing torch costs seconds)."""
    if not _nvidia_smi():
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def hardware(device: str, gpus: list[int] | None) -> dict[str, Any]:
    """The GPU the agent is told about (the first lane's) and its datasheet ceilings."""
    if device != "cuda":
        return {"device": "cpu"}
    import torch

    index = (gpus or [0])[0]
    name = torch.cuda.get_device_name(index)
    return {"device": "cuda", "gpu": name, "ceilings": gpu_ceilings(name)}


# ---------------------------------------------------------------------- planning


def eval_seed(run_id: str, task: str, seed: int) -> int:
    """The final evaluation's seed: secret per run, shared by the arms of one (task, seed)."""
    return int(hashlib.sha256(f"{run_id}/{task}/{seed}".encode()).hexdigest()[:8], 16)


def episode_id(task: str, arm: str, guidance: str, seed: int) -> str:
    return f"{task}.{arm}" + (f"-{guidance}" if arm == "guided" else "") + f".s{seed}"


def plan_llm(config: RunConfig, run_id: str) -> list[EpisodeSpec]:
    """Task-major, then seed, then arm: the paired arms of a (task, seed) run side by side."""
    out = []
    for task in config.tasks:
        for seed in range(config.seeds):
            for arm in config.arms:
                guidance = config.guidance if arm == "guided" else "none"
                out.append(EpisodeSpec(run_id=run_id, episode_id=episode_id(task, arm, guidance, seed), agent="llm",
                                       model=config.model, task=task, arm=arm, guidance=guidance, seed=seed,
                                       eval_seed=eval_seed(run_id, task, seed)))
    return out


def plan_reference(config: RunConfig, run_id: str, suite: Suite, device: str) -> list[EpisodeSpec]:
    """One episode per task, seed and expert kernel (Triton always; CUDA where the file exists and a GPU runs)."""
    out = []
    for task in config.tasks:
        langs = ["triton"] + (["cuda"] if device == "cuda" and "cuda" in suite.reference_kernels(task) else [])
        for seed in range(config.seeds):
            for lang in langs:
                out.append(EpisodeSpec(run_id=run_id, episode_id=f"{task}.reference-{lang}.s{seed}",
                                       agent="reference", model=f"reference/{lang}", task=task, arm="guided",
                                       guidance="all", seed=seed, eval_seed=eval_seed(run_id, task, seed), lang=lang))
    return out


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def plan_replay(config: RunConfig, run_id: str) -> list[EpisodeSpec]:
    """Every episode of the replayed run (of the chosen tasks), with its final submission."""
    src = Path(config.from_run or "")
    try:
        episodes = load_run(src)["episodes"]
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    out = []
    for r in episodes.to_dict("records"):
        if config.tasks != ["all"] and r["task"] not in config.tasks:
            continue
        if r["status"] in UNSCORED_STATUSES:  # no answer of the agent to replay
            continue
        out.append(EpisodeSpec(run_id=run_id, episode_id=r["episode_id"], agent="replay", model=r["model"],
                               task=r["task"], arm=r["arm"], guidance=r["guidance"], seed=int(r["seed"]),
                               eval_seed=eval_seed(run_id, r["task"], int(r["seed"])), source_run=str(src),
                               source_kernel=_text(r["kernel_path"]), source_design_note=_text(r["design_note_path"]),
                               source_status=r["status"]))
    return out


# ---------------------------------------------------------------------- the run


def _check_task_versions(store: RunStore, stored: dict[str, str], now: dict[str, str], *, agent: str) -> None:
    """Refuse to mix episodes of a task whose files changed; a reference run redoes that task's episodes."""
    statuses = store.episode_statuses()
    done_tasks = {eid.split(".", 1)[0] for eid in statuses}
    changed = sorted(t for t in now if t in stored and stored[t] != now[t] and t in done_tasks)
    if not changed:
        return
    if agent == "reference":  # a validation of the suite: stale results are redone, not kept
        sink = LocalSink(store)
        for eid in statuses:
            if eid.split(".", 1)[0] in changed:
                sink.reset_episode(eid)
        log.warning("task(s) %s changed since their reference episodes ran; running them again", changed)
        return
    raise UserError(f"the files of task(s) {changed} changed since this run's episodes of them ran (tasks/ or "
                    "references/ differ), so new episodes would not be comparable; use a new --out")


def _check_tasks(suite: Suite, config: RunConfig, tasks: list[str]) -> None:
    """Refuse a task fault before any episode: one line per problem, naming the file and the field."""
    from d2kgrade.validate import check_task_evaluable

    if config.agent == "llm":
        unevaluable = [t for t in tasks if not os.path.lexists(suite.reference_py(t))]
        if unevaluable:
            raise UserError(f"task(s) {unevaluable} have no reference.py yet, so no kernel for them can be "
                            "evaluated; choose other --tasks")
    problems = []
    for t in (tasks if tasks != ["all"] else suite.task_ids):
        try:
            check_task_evaluable(suite, t, kernels=("triton",) if config.agent == "reference" else ())
        except SpecError as exc:
            problems += exc.problems
    if problems:
        raise SpecError(problems)


def _preflight(config: RunConfig, api_key: str) -> None:
    from runner.agent.llm import EndpointUnusable, preflight

    try:
        log.info("%s", preflight(base_url=config.base_url, api_key=api_key, model=config.model or ""))
    except EndpointUnusable as exc:
        raise UserError(f"{exc}; no episode was run") from None


def _sweep(out: Path) -> None:
    """Temporary folders of dead d2kgrade processes, and half-written files of a killed session in ``out``."""
    removed = sweep_stale_tempdirs()
    if removed:
        log.info("removed %d temporary folder(s) left by ended processes (e.g. %s)", len(removed), removed[0])
    for p in list(out.glob(".*.tmp")) + list((out / "episodes").glob("*/.*.tmp")):
        p.unlink(missing_ok=True)  # atomic_write_text's temporaries: never renamed into place, so never read


def run(config: RunConfig, out: Path, *, suite_root: Path, argv: list[str] | None = None,
        on_event: EventFn | None = None, evaluate_fn: Any = None, chat_client_factory: Any = None,
        cancel: threading.Event | None = None, api_key: str | None = None, preflight: bool | None = None,
        on_warning: Callable[[str], None] | None = None) -> RunResult:
    """Plan, resume and execute a run into ``out``, holding ``out``'s writer lock throughout.

    Before anything is planned or written: the tasks are checked (task faults are refused, never blamed on an
    episode), the evaluator's dependencies are looked up, and for ``--agent llm`` one pre-flight request goes to
    the endpoint (``preflight``: default on unless a ``chat_client_factory`` stands in for the API).

    Raises:
        UserError: unknown tasks, a missing API key, a dead endpoint, settings that differ from the run's, a
            changed task; RunStoreError: another writer holds ``out``, or its store is damaged; SpecError: a task
            fault; MissingDependencyError: no torch/triton for a local evaluation.
    """
    from runner.agent.loop import api_key_from_env

    warn = on_warning or (lambda msg: log.warning("%s", msg))
    suite = Suite(suite_root)
    if config.agent == "replay":
        src = Path(config.from_run or "").expanduser().resolve()
        config = config.model_copy(update={"from_run": str(src)})
        tasks = config.tasks if config.tasks == ["all"] else suite.resolve_ids(config.tasks)
    else:
        tasks = suite.resolve_ids(config.tasks)
    _check_tasks(suite, config, tasks)
    api_key = api_key or api_key_from_env()
    if config.agent == "llm" and not api_key:
        raise UserError("no API key: set D2KGRADE_API_KEY or OPENAI_API_KEY (any value for a local server "
                        "that needs none)")
    if evaluate_fn is None and config.executor == "local":
        require_extra(("torch", "triton"), "gpu")
    if config.executor == "ray":
        require_extra(("ray",), "ray")
    device = config.device or detect_device()
    config = config.model_copy(update={"tasks": tasks, "device": device})
    if config.agent == "llm" and (preflight if preflight is not None else chat_client_factory is None):
        _preflight(config, api_key or "")
    out = Path(out)
    lock = RunLock(out)
    taken_over = lock.acquire()
    if taken_over:
        warn(taken_over)
    try:
        _sweep(out)
        return _run_locked(config, out, suite=suite, tasks=tasks, device=device, argv=argv, on_event=on_event,
                           evaluate_fn=evaluate_fn, chat_client_factory=chat_client_factory, cancel=cancel,
                           api_key=api_key)
    finally:
        lock.release()


def _run_locked(config: RunConfig, out: Path, *, suite: Suite, tasks: list[str], device: str,
                argv: list[str] | None, on_event: EventFn | None, evaluate_fn: Any, chat_client_factory: Any,
                cancel: threading.Event | None, api_key: str | None) -> RunResult:
    store = RunStore(out)
    existing = store.get_run()
    sv = suite_version(suite.root)
    task_ids = tasks if tasks != ["all"] else suite.task_ids
    tv = {t: task_version(suite.root, t) for t in task_ids}
    if existing is not None:
        merged = merge_for_resume(json.loads(existing["config_json"]), config)
        stored_tv = json.loads(existing["task_versions_json"])
        _check_task_versions(store, stored_tv, tv, agent=config.agent)
        run_id = existing["run_id"]
        tv = {**stored_tv, **tv}
    else:
        merged = config
        run_id = uuid.uuid4().hex[:12]
    env_info = environment(suite.root, device)
    store.put_run(run_id=run_id, model=config.model, agent=config.agent, suite_version=sv, task_versions=tv,
                  config=merged.model_dump(mode="json"), env=env_info)
    if config.agent == "llm":
        plan = plan_llm(config, run_id)
    elif config.agent == "reference":
        plan = plan_reference(config, run_id, suite, device)
    else:
        plan = plan_replay(config, run_id)
    statuses = store.episode_statuses()
    done = store.done_episode_ids()
    todo = [s for s in plan if s.episode_id not in done]
    on_event = on_event or (lambda kind, eid, info: None)
    on_event("plan", "", {"total": len(plan), "done": len(plan) - len(todo), "episodes": [s.episode_id for s in todo]})
    session = store.start_session(run_id=run_id, argv=list(argv if argv is not None else sys.argv),
                                  config=config.model_dump(mode="json"), env=env_info, suite_version=sv,
                                  planned=len(plan))
    ctx = ExecContext(config=config, run_dir=out, store=store, suite_root=suite.root,
                      hardware=hardware(device, config.gpus) if config.executor == "local" else {"device": device},
                      env_info=env_info, suite_version=sv, task_versions=tv, session_id=session, api_key=api_key,
                      on_event=on_event, cancel=cancel or threading.Event(),
                      attempts={s.episode_id: store.episode_attempts(s.episode_id) + 1 if statuses.get(s.episode_id)
                                else 1 for s in todo},
                      evaluate_fn=evaluate_fn, chat_client_factory=chat_client_factory)
    rows: list[dict[str, Any]] = []
    status = "interrupted"
    try:
        if config.executor == "ray":
            from runner.executors.ray import run_ray

            rows = run_ray(todo, ctx)
        else:
            from runner.executors.local import run_local

            rows = run_local(todo, ctx)
        status = "interrupted" if ctx.cancel.is_set() else "completed"
    finally:
        store.end_session(session, status=status)
    store.close()  # only once every episode thread is done with it (an interrupted session leaves it open)
    return RunResult(out, run_id, merged, len(plan), len(plan) - len(todo), rows, interrupted=status != "completed")
