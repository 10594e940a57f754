"""`tasks validate` on broken files: each problem is one clear line with file, field path and expectation."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from d2kgrade.cli import app
from d2kgrade.errors import SpecError
from d2kgrade.suite import Suite
from d2kgrade.validate import validate_suite

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A copy of the softmax task, its rubric, reference.py and a kernel file that defines `kernel`."""
    for sub in ("tasks/softmax", "rubrics"):
        (tmp_path / sub).mkdir(parents=True)
    shutil.copy(ROOT / "tasks/softmax/task.yaml", tmp_path / "tasks/softmax/task.yaml")
    shutil.copy(ROOT / "tasks/softmax/reference.py", tmp_path / "tasks/softmax/reference.py")
    shutil.copy(ROOT / "rubrics/softmax.yaml", tmp_path / "rubrics/softmax.yaml")
    (tmp_path / "references/softmax").mkdir(parents=True)
    (tmp_path / "references/softmax/triton.py").write_text("def kernel(x):\n    return x\n")
    return tmp_path


def problems(root: Path) -> list[str]:
    return [str(p) for p in validate_suite(Suite(root))["softmax"]]


def edit_yaml(path: Path, fn) -> None:
    data = yaml.safe_load(path.read_text())
    fn(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def run_cli(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_the_copy_is_valid(suite):
    assert problems(suite) == []


def test_missing_field(suite):
    edit_yaml(suite / "tasks/softmax/task.yaml", lambda d: d.pop("bound"))
    (line,) = problems(suite)
    assert "task.yaml: bound: field required" in line


def test_wrong_type(suite):
    edit_yaml(suite / "tasks/softmax/task.yaml", lambda d: d["workloads"][1]["params"].update(M=[1, 2]))
    assert any("workloads.1.params.M" in p for p in problems(suite))


def test_unknown_key(suite):
    edit_yaml(suite / "tasks/softmax/task.yaml", lambda d: d["workloads"][0].update(wyh="typo"))
    (line,) = problems(suite)
    assert "workloads.0.wyh: unknown field" in line


def test_dangling_dependency(suite):
    edit_yaml(suite / "tasks/softmax/task.yaml",
              lambda d: d["guidance"][2]["depends_on"].append("softmax.L1.no-such-item"))
    (line,) = problems(suite)
    assert "depends on 'softmax.L1.no-such-item'" in line


def test_cycle(suite):
    def make_cycle(d):
        by_id = {g["id"]: g for g in d["guidance"]}
        by_id["softmax.L1.one-read-one-write"]["depends_on"] = ["softmax.L2.row-in-registers"]

    edit_yaml(suite / "tasks/softmax/task.yaml", make_cycle)
    (line,) = problems(suite)
    assert "cycle" in line and "softmax.L2.row-in-registers" in line


def test_yaml_syntax_error(suite):
    path = suite / "tasks/softmax/task.yaml"
    path.write_text(path.read_text() + "\n  bad: [unclosed\n")
    (line,) = problems(suite)
    assert "task.yaml: line" in line and "YAML syntax error" in line


def test_empty_file(suite):
    (suite / "rubrics/softmax.yaml").write_text("")
    (line,) = problems(suite)
    assert "softmax.yaml: is empty" in line


def test_binary_garbage(suite):
    (suite / "tasks/softmax/task.yaml").write_bytes(os.urandom(4096) + b"\x00")
    (line,) = problems(suite)
    assert "is binary" in line


def test_not_utf8(suite):
    (suite / "tasks/softmax/task.yaml").write_bytes(b"id: caf\xe9\n")
    (line,) = problems(suite)
    assert "not valid UTF-8" in line


def test_reference_without_kernel(suite):
    (suite / "references/softmax/triton.py").write_text("def kernal(x):\n    return x\n")
    (line,) = problems(suite)
    assert "references/softmax/triton.py: kernel: not defined" in line


def test_reference_py_syntax_error(suite):
    (suite / "tasks/softmax/reference.py").write_text("def reference(x:\n")
    (line,) = problems(suite)
    assert "reference.py: line 1: Python syntax error" in line


def test_cost_formula_that_does_not_evaluate(suite):
    edit_yaml(suite / "tasks/softmax/task.yaml", lambda d: d["cost"].update(bytes="2*M*Q*elt"))
    lines = problems(suite)
    assert lines and all("cost.bytes" in p and "'Q'" in p for p in lines)


def test_code_in_a_formula_is_rejected(suite):
    edit_yaml(suite / "tasks/softmax/task.yaml", lambda d: d["cost"].update(flops="__import__('os').getpid()"))
    assert any("cost.flops" in p and "not allowed" in p for p in problems(suite))


def test_missing_and_orphan_rubric_properties(suite):
    def rename(d):
        d["properties"][0]["id"] = "softmax.L1.something-else"

    edit_yaml(suite / "rubrics/softmax.yaml", rename)
    lines = problems(suite)
    assert any("no property for guidance id 'softmax.L1.one-read-one-write'" in p for p in lines)
    assert any("properties.0.id" in p and "orphan" in p for p in lines)


def test_unknown_static_check(suite):
    edit_yaml(suite / "rubrics/softmax.yaml",
              lambda d: d["properties"][0]["static"].update(checks=[{"check": "no_such_check_xyz"}]))
    (line,) = problems(suite)
    assert "unknown static check 'no_such_check_xyz'" in line


def test_guidance_id_of_another_task(suite):
    edit_yaml(suite / "tasks/softmax/task.yaml", lambda d: d["guidance"][0].update(id="layernorm.L1.one-read"))
    assert any("must start with the task id 'softmax.'" in p for p in problems(suite))


def test_cli_prints_one_line_per_problem_and_exits_1(suite):
    edit_yaml(suite / "tasks/softmax/task.yaml", lambda d: d.pop("bound"))
    (suite / "references/softmax/triton.py").write_text("x = 1\n")
    result = run_cli("tasks", "validate", "--suite", str(suite))
    assert result.exit_code == 1
    errors = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 2
    assert "Traceback" not in result.output


def test_cli_json_lists_problems(suite):
    (suite / "references/softmax/triton.py").write_text("x = 1\n")
    result = run_cli("tasks", "validate", "--suite", str(suite), "--json")
    assert result.exit_code == 1
    import json

    data = json.loads(result.stdout)
    assert data["softmax"][0]["where"] == "kernel"


def test_load_task_raises_spec_error_with_every_problem(suite):
    edit_yaml(suite / "tasks/softmax/task.yaml", lambda d: (d.pop("bound"), d.pop("title")))
    with pytest.raises(SpecError) as info:
        Suite(suite).load_task("softmax")
    assert {p.where for p in info.value.problems} == {"bound", "title"}
