"""Resume: kill -9 mid-run loses no ended episode and repeats none; settings must match to resume."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from d2kgrade.errors import UserError
from d2kgrade.runstore import load_run
from runner.run import run
from tests.fakes.openai_server import FakeOpenAI
from tests.runner_agent.helpers import ROOT, config, marker_evaluate, step, tool_call


def _agent(body: dict) -> dict:
    """A slow agent: design, write, test, submit, done (0.1 s per call)."""
    n = sum(1 for m in body["messages"] if m["role"] == "assistant")
    moves = [{"content": "design"},
             step(tool_call("write_file", path="kernel.py", content="def kernel(x):\n    return x\n")),
             step(tool_call("test")), step(tool_call("submit")), {"content": "done"}]
    return {**moves[min(n, 4)], "sleep": 0.1}


def _query(db: Path, sql: str) -> list[tuple]:
    if not db.is_file():
        return []
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()
    except sqlite3.OperationalError:  # not created yet
        return []


def _episodes(db: Path) -> dict[str, tuple]:
    return {r[0]: r[1:] for r in _query(db, "SELECT episode_id, session_id, ended_at, status FROM episodes")}


def _half_done(db: Path) -> bool:
    """At least two episodes ended and another is between its first and last turn."""
    rows = _query(db, "SELECT COUNT(*) FROM turns WHERE episode_id NOT IN (SELECT episode_id FROM episodes)")
    return len(_episodes(db)) >= 2 and bool(rows) and rows[0][0] > 0


def _cli(out: Path, base_url: str) -> list[str]:
    return [sys.executable, "-m", "tests.runner_agent.cli_with_marker_eval", "run", "--model", "fake",
            "--base-url", base_url, "--tasks", "softmax", "--arms", "paired", "--seeds", "3", "--device", "cpu",
            "--concurrency", "2", "--out", str(out)]


def test_kill_9_then_rerun_loses_and_repeats_nothing(tmp_path: Path):
    out = tmp_path / "run"
    db = out / "results.sqlite"
    env = {**os.environ, "OPENAI_API_KEY": "k", "PYTHONPATH": str(ROOT)}
    with FakeOpenAI(responder=_agent) as srv:
        proc = subprocess.Popen(_cli(out, srv.base_url), cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while not _half_done(db) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        before = _episodes(db)
        n_requests_before = len(srv.requests)
        assert 2 <= len(before) < 6, "the kill should land mid-run"
        data = load_run(out)
        in_flight = set(data["turns"].episode_id) - set(before)
        assert in_flight, "some episode was killed half way"

        rerun = subprocess.run(_cli(out, srv.base_url), cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        design_requests = [b for b in srv.requests[n_requests_before:] if "tools" not in b]
    after = _episodes(db)
    assert len(after) == 6 and all(v[2] == "finished" for v in after.values())
    for eid, row in before.items():
        assert after[eid] == row  # same session, same end time: not run again
    assert len(design_requests) == 6 - len(before)  # only the unfinished episodes started over
    data = load_run(out)
    assert data["turns"].groupby("episode_id").size().eq(5).all()  # no leftovers of the killed attempts
    sessions = data["sessions"].sort_values("session_id")
    assert sessions.status.tolist() == ["running", "completed"]  # the killed session never closed
    assert sessions.episodes_run.tolist()[-1] == 6 - len(before)
    assert set(data["episodes"].session_id) == {1, 2}
    assert "Traceback" not in rerun.stderr


def test_changed_settings_are_refused_and_extensions_resume(tmp_path: Path):
    out = tmp_path / "run"
    with FakeOpenAI(responder=lambda b: {k: v for k, v in _agent(b).items() if k != "sleep"}) as srv:
        first = run(config(srv.base_url, max_turns=20), out, suite_root=ROOT, evaluate_fn=marker_evaluate)
        assert len(first.rows) == 1
        with pytest.raises(UserError, match="max_turns: the run has 20, this command 30"):
            run(config(srv.base_url, max_turns=30), out, suite_root=ROOT, evaluate_fn=marker_evaluate)
        again = run(config(srv.base_url, max_turns=20), out, suite_root=ROOT, evaluate_fn=marker_evaluate)
        assert again.rows == [] and again.already_done == 1
        more = run(config(srv.base_url, max_turns=20, seeds=2, arms=["guided", "unguided"], concurrency=1),
                   out, suite_root=ROOT, evaluate_fn=marker_evaluate)
    assert sorted(r["episode_id"] for r in more.rows) == ["softmax.guided-all.s1", "softmax.unguided.s0",
                                                           "softmax.unguided.s1"]
    runs = load_run(out)["runs"]
    stored = __import__("json").loads(runs.config_json[0])
    assert stored["seeds"] == 2 and stored["arms"] == ["guided", "unguided"] and stored["max_turns"] == 20


def test_a_changed_task_file_is_refused(tmp_path: Path):
    import shutil

    suite = tmp_path / "suite"
    shutil.copytree(ROOT / "tasks" / "softmax", suite / "tasks" / "softmax")
    out = tmp_path / "run"
    with FakeOpenAI(responder=lambda b: {"content": "design"}) as srv:
        run(config(srv.base_url, arms=["propose"]), out, suite_root=suite, evaluate_fn=marker_evaluate)
        ref = suite / "tasks" / "softmax" / "reference.py"
        ref.write_text(ref.read_text() + "\n# changed\n")
        with pytest.raises(UserError, match=r"task\(s\) \['softmax'\] changed"):
            run(config(srv.base_url, arms=["propose"]), out, suite_root=suite, evaluate_fn=marker_evaluate)


def test_reference_run_redoes_a_task_whose_expert_kernel_changed(tmp_path: Path):
    import shutil

    suite = tmp_path / "suite"
    shutil.copytree(ROOT / "tasks" / "softmax", suite / "tasks" / "softmax")
    (suite / "references" / "softmax").mkdir(parents=True)
    kernel = suite / "references" / "softmax" / "triton.py"
    kernel.write_text("def kernel(x):\n    return x  # BUG\n")
    cfg = config(agent="reference", model=None)
    out = tmp_path / "ref"
    first = run(cfg, out, suite_root=suite, evaluate_fn=marker_evaluate)
    assert [(r["episode_id"], r["correct"]) for r in first.rows] == [("softmax.reference-triton.s0", False)]
    assert run(cfg, out, suite_root=suite, evaluate_fn=marker_evaluate).rows == []  # unchanged: nothing to redo
    kernel.write_text("def kernel(x):\n    return x.softmax(-1)\n")
    third = run(cfg, out, suite_root=suite, evaluate_fn=marker_evaluate)
    assert [(r["episode_id"], r["correct"]) for r in third.rows] == [("softmax.reference-triton.s0", True)]
    eps = load_run(out)["episodes"]
    assert len(eps) == 1 and eps.iloc[0].correct and eps.iloc[0].session_id == 3
