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


def test_yaml_errors_keep_the_pure_python_parsers_words(tmp_path: Path):
    """d2kgrade.io parses with libyaml when it can; a file it refuses is reported in safe_load's own words, which
    name what libyaml's leave out (the alias, the character)."""
    from d2kgrade.io import load_yaml

    for text, where, words in [("a: *nope\n", "line 1, column 4", "found undefined alias 'nope'"),
                               ("\tx: 1\n", "line 1, column 1", "found character '\\t' that cannot start any token")]:
        path = tmp_path / "f.yaml"
        path.write_text(text)
        with pytest.raises(SpecError) as err:
            load_yaml(path)
        assert f"{where}: YAML syntax error: {words}" in str(err.value), str(err.value)


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


@pytest.mark.parametrize("kind", ["fifo", "self_link", "dangling_link", "device", "directory"])
def test_unreadable_task_files_are_problems_not_silently_dropped(suite, kind: str):
    from d2kgrade.io import regular_file_problem

    path = suite / "tasks/softmax/task.yaml"
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "self_link":
        path.symlink_to(path)
    elif kind == "dangling_link":
        path.symlink_to(suite / "nowhere.yaml")
    elif kind == "device":
        path.symlink_to("/dev/zero")  # would never end
    else:
        path.mkdir()
    expected = {"fifo": "is a FIFO (named pipe)", "self_link": "is a symbolic link that loops",
                "dangling_link": "is a broken symbolic link", "device": "is a character device",
                "directory": "is a directory"}[kind]
    assert expected in (regular_file_problem(path) or "")
    s = Suite(suite)
    assert s.task_ids == ["softmax"]  # listed, so that loading it says what is wrong
    found = validate_suite(Suite(suite))["softmax"]
    assert any(p.file == str(path) and expected in p.message for p in found), found


def test_non_finite_tolerances_are_refused(suite):
    path = suite / "tasks/softmax/task.yaml"
    data = yaml.safe_load(path.read_text())
    for bad in ([float("nan"), 0.0], [0.0, float("inf")]):
        data["tolerance"] = {**data["tolerance"], "fp32": bad}
        path.write_text(yaml.safe_dump(data))
        found = validate_suite(Suite(suite))["softmax"]
        assert any(p.where.startswith("tolerance") and "finite" in p.message for p in found), found


def test_temp_folders_of_dead_processes_are_swept(tmp_path: Path):
    import subprocess
    import time

    from d2kgrade.io import private_tempdir, remove_own_tempdirs, sweep_stale_tempdirs

    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"d2k-sub-{dead.pid}-x1"
    live = tmp_path / f"d2k-eval-{os.getppid()}-x2"
    old_style, fresh_style = tmp_path / "d2k-eval-abc123", tmp_path / "d2k-eval-def456"
    other = tmp_path / "not-ours"
    for p in (stale, live, old_style, fresh_style, other):
        p.mkdir()
    os.utime(old_style, (time.time() - 2 * 86400,) * 2)
    assert sorted(p.name for p in sweep_stale_tempdirs(tmp_path)) == [old_style.name, stale.name]
    assert live.is_dir() and fresh_style.is_dir() and other.is_dir()
    mine = private_tempdir("sub")
    assert mine.name.startswith(f"d2k-sub-{os.getpid()}-")
    assert mine in remove_own_tempdirs(mine.parent) and not mine.exists()
