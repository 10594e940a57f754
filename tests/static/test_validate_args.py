"""`d2kgrade tasks validate` rejects a rubric whose static checks get arguments they do not take, or of the wrong
type: one line naming the file, ``properties.N.static.checks.M.args`` and what was expected."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from d2kgrade.cli import app
from d2kgrade.static.registry import check_args_problem
from d2kgrade.suite import Suite
from d2kgrade.validate import validate_suite

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A copy of the softmax task with its rubric and a minimal reference kernel."""
    (tmp_path / "tasks/softmax").mkdir(parents=True)
    (tmp_path / "rubrics").mkdir()
    (tmp_path / "references/softmax").mkdir(parents=True)
    for rel in ("tasks/softmax/task.yaml", "tasks/softmax/reference.py", "rubrics/softmax.yaml"):
        shutil.copy(ROOT / rel, tmp_path / rel)
    (tmp_path / "references/softmax/triton.py").write_text("def kernel(x):\n    return x\n")
    return tmp_path


def set_checks(root: Path, prop: int, checks: list[dict]) -> Path:
    path = root / "rubrics/softmax.yaml"
    data = yaml.safe_load(path.read_text())
    data["properties"][prop]["static"]["checks"] = checks
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def problems(root: Path) -> list[str]:
    return [str(p) for p in validate_suite(Suite(root))["softmax"]]


def test_the_copy_is_valid(suite):
    assert problems(suite) == []


@pytest.mark.parametrize("args, expect", [
    ({"name": "tl.exp", "nmae": "x"}, "has no argument(s) ['nmae']"),
    ({"name": 3}, "argument 'name' is 3 (int), expected str | list[str]"),
    ({"name": ["tl.exp", 2]}, "expected str | list[str]"),
    ({"name": "tl.exp", "min_count": "2"}, "argument 'min_count' is '2' (str), expected int"),
    ({"name": "tl.exp", "min_count": True}, "expected int"),
    ({}, "needs argument(s) ['name']"),
])
def test_bad_args_are_one_problem_line(suite, args, expect):
    path = set_checks(suite, 1, [{"check": "uses_call", "args": {"name": "tl.exp2"}},
                                 {"check": "uses_call", "args": args}])
    (line,) = problems(suite)
    assert line.startswith(f"{path}: properties.1.static.checks.1.args: check 'uses_call'"), line
    assert expect in line


def test_types_that_fit_are_accepted(suite):
    set_checks(suite, 0, [{"check": "uses_call", "args": {"name": ["tl.exp"], "in_loop": None, "min_count": 2}},
                          {"check": "exp2_log2e", "args": {"tol": 1}},  # an int is a float
                          {"check": "autotune_configs", "args": {"any_value": {"BLOCK_M": [16, 32]}}}])
    assert problems(suite) == []
    assert "expected dict[str, list] | None" in check_args_problem("autotune_configs", {"any_value": [16]})


def test_cli_prints_the_args_problem_and_exits_1(suite):
    set_checks(suite, 0, [{"check": "num_stages", "args": {"min": "three"}}])
    res = CliRunner().invoke(app, ["tasks", "validate", "--suite", str(suite)], catch_exceptions=False)
    assert res.exit_code == 1
    errors = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "properties.0.static.checks.0.args" in errors[0] and "expected int" in errors[0]
    assert "Traceback" not in res.output
