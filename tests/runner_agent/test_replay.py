"""``--agent replay``: another run's submissions re-evaluated, episode by episode, with the same identity."""

from __future__ import annotations

from pathlib import Path

from d2kgrade.runstore import load_run
from runner.run import run
from tests.fakes.openai_server import FakeOpenAI
from tests.runner_agent.helpers import CALLS, ROOT, config, marker_evaluate, step, tool_call


def _agent(body: dict) -> dict:
    guided = "## Expert guidance" in body["messages"][1]["content"]
    n = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if not guided:  # the unguided agent never submits
        return {"content": "design"} if n == 0 else {"content": "no"}
    moves = [{"content": "guided design"},
             step(tool_call("write_file", path="kernel.py", content="def kernel(x):\n    return x\n"),
                  tool_call("submit")),
             {"content": "done"}]
    return moves[min(n, 2)]


def test_replay_reevaluates_each_final_submission(tmp_path: Path):
    src, out = tmp_path / "src", tmp_path / "replay"
    with FakeOpenAI(responder=_agent) as srv:
        run(config(srv.base_url, arms=["unguided", "guided"], concurrency=1), src, suite_root=ROOT,
            evaluate_fn=marker_evaluate)
    CALLS.clear()
    res = run(config(agent="replay", model=None, from_run=str(src)), out, suite_root=ROOT,
              evaluate_fn=marker_evaluate)
    assert len(CALLS) == 1 and CALLS[0]["hidden"] is True and CALLS[0]["source"] == "def kernel(x):\n    return x\n"
    a = load_run(src)["episodes"].set_index("episode_id")
    b = load_run(out)["episodes"].set_index("episode_id")
    assert set(b.index) == set(a.index) == {"softmax.guided-all.s0", "softmax.unguided.s0"}
    for eid in b.index:
        assert (b.loc[eid, ["model", "arm", "guidance", "task", "seed"]] ==
                a.loc[eid, ["model", "arm", "guidance", "task", "seed"]]).all()
    assert set(b.agent) == {"replay"}
    g = b.loc["softmax.guided-all.s0"]
    assert g.correct and (out / g.kernel_path).read_text() == (src / a.loc[g.name, "kernel_path"]).read_text()
    assert (out / g.design_note_path).read_text() == "guided design\n"
    u = b.loc["softmax.unguided.s0"]
    assert u.status == "no_submission" and not u.correct and u.kernel_path is None
    assert len(res.rows) == 2 and run(config(agent="replay", model=None, from_run=str(src)), out, suite_root=ROOT,
                                      evaluate_fn=marker_evaluate).rows == []
