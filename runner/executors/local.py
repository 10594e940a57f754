"""The local executor: many episodes in flight on threads, one evaluation lane per GPU.

Episodes spend most of their time waiting on the model, so ``concurrency`` of them run on threads at once;
their evaluations queue for the lanes (:class:`~runner.agent.evaluation.Lanes`: one per GPU in ``--gpus``, or
``cpu_lanes`` on CPU), each held for the whole evaluation, so a timing never overlaps other work of the run on
its GPU. Stopping (``cancel`` set, e.g. on Ctrl-C) lets running episodes end at their next model call without
writing a row; a resume runs them again.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
from typing import Any

from d2kgrade.suite import Suite
from runner.agent.episode import EpisodeEnv, EpisodeSpec, run_episode
from runner.agent.evaluation import LaneEvaluator, Lanes, lane_devices
from runner.agent.llm import Cancelled
from runner.agent.recorder import LocalSink, episode_dir_rel

log = logging.getLogger(__name__)


def run_local(todo: list[EpisodeSpec], ctx: Any) -> list[dict[str, Any]]:
    """Run ``todo`` on this machine; returns the rows of the episodes that ended."""
    if not todo:
        return []
    cfg = ctx.config
    lanes = Lanes(lane_devices(cfg.device or "cpu", cfg.gpus, cfg.cpu_lanes))
    evaluator = LaneEvaluator(lanes, ctx.suite_root, ctx.evaluate_fn)
    sink = LocalSink(ctx.store, on_turn=lambda eid, turn, row: ctx.on_event("turn", eid, {"turn": turn}))
    suite = Suite(ctx.suite_root)
    tasks = {t: suite.load_task(t) for t in sorted({s.task for s in todo})}

    def one(spec: EpisodeSpec) -> dict[str, Any] | None:
        if ctx.cancel.is_set():
            return None
        sink.reset_episode(spec.episode_id)
        ctx.on_event("start", spec.episode_id, {"task": spec.task, "arm": spec.arm})
        env = EpisodeEnv(config=cfg, suite_root=ctx.suite_root, task=tasks[spec.task], hardware=ctx.hardware,
                         evaluator=evaluator, sink=sink,
                         workspace_dir=ctx.run_dir / episode_dir_rel(spec.episode_id) / "workspace",
                         env_info=ctx.env_info, suite_version=ctx.suite_version,
                         task_version=ctx.task_versions.get(spec.task, ""), session_id=ctx.session_id,
                         attempt=ctx.attempts.get(spec.episode_id, 1), api_key=ctx.api_key, cancel=ctx.cancel,
                         chat_client_factory=ctx.chat_client_factory)
        try:
            row = run_episode(spec, env)
        except Cancelled:
            ctx.on_event("cancelled", spec.episode_id, {})
            return None
        ctx.on_event("end", spec.episode_id, row)
        return row

    rows: list[dict[str, Any]] = []
    pool = cf.ThreadPoolExecutor(max_workers=min(cfg.concurrency, len(todo)), thread_name_prefix="episode")
    try:
        futures = [pool.submit(one, spec) for spec in todo]
        for fut in cf.as_completed(futures):
            row = fut.result()
            if row is not None:
                rows.append(row)
    except BaseException:
        ctx.cancel.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return rows
