"""LLM episodes end to end: the fake OpenAI-compatible server plays the agent through the real openai client."""

from __future__ import annotations

import json
from pathlib import Path

from d2kgrade.runstore import load_run
from runner.agent.recorder import sent_requests
from runner.run import run
from tests.fakes.openai_server import FakeOpenAI
from tests.runner_agent.helpers import CALLS, ROOT, config, marker_evaluate, step, tool_call


def _tool_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_episode_loop_records_everything(tmp_path: Path):
    """The loop's bookkeeping with the marker evaluator (the real evaluator: test_real_evaluator.py)."""
    buggy, fixed = "def kernel(x):\n    return x  # BUG\n", "def kernel(x):\n    return x.softmax(-1)\n"
    script = [
        {"content": "Design: one program per row; the row stays in registers; max, exp, sum, scale; one store."},
        step(tool_call("write_file", path="kernel.py", content=buggy)),
        step(tool_call("test", workloads="smoke")),
        step(tool_call("read_file", path="kernel.py")),
        step(tool_call("write_file", path="kernel.py", content=fixed)),
        step(tool_call("test")),
        step(tool_call("benchmark"), tool_call("submit")),
        {"content": "Submitted; done."},
    ]
    out = tmp_path / "run"
    with FakeOpenAI(script) as srv:
        res = run(config(srv.base_url), out, suite_root=ROOT, evaluate_fn=marker_evaluate)
    assert len(srv.requests) == 8
    failure = _tool_messages(srv.requests[3])[-1]
    assert failure.startswith("test kernel.py (kernel version 1): incorrect (0 of 1 workloads passed)")
    assert "first bad index [4, 999]" in failure and "max abs err 0.25" in failure
    assert "# BUG" in _tool_messages(srv.requests[4])[-1]
    assert _tool_messages(srv.requests[6])[-1].startswith("test kernel.py (kernel version 2): passed")
    bench, submit = _tool_messages(srv.requests[7])[-2:]
    assert "timing unavailable" in bench and "correctness: smoke passed" in bench
    assert submit.startswith("submitted kernel.py (kernel version 2") and "last test: passed" in submit
    assert [(c["workloads"], c["hidden"], c["timing"]) for c in CALLS] == [
        ("smoke", False, False), ("all", False, False), ("all", False, True), ("all", True, True)]

    row = res.rows[0]
    assert (row["status"], row["final_status"], row["correct"]) == ("finished", "passed", True)
    run_data = load_run(out)
    ep = run_data["episodes"].iloc[0]
    assert ep.turns == 8 and ep.submissions == 1 and ep.tool_calls == 7
    assert (out / ep.kernel_path).read_text() == fixed
    assert "one program per row" in (out / ep.design_note_path).read_text()
    versions = run_data["kernel_versions"].sort_values("version")
    assert [(out / p).read_text() for p in versions.file_path] == [buggy, fixed]
    evals = run_data["evaluations"].sort_values("eval_id")
    assert list(zip(evals.kind, evals.status, evals.kernel_version, strict=True)) == [
        ("test", "incorrect", 1), ("test", "passed", 2), ("benchmark", "passed", 2), ("final", "passed", 2)]
    wl = run_data["workloads"].set_index("workload")
    assert set(wl.index) == {"smoke", "hidden"} and wl.time_ms.isna().all()
    transcript = [json.loads(x) for x in (out / ep.transcript_path).read_text().splitlines()]
    assert transcript[-1]["event"] == "end" and transcript[-1]["correct"] is True
    assert sum(1 for t in transcript if t.get("role") == "tool") == 7
    assert json.loads(ep.env_json)["python"] and json.loads(ep.config_json)["model"] == "fake-model"


def test_model_that_never_calls_a_tool_ends_without_submission(tmp_path: Path):
    with FakeOpenAI(responder=lambda body: {"content": "I would write a great kernel."}) as srv:
        res = run(config(srv.base_url), tmp_path / "run", suite_root=ROOT, evaluate_fn=marker_evaluate)
    row = res.rows[0]
    assert row["status"] == "no_submission" and row["final_status"] == "no_submission" and not row["correct"]
    assert row["turns"] == 4  # the design note, then three replies without a tool call
    nudges = [m["content"] for m in srv.requests[-1]["messages"] if m["role"] == "user"]
    assert any("called no tool" in n for n in nudges)
    assert CALLS == []  # nothing was evaluated


def test_malformed_arguments_unknown_tools_and_escapes_are_tool_errors(tmp_path: Path):
    outside = tmp_path / "outside.py"
    script = [
        {"content": "design"},
        step({"name": "write_file", "arguments": '{"path": "kernel.py", "content": '}),  # truncated JSON
        step(tool_call("write_file", path="kernel.py")),  # content missing
        step({"name": "compile_and_pray", "arguments": "{}"}),
        step(tool_call("write_file", path=str(outside), content="x = 1\n")),
        step(tool_call("write_file", path="../../escape.py", content="x = 1\n")),
        step(tool_call("read_file", path="../../../tasks/softmax/reference.py")),
        step(tool_call("write_file", path="kernel.py", content="def kernel(x):\n    return x.softmax(-1)\n"),
             tool_call("submit")),
        {"content": "done"},
    ]
    with FakeOpenAI(script) as srv:
        res = run(config(srv.base_url), tmp_path / "run", suite_root=ROOT, evaluate_fn=marker_evaluate)
    results = [_tool_messages(r)[-1] for r in srv.requests[2:8]]
    assert "not valid JSON" in results[0]
    assert "content" in results[1] and "Field required" in results[1]
    assert "unknown tool 'compile_and_pray'" in results[2] and "write_file" in results[2]
    assert "absolute" in results[3] and not outside.exists()
    assert "leaves the workspace" in results[4] and not (tmp_path / "escape.py").exists()
    assert "leaves the workspace" in results[5]
    assert res.rows[0]["status"] == "finished" and res.rows[0]["correct"]
    calls = load_run(tmp_path / "run")["tool_calls"].sort_values(["turn", "idx"])
    assert list(calls.ok) == [False, False, False, False, False, False, True, True]


def test_api_errors_mid_episode_are_retried(tmp_path: Path):
    script = [
        {"content": "design"},
        {"status": 429, "body": {"error": {"message": "slow down"}}},
        {"status": 503},
        step(tool_call("write_file", path="kernel.py", content="def kernel(x):\n    return x\n")),
        {"sleep": 1.5, "content": "too late"},  # the client times out at 0.5 s, then retries
        {"raw": "{not json"},
        step(tool_call("submit")),
        {"content": "done"},
    ]
    with FakeOpenAI(script) as srv:
        res = run(config(srv.base_url, request_timeout_s=0.5, api_retries=4), tmp_path / "run", suite_root=ROOT,
                  evaluate_fn=marker_evaluate)
    assert res.rows[0]["status"] == "finished" and res.rows[0]["correct"]
    turns = load_run(tmp_path / "run")["turns"].sort_values("turn")
    assert list(turns.api_attempts) == [1, 3, 3, 1]


def test_persistent_api_failure_fails_the_episode_and_a_resume_runs_it_again(tmp_path: Path):
    out = tmp_path / "run"
    with FakeOpenAI([{"content": "design"}] + [{"status": 500}] * 4) as srv:
        res = run(config(srv.base_url), out, suite_root=ROOT, evaluate_fn=marker_evaluate)
    assert res.rows[0]["status"] == "api_failed" and "HTTP 500" in res.rows[0]["message"]
    with FakeOpenAI(responder=lambda body: {"status": 401, "body": {"error": {"message": "bad key"}}}) as srv:
        res = run(config(srv.base_url), out, suite_root=ROOT, evaluate_fn=marker_evaluate)
    assert len(srv.requests) == 1  # 401 is not retried
    assert res.rows[0]["status"] == "api_failed" and "bad key" in res.rows[0]["message"]
    script = [{"content": "design"},
              step(tool_call("write_file", path="kernel.py", content="def kernel(x):\n    return x\n"),
                   tool_call("submit")),
              {"content": "done"}]
    with FakeOpenAI(script) as srv:
        res = run(config(srv.base_url), out, suite_root=ROOT, evaluate_fn=marker_evaluate)
    eps = load_run(out)["episodes"]
    assert len(eps) == 1 and eps.iloc[0].status == "finished" and eps.iloc[0].attempt == 3
    assert len(load_run(out)["turns"]) == 3  # only the last attempt's turns remain


def test_turn_budget_keeps_the_last_submission(tmp_path: Path):
    script = [{"content": "design"},
              step(tool_call("write_file", path="kernel.py", content="def kernel(x):\n    return x\n"),
                   tool_call("submit")),
              step(tool_call("write_file", path="kernel.py", content="def kernel(x):\n    return x  # BUG\n"))]
    with FakeOpenAI(script, responder=lambda b: step(tool_call("list_files"))) as srv:
        res = run(config(srv.base_url, max_turns=5), tmp_path / "run", suite_root=ROOT, evaluate_fn=marker_evaluate)
    row = res.rows[0]
    assert row["status"] == "budget_exhausted" and row["turns"] == 5 and "turn budget" in row["message"]
    assert row["final_status"] == "passed"  # the submitted version, not the later buggy write
    assert "BUG" not in (tmp_path / "run" / row["kernel_path"]).read_text()
    assert any("turn(s) left" in str(m["content"]) for m in srv.requests[-1]["messages"])


def test_token_budget(tmp_path: Path):
    big = {"prompt_tokens": 600, "completion_tokens": 10, "total_tokens": 610}
    with FakeOpenAI(responder=lambda b: {**step(tool_call("list_files")), "usage": big}) as srv:
        res = run(config(srv.base_url, max_tokens=2000), tmp_path / "run", suite_root=ROOT,
                  evaluate_fn=marker_evaluate)
    row = res.rows[0]
    assert row["status"] == "budget_exhausted" and "token budget" in row["message"]
    assert row["turns"] == 4 and row["tokens_in"] == 2400


def test_text_fallback_when_the_server_refuses_tools(tmp_path: Path):
    kernel = "def kernel(x):\n    return x.softmax(-1)\n"

    def responder(body: dict) -> dict:
        if "tools" in body:
            return {"status": 400, "body": {"error": {"message": "tools are not supported by this model"}}}
        n_results = sum(1 for m in body["messages"]
                        if m["role"] == "user" and "[tool result: write_file" in m["content"])
        if not any(m["role"] == "assistant" for m in body["messages"]):
            return {"content": "design"}
        if n_results == 0:
            return {"content": "Writing it.\n```tool\n" + json.dumps(
                {"name": "write_file", "arguments": {"path": "kernel.py", "content": kernel}})
                + "\n```\n```tool\n{\"name\": \"submit\", \"arguments\": {}}\n```"}
        return {"content": "done"}

    with FakeOpenAI(responder=responder) as srv:
        res = run(config(srv.base_url), tmp_path / "run", suite_root=ROOT, evaluate_fn=marker_evaluate)
    row = res.rows[0]
    assert row["status"] == "finished" and row["correct"] and row["submissions"] == 1
    assert (tmp_path / "run" / row["kernel_path"]).read_text() == kernel
    turns = load_run(tmp_path / "run")["turns"].sort_values("turn")
    assert list(turns.tool_mode)[-1] == "text" and turns.error.str.contains("tools are not supported").any()
    last = srv.requests[-1]["messages"]
    assert "```tool" in last[0]["content"] or any("```tool" in str(m["content"]) for m in last)
    assert any("[tool result: submit" in str(m["content"]) for m in last)
    # the transcript holds exactly what was sent, the refused request with tools and the fallback's merged
    # multi-KB instructions included (it used to keep only the 298-character message they were merged into)
    transcript = [json.loads(line) for line in (tmp_path / "run" / row["transcript_path"]).read_text().splitlines()]
    sent = sent_requests(transcript)
    assert [r["messages"] for r in sent] == [b["messages"] for b in srv.requests]
    assert [r["tools"] for r in sent] == [b.get("tools") for b in srv.requests]
    assert [r["params"]["model"] for r in sent] == [b["model"] for b in srv.requests]
    notes = [e["content"] for e in transcript if e.get("role") == "user" and "does not accept function calling"
             in str(e.get("content"))]
    assert len(notes) == 1 and len(notes[0]) > 2000
    assert "`sanitize`" in notes[0]  # the text protocol lists every tool, the new one included


def test_propose_arm_asks_only_for_the_design(tmp_path: Path):
    with FakeOpenAI([{"content": "Online softmax, one pass."}]) as srv:
        res = run(config(srv.base_url, arms=["propose"], guidance="all"), tmp_path / "run", suite_root=ROOT,
                  evaluate_fn=marker_evaluate)
    row = res.rows[0]
    assert (row["episode_id"], row["status"], row["guidance"]) == ("softmax.propose.s0", "finished", "none")
    assert len(srv.requests) == 1 and "tools" not in srv.requests[0]
    prompt = srv.requests[0]["messages"][1]["content"]
    assert "Expert guidance" not in prompt and "asks only for the design" in prompt
    assert (tmp_path / "run" / row["design_note_path"]).read_text().startswith("Online softmax")
