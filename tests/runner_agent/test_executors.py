"""The local executor: evaluation lanes never overlap on one GPU; many episodes wait on the model at once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from d2kgrade.runstore import load_run
from runner.agent.evaluation import EvalRequest, LaneEvaluator, Lanes
from runner.run import run
from tests.fakes.openai_server import FakeOpenAI
from tests.runner_agent.helpers import ROOT, config, marker_evaluate, step, tool_call


def test_one_evaluation_at_a_time_per_gpu_lane():
    spans: list[tuple[str, float, float]] = []
    lock = threading.Lock()

    def slow_evaluate(task_id, submission, *, device, **kw):
        start = time.monotonic()
        time.sleep(0.05)
        with lock:
            spans.append((device, start, time.monotonic()))
        return marker_evaluate(task_id, submission, device=device, **kw)

    evaluator = LaneEvaluator(Lanes(["cuda:0", "cuda:1"]), ROOT, slow_evaluate)
    threads = [threading.Thread(target=evaluator.evaluate, args=(EvalRequest("softmax", "def kernel(x): pass"),))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(spans) == 8 and {d for d, _, _ in spans} == {"cuda:0", "cuda:1"}
    for dev in ("cuda:0", "cuda:1"):
        mine = sorted((s, e) for d, s, e in spans if d == dev)
        pairs = zip(mine, mine[1:], strict=False)
        assert all(prev_end <= start for (_, prev_end), (start, _) in pairs), f"overlap on {dev}"
    assert evaluator.device == "cuda"


def test_many_episodes_in_flight(tmp_path: Path):
    active, peak, lock = [0], [0], threading.Lock()

    def agent(body: dict) -> dict:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.3)
        with lock:
            active[0] -= 1
        n = sum(1 for m in body["messages"] if m["role"] == "assistant")
        moves = [{"content": "design"},
                 step(tool_call("write_file", path="kernel.py", content="def kernel(x):\n    return x\n"),
                      tool_call("submit")),
                 {"content": "done"}]
        return moves[min(n, 2)]

    with FakeOpenAI(responder=agent) as srv:
        res = run(config(srv.base_url, arms=["unguided", "guided"], seeds=2, concurrency=4), tmp_path / "run",
                  suite_root=ROOT, evaluate_fn=marker_evaluate)
    assert len(res.rows) == 4 and all(r["correct"] for r in res.rows)
    assert peak[0] >= 3  # the model calls of different episodes overlapped
    assert len(load_run(tmp_path / "run")["episodes"]) == 4
