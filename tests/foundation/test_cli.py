"""The real CLI through typer's CliRunner and as a console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from d2kgrade.cli import app
from d2kgrade.schema import render_task
from d2kgrade.suite import Suite

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_tasks_list_json():
    result = run_cli("tasks", "list", "--json")
    assert result.exit_code == 0
    rows = {r["id"]: r for r in json.loads(result.stdout)}
    assert {"softmax", "rmsnorm_residual", "gemm_bf16"} <= set(rows)
    assert rows["softmax"]["workloads"] == ["rows_4k", "short_rows_fp32", "vocab_rows", "few_huge_rows"]
    assert rows["softmax"]["guidance"] == {"L1": 2, "L2": 4, "L3": 3}


def test_tasks_show_arms_differ_only_in_guidance():
    task = Suite(ROOT).load_task("softmax")
    none, l1, l12, full = (render_task(task, arm) for arm in ("none", "L1", "L1-L2", "all"))
    assert "softmax.L1.online-normalizer" not in none and "Expert guidance" not in none
    assert "softmax.L1.online-normalizer" in l1 and "softmax.L2.tiled-two-sweep" not in l1
    assert "softmax.L2.tiled-two-sweep" in l12 and "softmax.L3.exp2-fold" not in l12
    assert "softmax.L3.exp2-fold" in full
    # workload hints ("needs online-normalizer tiling") are guidance too: only the full arm sees them
    assert "online-normalizer tiling" not in none and "online-normalizer tiling" in full
    assert full.startswith(none.split("## Workloads")[0])
    # the evidence (grading material) is never shown
    assert task.guidance[0].evidence.triton not in full


def test_tasks_show_cli_matches_library():
    result = run_cli("tasks", "show", "softmax", "--guidance", "L1-L2", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["prompt"] == render_task(Suite(ROOT).load_task("softmax"), "L1-L2")


def _console(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "d2kgrade", *args], capture_output=True, text=True, timeout=120)


def test_user_mistakes_are_one_line_no_traceback():
    for args, needle in [
        (("tasks", "show", "no_such_task"), "unknown task 'no_such_task'"),
        (("tasks", "show", "softmax", "--guidance", "L4"), "--guidance must be one of"),
        (("tasks", "list", "--suite", "/nonexistent/dir"), "not a suite"),
        (("tasks", "validate", "Bad-Id"), "is not a task id"),
    ]:
        proc = _console(*args)
        assert proc.returncode == 1, (args, proc.stderr)
        assert needle in proc.stderr
        assert "Traceback" not in proc.stderr


def test_suite_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("D2KGRADE_SUITE", str(tmp_path))
    proc = _console("tasks", "list")
    assert proc.returncode == 1 and "not a suite" in proc.stderr


def test_schema_export(tmp_path):
    result = run_cli("schema", "export", "--out", str(tmp_path))
    assert result.exit_code == 0
    task_schema = json.loads((tmp_path / "task.schema.json").read_text())
    rubric_schema = json.loads((tmp_path / "rubric.schema.json").read_text())
    assert task_schema["additionalProperties"] is False
    assert "smoke" in task_schema["required"]
    # every field carries its docstring as a description
    for name, prop in task_schema["properties"].items():
        assert prop.get("description"), name
    assert "properties" in rubric_schema["properties"]


def test_usage_errors_are_one_line_no_traceback():
    for args in (("tasks", "list", "--bogus"), ("tasks", "show"), ("no-such-command",)):
        proc = _console(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert "Error" in proc.stderr
