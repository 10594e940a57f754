"""The Ray executor on a local CPU cluster: the same records as the local executor, and resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from d2kgrade.runstore import load_run
from runner.run import run
from tests.fakes.openai_server import FakeOpenAI
from tests.runner_agent.helpers import ROOT, config, marker_evaluate, step, tool_call

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'd2kgrade[ray]')")


def _agent(body: dict) -> dict:
    n = sum(1 for m in body["messages"] if m["role"] == "assistant")
    moves = [{"content": "design"},
             step(tool_call("write_file", path="kernel.py", content="def kernel(x):\n    return x\n")),
             step(tool_call("test")), step(tool_call("submit")), {"content": "done"}]
    return moves[min(n, 4)]


@pytest.mark.slow
def test_ray_executor_records_and_resume(tmp_path: Path):
    out = tmp_path / "run"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    try:
        with FakeOpenAI(responder=_agent) as srv:
            cfg = config(srv.base_url, executor="ray", arms=["unguided", "guided"], concurrency=4)
            res = run(cfg, out, suite_root=ROOT, evaluate_fn=marker_evaluate)
            assert sorted(r["episode_id"] for r in res.rows) == ["softmax.guided-all.s0", "softmax.unguided.s0"]
            again = run(cfg, out, suite_root=ROOT, evaluate_fn=marker_evaluate)
            more = run(cfg.model_copy(update={"seeds": 2}), out, suite_root=ROOT, evaluate_fn=marker_evaluate)
    finally:
        ray.shutdown()
    assert again.rows == [] and again.already_done == 2
    assert sorted(r["episode_id"] for r in more.rows) == ["softmax.guided-all.s1", "softmax.unguided.s1"]
    data = load_run(out)
    eps = data["episodes"]
    assert len(eps) == 4 and eps.status.eq("finished").all() and eps.correct.all()
    assert data["turns"].groupby("episode_id").size().eq(5).all()
    assert len(data["evaluations"]) == 8 and set(data["workloads"].workload) == {"smoke", "hidden"}
    for r in eps.itertuples():
        assert (out / r.kernel_path).read_text() == "def kernel(x):\n    return x\n"
        assert (out / r.transcript_path).read_text().count("\n") >= 10
        assert (out / r.design_note_path).read_text() == "design\n"
