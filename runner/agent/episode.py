"""One episode: what it is (:class:`EpisodeSpec`), what it runs with (:class:`EpisodeEnv`), and how it ends.

Every agent ends the same way: the last submission (if any) gets its final evaluation on every workload plus the
hidden one, and :func:`finish` writes the episode row, that evaluation and its workload rows in one transaction.
An exception out of an agent is an internal fault: the episode is written as ``failed`` (a resume runs it again),
and the run goes on. :class:`~runner.agent.llm.Cancelled` writes nothing: a stopped run resumes that episode.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from d2kgrade.records import EvalResult
from d2kgrade.runstore import now_iso
from d2kgrade.schema import Task
from runner.agent.config import RunConfig
from runner.agent.evaluation import EvalRequest, EvaluationRefused, Evaluator, EvaluatorFault
from runner.agent.llm import Cancelled
from runner.agent.recorder import EpisodeRecorder, Sink

log = logging.getLogger(__name__)


class EpisodeSpec(BaseModel):
    """What one episode is; picklable, so a Ray worker can receive it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    episode_id: str
    agent: str
    model: str | None
    task: str
    arm: str
    guidance: str
    seed: int
    eval_seed: int
    """Seed of the final evaluation (the hidden workload's draw): shared by the paired arms of a task and seed."""
    lang: str | None = None
    """``reference``: which expert kernel (``triton``, ``cuda``)."""
    source_run: str | None = None
    """``replay``: the replayed run directory."""
    source_kernel: str | None = None
    """``replay``: the submission to re-evaluate, relative to ``source_run``."""
    source_design_note: str | None = None
    """``replay``: the design note, relative to ``source_run``."""
    source_status: str | None = None
    """``replay``: the replayed episode's status."""


@dataclass
class EpisodeEnv:
    """What an episode runs with, built by the executor where the episode runs."""

    config: RunConfig
    suite_root: Path
    task: Task
    hardware: dict[str, Any]
    evaluator: Evaluator
    sink: Sink
    workspace_dir: Path
    env_info: dict[str, Any]
    suite_version: str
    task_version: str
    session_id: int | None = None
    attempt: int = 1
    api_key: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    chat_client_factory: Any = None
    """Tests may inject a client factory; None builds :class:`~runner.agent.llm.ChatClient`."""


@dataclass
class Tally:
    """Counters of an episode, filled as it goes."""

    started: float = field(default_factory=time.monotonic)
    started_at: str = field(default_factory=now_iso)
    turns: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = math.nan
    tool_calls: int = 0
    submissions: int = 0

    def wall_s(self) -> float:
        return time.monotonic() - self.started

    def add_cost(self, cost: float) -> None:
        if not math.isnan(cost):
            self.cost_usd = cost if math.isnan(self.cost_usd) else self.cost_usd + cost


def _nan(v: float | None) -> float:
    return math.nan if v is None else float(v)


def workload_rows(result: EvalResult, eval_id: int) -> list[dict[str, Any]]:
    """``workloads`` rows of a final evaluation (NaN where not timed)."""
    return [{"eval_id": eval_id, "workload": w.name, "status": w.status,
             "time_ms": _nan(w.time.median_ms if w.time else None),
             "eager_ms": _nan(w.eager.median_ms if w.eager else None),
             "compiled_ms": _nan(w.compiled.median_ms if w.compiled else None),
             "speedup_eager": _nan(w.speedup_eager), "speedup_compiled": _nan(w.speedup_compiled),
             "roofline_floor_ms": _nan(w.roofline_floor_ms), "roofline_fraction": _nan(w.roofline_fraction),
             "params_json": json.dumps(w.params), "message": w.message[:2000]} for w in result.workloads]


@dataclass
class Final:
    """The final evaluation of an episode's last submission."""

    status: str = "no_submission"
    correct: bool = False
    message: str = ""
    """The evaluator's summary (why it did not pass)."""
    evaluation: dict[str, Any] | None = None
    workloads: list[dict[str, Any]] = field(default_factory=list)


def final_evaluation(env: EpisodeEnv, spec: EpisodeSpec, *, source: str, filename: str, version: int | None,
                     eval_id: int, turn: int) -> Final:
    """Evaluate the submission on every workload plus the hidden one. Raises EvaluatorFault."""
    t0 = time.monotonic()
    result = env.evaluator.evaluate(EvalRequest(spec.task, source, filename, workloads="all", seed=spec.eval_seed,
                                                hidden=True, timing=True, timeout_s=env.config.eval_timeout_s))
    row = {"eval_id": eval_id, "turn": turn, "kind": "final", "kernel_version": version,
           "workloads_requested": json.dumps("all+hidden"), "status": result.status, "correct": result.correct,
           "wall_s": time.monotonic() - t0, "result_json": result.model_dump_json()}
    return Final(result.status, bool(result.correct), result.message, row, workload_rows(result, eval_id))


def finish(env: EpisodeEnv, spec: EpisodeSpec, rec: EpisodeRecorder, tally: Tally, *, status: str, final: Final,
           message: str = "", design_note_path: str | None = None, kernel_path: str | None = None,
           transcript: bool = True) -> dict[str, Any]:
    """Write the ended episode; returns its row."""
    row = {"model": spec.model, "agent": spec.agent, "arm": spec.arm, "guidance": spec.guidance, "task": spec.task,
           "seed": spec.seed, "status": status, "turns": tally.turns, "tokens_in": tally.tokens_in,
           "tokens_out": tally.tokens_out, "cost_usd": tally.cost_usd, "wall_s": tally.wall_s(),
           "final_status": final.status, "correct": final.correct, "design_note_path": design_note_path,
           "kernel_path": kernel_path, "transcript_path": rec.transcript_path if transcript else None,
           "submissions": tally.submissions, "tool_calls": tally.tool_calls, "message": message[:4000],
           "suite_version": env.suite_version, "task_version": env.task_version,
           "config_json": env.config.model_dump_json(), "env_json": json.dumps(env.env_info, sort_keys=True),
           "session_id": env.session_id, "attempt": env.attempt, "started_at": tally.started_at,
           "ended_at": now_iso()}
    rec.finish(row, final.evaluation, final.workloads)
    return {"run_id": spec.run_id, "episode_id": spec.episode_id, **row}


def run_episode(spec: EpisodeSpec, env: EpisodeEnv) -> dict[str, Any]:
    """Run one episode to its end and write it; returns the episode row. Raises only Cancelled."""
    rec = EpisodeRecorder(env.sink, spec.run_id, spec.episode_id)
    tally = Tally()
    try:
        if spec.agent == "llm":
            from runner.agent.loop import run_llm_episode

            return run_llm_episode(spec, env, rec, tally)
        from runner.agent.scripted import run_reference_episode, run_replay_episode

        if spec.agent == "reference":
            return run_reference_episode(spec, env, rec, tally)
        if spec.agent == "replay":
            return run_replay_episode(spec, env, rec, tally)
        raise ValueError(f"unknown agent {spec.agent!r}")
    except Cancelled:
        raise
    except Exception as exc:  # an internal fault: the episode fails, the run goes on
        log.exception("episode %s failed", spec.episode_id)
        rec.transcript({"event": "internal_error", "error": traceback.format_exc()[-4000:]})
        kind = ("evaluator fault" if isinstance(exc, EvaluatorFault) else
                "the evaluator refused" if isinstance(exc, EvaluationRefused) else "internal error")
        return finish(env, spec, rec, tally, status="failed", final=Final(),
                      message=f"{kind}: {type(exc).__name__}: {exc}")
