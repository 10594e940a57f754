"""The Ray executor: episodes as Ray tasks across a cluster, with the local executor's records and resume.

- **Records.** One actor (:class:`_SinkActor`), pinned to the driver's node, owns the run directory's writes:
  it wraps the same :class:`~runner.agent.recorder.LocalSink` the local executor uses, so rows, transcripts and
  kernel files land in the same RUN_DIR, one transaction per ended episode. Calls from one episode reach the actor
  in order; an episode's final write waits for the actor, so an episode counts as ended only once it is stored.
- **Evaluation lanes.** Each evaluation (and each profile or sanitizer run) is a Ray task with ``num_gpus=1`` on GPU clusters:
  Ray gives it a GPU of its own for its whole duration, so timings never overlap other work of the run on that
  GPU. On CPU each evaluation takes ``num_cpus=1``.
- **Episodes** are tasks with ``num_cpus=0`` (they wait on the model); the driver keeps ``concurrency`` of them
  in flight and polls the actor for turn progress. Workspaces live in a temporary folder on the worker's node.
- **Cluster.** ``--address`` connects to a running cluster (``auto``, ``ray://head:10001``); without it a local
  one starts. The suite must be at the same path on every node (or installed with d2kgrade, the default suite).
  An episode whose worker dies writes no row; a resume runs it again.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

from d2kgrade.errors import MissingDependencyError
from d2kgrade.io import private_tempdir
from d2kgrade.records import EvalResult
from d2kgrade.runstore import RunStore
from runner.agent.evaluation import (EvalRequest, ProfileRequest, SanitizeRequest, call_evaluate, call_sanitize,
                                     default_evaluate_fn)
from runner.agent.recorder import LocalSink

log = logging.getLogger(__name__)


class _SinkActor:
    """Owns RUN_DIR's writes on the driver's node (wrapped by ``ray.remote`` at run time)."""

    def __init__(self, run_dir: str) -> None:
        self.sink = LocalSink(RunStore(Path(run_dir)))

    def write_text(self, rel: str, text: str) -> None:
        self.sink.write_text(rel, text)

    def append_jsonl(self, rel: str, obj: dict[str, Any]) -> None:
        self.sink.append_jsonl(rel, obj)

    def add(self, table: str, row: dict[str, Any]) -> None:
        self.sink.add(table, row)

    def finish_episode(self, episode: dict[str, Any], final: dict[str, Any] | None,
                       workloads: list[dict[str, Any]]) -> None:
        self.sink.finish_episode(episode, final, workloads)

    def progress(self) -> dict[str, int]:
        return self.sink.progress()


class RaySink:
    """The :class:`~runner.agent.recorder.Sink` of a remote episode: forwards to the sink actor."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def write_text(self, rel: str, text: str) -> None:
        self.handle.write_text.remote(rel, text)

    def append_jsonl(self, rel: str, obj: dict[str, Any]) -> None:
        self.handle.append_jsonl.remote(rel, obj)

    def add(self, table: str, row: dict[str, Any]) -> None:
        self.handle.add.remote(table, row)

    def finish_episode(self, episode: dict[str, Any], final: dict[str, Any] | None,
                       workloads: list[dict[str, Any]]) -> None:
        import ray

        ray.get(self.handle.finish_episode.remote(episode, final, workloads))


def _eval_task(req: EvalRequest, suite_root: str, device: str, evaluate_fn: Any) -> EvalResult:
    # Ray has set CUDA_VISIBLE_DEVICES to this task's one GPU, so it is cuda:0 here.
    fn = evaluate_fn or default_evaluate_fn()
    return call_evaluate(fn, req, suite_root=Path(suite_root), device="cuda:0" if device == "cuda" else "cpu")


def _profile_task(req: ProfileRequest, suite_root: str, device: str) -> str:
    from runner.agent.profile import profile_source

    return profile_source(req, Path(suite_root), "cuda:0" if device == "cuda" else "cpu")


def _sanitize_task(req: SanitizeRequest, suite_root: str, device: str) -> dict[str, Any]:
    return call_sanitize(req, suite_root=Path(suite_root), device="cuda:0" if device == "cuda" else "cpu")


class RayEvaluator:
    """Evaluations as Ray tasks holding one GPU (or one CPU) each."""

    def __init__(self, suite_root: Path, device: str, evaluate_fn: Any = None) -> None:
        import ray

        self.device = device
        self.suite_root = str(suite_root)
        self.evaluate_fn = evaluate_fn
        gpus, cpus = (1, 0) if device == "cuda" else (0, 1)
        self._eval = ray.remote(max_retries=0, num_gpus=gpus, num_cpus=cpus)(_eval_task)
        self._prof = ray.remote(max_retries=0, num_gpus=gpus, num_cpus=cpus)(_profile_task)
        self._san = ray.remote(max_retries=0, num_gpus=gpus, num_cpus=cpus)(_sanitize_task)

    def evaluate(self, req: EvalRequest) -> EvalResult:
        import ray

        return ray.get(self._eval.remote(req, self.suite_root, self.device, self.evaluate_fn))

    def profile(self, req: ProfileRequest) -> str:
        import ray

        return ray.get(self._prof.remote(req, self.suite_root, self.device))

    def sanitize(self, req: SanitizeRequest) -> dict[str, Any]:
        import ray

        return ray.get(self._san.remote(req, self.suite_root, self.device))


def _episode_task(spec: Any, shared: dict[str, Any], sink_handle: Any, api_key: str | None) -> dict[str, Any]:
    from d2kgrade.suite import Suite
    from runner.agent.episode import EpisodeEnv, run_episode

    cfg = shared["config"]
    tmp = private_tempdir("ep")  # the workspace, on the worker's node
    try:
        env = EpisodeEnv(config=cfg, suite_root=Path(shared["suite_root"]),
                         task=Suite(Path(shared["suite_root"])).load_task(spec.task), hardware=shared["hardware"],
                         evaluator=RayEvaluator(Path(shared["suite_root"]), cfg.device or "cpu",
                                                shared["evaluate_fn"]),
                         sink=RaySink(sink_handle), workspace_dir=tmp / "workspace",
                         env_info=shared["env_info"], suite_version=shared["suite_version"],
                         task_version=shared["task_versions"].get(spec.task, ""), session_id=shared["session_id"],
                         attempt=shared["attempts"].get(spec.episode_id, 1), api_key=api_key,
                         chat_client_factory=shared["chat_client_factory"])
        return run_episode(spec, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _probe_gpu() -> str:
    import torch

    return torch.cuda.get_device_name(0)


def run_ray(todo: list[Any], ctx: Any) -> list[dict[str, Any]]:
    """Run ``todo`` on a Ray cluster; returns the rows of the episodes that ended."""
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError:
        raise MissingDependencyError("ray", "ray") from None
    if not todo:
        return []
    cfg = ctx.config
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=cfg.address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        node = ray.get_runtime_context().get_node_id()
        actor_cls = ray.remote(num_cpus=0, max_concurrency=1)(_SinkActor)  # type: ignore[call-overload]
        sink = actor_cls.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(
            str(Path(ctx.run_dir).resolve()))
        hardware = dict(ctx.hardware)
        if cfg.device == "cuda":
            from runner.agent.prompts import gpu_ceilings

            name = ray.get(ray.remote(num_gpus=1)(_probe_gpu).remote())
            hardware = {"device": "cuda", "gpu": name, "ceilings": gpu_ceilings(name)}
        shared = {"config": cfg, "suite_root": str(ctx.suite_root), "hardware": hardware, "env_info": ctx.env_info,
                  "suite_version": ctx.suite_version, "task_versions": ctx.task_versions,
                  "session_id": ctx.session_id, "attempts": ctx.attempts, "evaluate_fn": ctx.evaluate_fn,
                  "chat_client_factory": ctx.chat_client_factory}
        shared_ref = ray.put(shared)
        episode_fn = ray.remote(num_cpus=0, max_retries=0)(_episode_task)
        local = LocalSink(ctx.store)
        pending = list(todo)
        running: dict[Any, Any] = {}
        rows: list[dict[str, Any]] = []
        last_turns: dict[str, int] = {}
        try:
            while pending or running:
                while pending and len(running) < cfg.concurrency and not ctx.cancel.is_set():
                    spec = pending.pop(0)
                    local.reset_episode(spec.episode_id)
                    ctx.on_event("start", spec.episode_id, {"task": spec.task, "arm": spec.arm})
                    running[episode_fn.remote(spec, shared_ref, sink, ctx.api_key)] = spec
                if not running:
                    break
                done, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
                for eid, turn in ray.get(sink.progress.remote()).items():
                    if last_turns.get(eid) != turn:
                        last_turns[eid] = turn
                        ctx.on_event("turn", eid, {"turn": turn})
                for ref in done:
                    spec = running.pop(ref)
                    try:
                        row = ray.get(ref)
                    except Exception as exc:  # a worker died: no row, a resume reruns the episode
                        log.error("episode %s lost on the cluster: %s", spec.episode_id, exc)
                        ctx.on_event("cancelled", spec.episode_id, {})
                        continue
                    rows.append(row)
                    ctx.on_event("end", spec.episode_id, row)
        except BaseException:
            ctx.cancel.set()
            for ref in running:
                ray.cancel(ref, force=True)
            raise
        ray.get(sink.progress.remote())  # every write sent before the episodes ended has been applied
        return rows
    finally:
        if started_here:
            time.sleep(0.1)
            ray.shutdown()
