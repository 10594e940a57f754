"""``d2kgrade run`` through the real CLI (typer's CliRunner): settings resolution, errors, the summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from d2kgrade.cli import app
from d2kgrade.errors import UserError
from d2kgrade.runstore import load_run
from runner.agent.config import RunConfig, resolve_config
from tests.fakes.openai_server import FakeOpenAI
from tests.runner_agent.helpers import ROOT, step, tool_call


def _cli(*args: str):
    return CliRunner().invoke(app, ["run", *args])


def test_config_file_then_environment_then_flags(tmp_path: Path):
    cfg_file = tmp_path / "run.toml"
    cfg_file.write_text('[run]\nmodel = "from-file"\nmax_turns = 40\narms = "paired,propose"\nseeds = 3\n'
                        'temperature = 0.2\n')
    cfg = resolve_config(cfg_file, {"max_turns": 12, "seeds": None},
                         environ={"D2KGRADE_MODEL": "from-env", "D2KGRADE_BASE_URL": "http://h:1/v1"})
    assert (cfg.model, cfg.base_url, cfg.max_turns, cfg.seeds, cfg.temperature) == \
        ("from-env", "http://h:1/v1", 12, 3, 0.2)
    assert cfg.arms == ["unguided", "guided", "propose"]
    assert resolve_config(cfg_file, {"model": "flag"}, environ={}).model == "flag"


@pytest.mark.parametrize("args, message", [
    (["--agent", "llm"], "--agent llm needs --model"),
    (["--model", "m", "--tasks", "no_such_task"], "unknown task 'no_such_task'"),
    (["--model", "m", "--arms", "both"], "arms must be paired, unguided, guided or propose"),
    (["--agent", "replay"], "--agent replay needs --from"),
    (["--agent", "reference", "--model", "m"], "--model is for --agent llm"),
    (["--model", "m", "--gpus", "zero"], "--gpus takes indices"),
])
def test_user_mistakes_are_user_errors(tmp_path: Path, args: list[str], message: str):
    res = _cli("--out", str(tmp_path / "r"), "--device", "cpu", *args)
    assert isinstance(res.exception, UserError) and message in str(res.exception), res.exception
    assert not (tmp_path / "r" / "results.sqlite").exists()


def test_a_user_mistake_is_one_line_without_traceback(tmp_path: Path):
    proc = subprocess.run([sys.executable, "-c", "from d2kgrade.cli import main; main()", "run", "--out",
                           str(tmp_path / "r"), "--model", "m", "--tasks", "no_such_task"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, env={"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "k",
                                                                 "HOME": str(tmp_path)})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "unknown task 'no_such_task'" in proc.stderr


def test_missing_api_key_and_unknown_config_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    res = _cli("--model", "m", "--tasks", "softmax", "--device", "cpu", "--out", str(tmp_path / "r"))
    assert res.exit_code != 0 and "no API key" in str(res.exception)
    bad = tmp_path / "bad.toml"
    bad.write_text('max_turn = 3\n')
    res = _cli("--config", str(bad), "--out", str(tmp_path / "r"))
    assert "unknown setting(s) ['max_turn']" in str(res.exception)


def test_cli_runs_and_prints_a_json_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import runner.agent.evaluation as evaluation
    from tests.runner_agent.helpers import marker_evaluate

    monkeypatch.setattr(evaluation, "default_evaluate_fn", lambda: marker_evaluate)
    script = [{"content": "design"},
              step(tool_call("write_file", path="kernel.py", content="def kernel(x):\n    return x\n"),
                   tool_call("submit")),
              {"content": "done"},
              {"content": "an independent design"}]
    with FakeOpenAI(script) as srv:
        res = _cli("--model", "fake", "--base-url", srv.base_url, "--tasks", "softmax", "--arms", "guided,propose",
                   "--guidance", "L1", "--device", "cpu", "--concurrency", "1", "--out", str(tmp_path / "r"),
                   "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout[res.stdout.index("{"):])
    assert summary["planned"] == 2 and summary["ran"] == 2
    by_arm = {r["arm"]: r for r in summary["summary"]}
    assert by_arm["guided"]["guidance"] == "L1" and by_arm["guided"]["correct"] == 1
    assert by_arm["propose"]["statuses"] == {"finished": 1} and by_arm["propose"]["correct"] == 0
    stored = RunConfig.model_validate_json(load_run(tmp_path / "r")["episodes"].config_json[0])
    assert stored.model == "fake" and stored.guidance == "L1" and stored.tasks == ["softmax"]
