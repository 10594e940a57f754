"""``report`` on empty, failed and partial runs: one clear sentence, a report that says what is missing, exit 0,
never a traceback (through the installed console script, as a shell or CI calls it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from d2kgrade.runstore import RunStore, load_run
from tests.fakes.openai_server import FakeOpenAI
from tests.view.pipeline import ROOT, ScriptedAgent, fake_gpu_evaluate

SCRIPT = shutil.which("d2kgrade", path=str(Path(sys.executable).parent))


def _report(run: Path, out: Path) -> subprocess.CompletedProcess:
    cmd = [SCRIPT] if SCRIPT else [sys.executable, "-m", "d2kgrade"]
    return subprocess.run([*cmd, "report", str(run), "--out", str(out), "--resamples", "50"], capture_output=True,
                          text=True, timeout=300)


def _api_run(root: Path, behaviour: dict, monkeypatch: pytest.MonkeyPatch) -> Path:
    from runner.run import run
    from tests.runner_agent.helpers import config

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FakeOpenAI(responder=ScriptedAgent(behaviour)) as srv:
        run(config(srv.base_url, tasks=["softmax", "layernorm"], arms=["unguided", "guided"], concurrency=1,
                   api_retries=1), root, suite_root=ROOT, evaluate_fn=fake_gpu_evaluate)
    return root


def test_empty_run_store(tmp_path: Path):
    RunStore(tmp_path / "run").close()
    proc = _report(tmp_path / "run", tmp_path / "r.html")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "nothing to score" in proc.stderr
    md = (tmp_path / "r.md").read_text()
    assert "## Nothing to score yet" in md and "0 ended episode(s)" in md
    assert "ended agent episodes: run `d2kgrade run" in md and "grades: `d2kgrade judge --run RUN_DIR`" in md


def test_every_episode_failed_on_the_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    down = {(t, a): "api_down" for t in ("softmax", "layernorm") for a in ("unguided", "guided")}
    run = _api_run(tmp_path / "run", down, monkeypatch)
    proc = _report(run, tmp_path / "r.html")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    md = (tmp_path / "r.md").read_text()
    (status,) = set(load_run(run)["episodes"]["status"])  # failed, or the run store's own API-failure status
    assert f"| arm | episodes | correct | status: {status} |" in md
    assert "| unguided | 2 | 0 | 2 |" in md  # episodes, correct, that status
    assert f"No agent episode submitted a kernel (statuses: {status})" in md
    assert "upstream overloaded (fake)" in md  # the failure reason, per arm
    assert "## Nothing to score yet" in md and "– → –" not in md
    assert "a submitted kernel: every agent episode ended without one" in md


def test_partial_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    run = _api_run(tmp_path / "run", {("layernorm", "guided"): "api_down", ("layernorm", "unguided"): "silent"},
                   monkeypatch)
    proc = _report(run, tmp_path / "r.html")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    md = (tmp_path / "r.md").read_text()
    for status in set(load_run(run)["episodes"]["status"]):  # every status the data has, API failure included
        assert f"status: {status}" in md
    assert "status: no_submission" in md and "status: finished" in md
    assert "no code grades by rater 'combined' (no grades.jsonl)" in md
    assert "No design-note or kernel grades: run `d2kgrade judge --run RUN_DIR`" in md
    assert "speedup_scatter.png" in md  # softmax is correct and timed in both arms
