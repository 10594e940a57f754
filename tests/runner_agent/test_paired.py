"""The paired arms differ only in the guidance: every request of the two arms, compared."""

from __future__ import annotations

import copy
from pathlib import Path

from d2kgrade.runstore import load_run
from d2kgrade.schema import render_task
from d2kgrade.suite import Suite
from runner.agent.prompts import DESIGN_REQUEST, hardware_section
from runner.run import run
from tests.fakes.openai_server import FakeOpenAI
from tests.runner_agent.helpers import CALLS, ROOT, config, marker_evaluate, step, tool_call


def _responder(body: dict) -> dict:
    """The same agent in both arms: its next move depends only on how far the conversation is."""
    n_assistant = sum(1 for m in body["messages"] if m["role"] == "assistant")
    moves = [
        lambda: {"content": "Design: one row per program."},
        lambda: step(tool_call("write_file", "c1", path="kernel.py", content="def kernel(x):\n    return x  # BUG\n")),
        lambda: step(tool_call("test", "c2")),
        lambda: step(tool_call("write_file", "c3", path="kernel.py", content="def kernel(x):\n    return x.exp()\n")),
        lambda: step(tool_call("benchmark", "c4"), tool_call("submit", "c5")),
        lambda: {"content": "done"},
    ]
    return moves[min(n_assistant, len(moves) - 1)]()


def _guidance_free(text: str) -> str:
    """The prompt with its '## Expert guidance' section cut out (up to the next level-2 heading)."""
    start = text.find("## Expert guidance")
    if start < 0:
        return text
    end = text.find("\n## ", start + 1)
    return text[:start] + text[end + 1:]


def test_paired_arms_differ_only_in_the_guidance(tmp_path: Path):
    with FakeOpenAI(responder=_responder) as srv:
        res = run(config(srv.base_url, arms=["unguided", "guided"], guidance="L1-L2", concurrency=1),
                  tmp_path / "run", suite_root=ROOT, evaluate_fn=marker_evaluate)
    assert sorted(r["episode_id"] for r in res.rows) == ["softmax.guided-L1-L2.s0", "softmax.unguided.s0"]
    assert all(r["status"] == "finished" and r["correct"] for r in res.rows)

    task = Suite(ROOT).load_task("softmax")
    by_arm: dict[str, list[dict]] = {"guided": [], "unguided": []}
    for body in srv.requests:
        arm = "guided" if "## Expert guidance" in body["messages"][1]["content"] else "unguided"
        by_arm[arm].append(body)
    assert len(by_arm["guided"]) == len(by_arm["unguided"]) == 6

    # the task text is exactly what `d2kgrade tasks show --guidance ...` renders, then hardware and design ask
    hw = hardware_section({"device": "cpu"})
    assert by_arm["unguided"][0]["messages"][1]["content"] == render_task(task, "none") + "\n" + hw + "\n" + \
        DESIGN_REQUEST + "\n"
    assert by_arm["guided"][0]["messages"][1]["content"] == render_task(task, "L1-L2") + "\n" + hw + "\n" + \
        DESIGN_REQUEST + "\n"
    guided_prompt = by_arm["guided"][0]["messages"][1]["content"]
    assert "softmax.L2.tiled-two-sweep" in guided_prompt and "softmax.L3.exp2-fold" not in guided_prompt

    # every request of the guided arm, with the guidance section cut out, equals the unguided arm's request
    for g, u in zip(by_arm["guided"], by_arm["unguided"], strict=True):
        g2 = copy.deepcopy(g)
        g2["messages"][1]["content"] = _guidance_free(g2["messages"][1]["content"])
        assert g2 == u
    assert "tools" in by_arm["guided"][1] and by_arm["guided"][1]["tools"] == by_arm["unguided"][1]["tools"]

    eps = load_run(tmp_path / "run")["episodes"].set_index("arm")
    assert eps.loc["guided", "guidance"] == "L1-L2" and eps.loc["unguided", "guidance"] == "none"
    assert eps.loc["guided", "seed"] == eps.loc["unguided", "seed"]
    finals = [c for c in CALLS if c.get("hidden")]
    assert len(finals) == 2 and finals[0]["seed"] == finals[1]["seed"]  # both arms see the same hidden shape
