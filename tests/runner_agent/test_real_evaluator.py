"""End to end with the real evaluator (runner.evaluate: sandboxed worker, Triton interpreter on CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from d2kgrade.cli import app
from d2kgrade.runstore import load_run
from runner.run import run
from tests.fakes.openai_server import FakeOpenAI
from tests.runner_agent.helpers import BUGGY_SOFTMAX, FIXED_SOFTMAX, ROOT, config, step, tool_call

pytest.importorskip("runner.evaluate", reason="the evaluator (runner/evaluate.py) is not there yet")


def test_agent_fixes_a_buggy_kernel_with_the_real_evaluator(tmp_path: Path):
    """Writes a buggy kernel, tests it, reads the failure, fixes it, tests, benchmarks, submits (CPU, smoke)."""
    script = [{"content": "Design: one row per program, row in registers."},
              step(tool_call("write_file", path="kernel.py", content=BUGGY_SOFTMAX), tool_call("test")),
              step(tool_call("read_file", path="kernel.py", start_line=11, max_lines=1)),
              step(tool_call("write_file", path="kernel.py", content=FIXED_SOFTMAX), tool_call("test")),
              step(tool_call("benchmark"), tool_call("submit")),
              {"content": "done"}]
    out = tmp_path / "run"
    with FakeOpenAI(script) as srv:
        res = run(config(srv.base_url, eval_timeout_s=240), out, suite_root=ROOT)
    tool_results = [[m["content"] for m in r["messages"] if m["role"] == "tool"] for r in srv.requests]
    failure = tool_results[2][-1]
    assert failure.startswith("test kernel.py (kernel version 1): incorrect")
    assert "out of tolerance" in failure and "max abs err" in failure and "first bad index" in failure
    assert str(ROOT) not in failure  # harness paths never reach the agent
    assert "other=0.0" in tool_results[3][-1]  # read_file showed the offending line
    assert tool_results[4][-1].startswith("test kernel.py (kernel version 2): passed")
    bench, submitted = tool_results[5][-2:]
    assert "timing unavailable" in bench and "CPU" in bench
    assert submitted.startswith("submitted kernel.py (kernel version 2") and "last test: passed" in submitted
    row = res.rows[0]
    assert (row["status"], row["final_status"], row["correct"]) == ("finished", "passed", True), row["message"]
    data = load_run(out)
    evals = data["evaluations"].sort_values("eval_id")
    assert list(zip(evals.kind, evals.status, evals.kernel_version, strict=True)) == [
        ("test", "incorrect", 1), ("test", "passed", 2), ("benchmark", "passed", 2), ("final", "passed", 2)]
    assert set(data["workloads"].workload) == {"smoke", "hidden"} and data["workloads"].time_ms.isna().all()
    final = json.loads(evals.set_index("kind").loc["final", "result_json"])
    assert final["environment"]["interpreter"] is True and final["seed_hash"]
    assert (out / row["kernel_path"]).read_text() == FIXED_SOFTMAX


def test_reference_agent_validates_the_suite_end_to_end(tmp_path: Path):
    """The main job on one task: the expert kernel through the CLI, the real evaluator, the records."""
    out = tmp_path / "ref"
    res = CliRunner().invoke(app, ["run", "--agent", "reference", "--tasks", "softmax", "--device", "cpu",
                                   "--out", str(out)])
    eps = load_run(out)["episodes"]
    assert list(eps.episode_id) == ["softmax.reference-triton.s0"]
    ep = eps.iloc[0]
    assert ep.model == "reference/triton" and ep.agent == "reference" and ep.status == "finished"
    assert (out / ep.kernel_path).read_text() == (ROOT / "references" / "softmax" / "triton.py").read_text()
    assert "softmax.reference-triton.s0" in res.stdout
    assert f"{int(ep.correct)} of 1 expert kernels passed" in res.stdout
    assert res.exit_code == (0 if ep.correct else 1)
    assert ep.correct, f"the expert softmax kernel did not pass: {ep.final_status}: {ep.message}"
