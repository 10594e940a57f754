"""Exit codes of every command but ``run``, through the installed console script: 0 ok, 1 the thing checked failed
or a user error (one line, no traceback), 2 usage. ``run`` is in test_run.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from d2kgrade.runstore import RunStore
from tests.cli.conftest import ROOT, clean_env, one_error_line
from tests.metrics.synthetic import make_run

SOFTMAX = ROOT / "references" / "softmax" / "triton.py"


def test_root_help_version_and_usage_errors(d2k):
    assert d2k("--help").returncode == 0
    version = d2k("--version")
    assert version.returncode == 0 and version.stdout.startswith("d2kgrade ")
    assert d2k().returncode == 2  # no command: help, as a usage error
    assert d2k("no-such-command").returncode == 2
    bad = d2k("tasks", "list", "--bogus")
    assert bad.returncode == 2 and "No such option" in bad.stderr and "Traceback" not in bad.stderr
    assert d2k("score", "--resamples", "many").returncode == 2


def test_tasks(d2k, tmp_path: Path):
    listed = d2k("tasks", "list", "--json")
    assert listed.returncode == 0 and "softmax" in {r["id"] for r in json.loads(listed.stdout)}
    assert d2k("tasks", "show", "softmax", "--guidance", "L1").returncode == 0
    assert d2k("tasks", "validate", "softmax").returncode == 0
    for args, needle in [(("tasks", "show", "nope"), "unknown task 'nope'"),
                         (("tasks", "list", "--suite", tmp_path / "nowhere"), "not a suite"),
                         (("tasks", "validate", "Bad-Id"), "is not a task id")]:
        proc = d2k(*args)
        assert proc.returncode == 1 and needle in one_error_line(proc), (args, proc.stderr)


def test_validate_exits_1_on_an_invalid_suite_naming_file_and_field(d2k, mini_suite):
    """The bug of issue 21: main() dropped typer.Exit(1), so an invalid suite exited 0."""
    root = mini_suite("softmax", "rmsnorm_residual")
    path = root / "tasks" / "softmax" / "task.yaml"
    text = path.read_text()
    assert "tolerance:" in text
    path.write_text(text.replace("tolerance:\n", "tolerance:\n  fp64: [.nan, 0.0]\n", 1))
    proc = d2k("tasks", "validate", "--suite", root)
    assert proc.returncode == 1, proc.stderr
    err = one_error_line(proc)
    assert f"{path}: tolerance" in err and "finite" in err and "1 of 2 tasks invalid" in proc.stderr
    assert "rmsnorm_residual" not in err


@pytest.mark.parametrize("kind", ["fifo", "self_link", "inf_tolerance"])
def test_unreadable_or_non_finite_task_files_are_refused_not_dropped(d2k, mini_suite, kind: str):
    root = mini_suite("softmax")
    path = root / "tasks" / "softmax" / "task.yaml"
    if kind == "fifo":
        path.unlink()
        os.mkfifo(path)
        needle = "is a FIFO (named pipe), expected a regular file"
    elif kind == "self_link":
        path.unlink()
        path.symlink_to(path)
        needle = "is a symbolic link that loops"
    else:
        path.write_text(path.read_text().replace("tolerance:\n", "tolerance:\n  fp64: [0.0, .inf]\n", 1))
        needle = "must be finite numbers"
    for args in (("tasks", "validate"), ("tasks", "list"), ("tasks", "show", "softmax")):
        proc = d2k(*args, "--suite", root, timeout=30)  # a FIFO must not block the reader
        assert proc.returncode == 1, (args, proc.stderr)
        assert str(path) in one_error_line(proc) and needle in proc.stderr, proc.stderr


def test_schema_export(d2k, tmp_path: Path):
    assert d2k("schema", "export", "--out", tmp_path / "schemas").returncode == 0
    assert (tmp_path / "schemas" / "task.schema.json").is_file()
    (tmp_path / "a_file").write_text("")
    proc = d2k("schema", "export", "--out", tmp_path / "a_file")
    assert proc.returncode == 1 and "cannot write the schemas there" in one_error_line(proc)


def test_eval_outcomes_exit_0_and_mistakes_exit_1(d2k, tmp_path: Path, mini_suite):
    ok = d2k("eval", "softmax", SOFTMAX, "--device", "cpu", "--no-hidden", "--json", timeout=300)
    assert ok.returncode == 0 and json.loads(ok.stdout)["status"] == "passed", ok.stderr
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def kernel(x):\n    return x\n")
    bad_kernel = d2k("eval", "softmax", wrong, "--device", "cpu", "--no-hidden", "--json", timeout=300)
    assert bad_kernel.returncode == 0 and json.loads(bad_kernel.stdout)["status"] != "passed"  # an outcome
    for args, needle in [(("eval", "softmax", tmp_path / "missing.py"), "file not found"),
                         (("eval", "nope", wrong), "unknown task 'nope'"),
                         (("eval", "softmax", tmp_path), "is a directory")]:
        proc = d2k(*args, "--device", "cpu")
        assert proc.returncode == 1 and needle in one_error_line(proc), (args, proc.stderr)
    # a task fault is the task's: named with its file and field, before anything runs
    root = mini_suite("softmax")
    path = root / "tasks" / "softmax" / "task.yaml"
    path.write_text(path.read_text().replace("bytes: ", "bytes: undefined_symbol + ", 1))
    proc = d2k("eval", "softmax", wrong, "--device", "cpu", "--suite", root)
    assert proc.returncode == 1 and f"{path}: cost.bytes" in one_error_line(proc), proc.stderr


def test_eval_without_the_gpu_extra_says_what_to_install(d2k, tmp_path: Path):
    """triton hidden from the interpreter (a meta-path blocker in sitecustomize), as on a grading-only install."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'triton':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, _Block())\n")
    env = clean_env(tmp_path, PYTHONPATH=str(site))
    proc = d2k("eval", "softmax", SOFTMAX, "--device", "cpu", env=env)
    assert proc.returncode == 1, proc.stderr
    assert one_error_line(proc) == ("error: this needs the Python module 'triton', which is not installed; install "
                                    "it with: pip install 'd2kgrade[gpu]'")


def test_judge_static(d2k):
    ok = d2k("judge", "--task", "softmax", "--judge", "static", SOFTMAX, "--json")
    assert ok.returncode == 0, ok.stderr
    proc = d2k("judge", "--task", "nope", "--judge", "static", SOFTMAX)
    assert proc.returncode == 1 and "unknown task 'nope'" in one_error_line(proc)


def test_score(d2k, tmp_path: Path):
    run = make_run(tmp_path / "run", seed=1)
    ok = d2k("score", run, "--resamples", "50", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["arms"], ok.stderr
    table = d2k("score", run, "--resamples", "50")  # piped: every column whole, no number cut to "100.…"
    assert table.returncode == 0 and "…" not in table.stdout and "Guided minus unguided" in table.stdout
    rows = [line for line in table.stdout.splitlines() if line.startswith("│ m1 ") and "x │" in line]
    assert rows and all(line.count("│") == 11 for line in rows[:2])  # model, arm, tasks and 7 metrics
    for args, needle in [((tmp_path / "nowhere",), "not a directory"),
                         ((tmp_path,), "not a run directory"),
                         ((run, "--fast-p", "x"), "--fast-p")]:
        proc = d2k("score", *args)
        assert proc.returncode == 1 and needle in one_error_line(proc), (args, proc.stderr)


def test_score_on_empty_failed_and_corrupt_stores(d2k, tmp_path: Path):
    RunStore(tmp_path / "empty").close()  # a run killed before any episode ended
    proc = d2k("score", tmp_path / "empty")
    assert proc.returncode == 1 and "nothing to score" in one_error_line(proc) and "no episode has ended" in proc.stderr
    (tmp_path / "zero").mkdir()
    (tmp_path / "zero" / "results.sqlite").write_bytes(b"")
    proc = d2k("score", tmp_path / "zero")
    assert proc.returncode == 1 and "results.sqlite: is empty (0 bytes)" in one_error_line(proc)
    (tmp_path / "garbled").mkdir()
    (tmp_path / "garbled" / "results.sqlite").write_bytes(os.urandom(8192))
    proc = d2k("score", tmp_path / "garbled")
    assert proc.returncode == 1 and "results.sqlite: is not an SQLite database" in one_error_line(proc)
    assert len((tmp_path / "garbled" / "results.sqlite").read_bytes()) == 8192


def test_report(d2k, tmp_path: Path):
    run = make_run(tmp_path / "run", seed=2)
    ok = d2k("report", run, "--out", tmp_path / "r.html", "--resamples", "50", timeout=300)
    assert ok.returncode == 0 and (tmp_path / "r.html").is_file(), ok.stderr
    proc = d2k("report", tmp_path / "nowhere", "--out", tmp_path / "x.html")
    assert proc.returncode == 1 and "not a directory" in one_error_line(proc)
    (tmp_path / "a_file").write_text("")
    proc = d2k("report", run, "--out", tmp_path / "a_file" / "r.html", "--resamples", "20", timeout=300)
    assert proc.returncode == 1 and f"{tmp_path / 'a_file'}" in one_error_line(proc)


def _ratings(path: Path, raters: dict[str, list[int]]) -> Path:
    rows = [{"item_id": f"e{i}", "property_id": f"t{i % 5}.L1.p0", "rater_id": r, "value": v}
            for r, vals in raters.items() for i, v in enumerate(vals)]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_agree(d2k, tmp_path: Path):
    two = _ratings(tmp_path / "two.csv", {"a": [1, 0, 1, 1, 0, 1, 0, 1, 1, 1], "b": [1, 0, 1, 0, 0, 1, 0, 1, 1, 0]})
    ok = d2k("agree", two, "--resamples", "20")
    assert ok.returncode == 0 and "a vs b" in ok.stdout, ok.stderr
    one = _ratings(tmp_path / "one.csv", {"a": [1, 0, 1]})
    proc = d2k("agree", one)
    assert proc.returncode == 1 and "no agreement to compute" in one_error_line(proc)
    (tmp_path / "empty.jsonl").write_text("")
    proc = d2k("agree", tmp_path / "empty.jsonl")
    assert proc.returncode == 1 and "holds no ratings" in one_error_line(proc)
    proc = d2k("agree", tmp_path / "missing.csv")
    assert proc.returncode == 1 and "file not found" in one_error_line(proc)


def test_annotate(d2k, tmp_path: Path):
    run = make_run(tmp_path / "run", seed=3, models=("m1",), tasks=("softmax",), with_files=True)
    ok = d2k("annotate", "export", run, "--raters", "2", "--seed", "1", "--out", tmp_path / "pack")
    assert ok.returncode == 0 and (tmp_path / "pack" / "key.json").is_file(), ok.stderr
    assert d2k("annotate", "export", run, "--out", tmp_path / "pack2").returncode == 2  # --raters is required
    proc = d2k("annotate", "export", tmp_path / "nowhere", "--raters", "2", "--out", tmp_path / "pack3")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    proc = d2k("annotate", "import", tmp_path / "missing.csv", "--out", tmp_path / "ratings.csv")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr


def test_view(d2k, tmp_path: Path):
    run = make_run(tmp_path / "run", seed=4, models=("m1",), with_files=True)
    ok = d2k("view", run, "--out", tmp_path / "site", timeout=300)
    assert ok.returncode == 0 and (tmp_path / "site" / "index.html").is_file(), ok.stderr
    proc = d2k("view", tmp_path / "nowhere", "--out", tmp_path / "site2")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    (tmp_path / "a_file").write_text("")
    proc = d2k("view", run, "--out", tmp_path / "a_file" / "site", timeout=300)
    assert proc.returncode == 1 and "a_file/site: Not a directory" in one_error_line(proc)


def test_broken_pipe_is_quiet(tmp_path: Path):
    from tests.cli.conftest import SCRIPT

    proc = subprocess.run(f"'{SCRIPT}' tasks list --json | head -c 20 >/dev/null; echo ${{PIPESTATUS[0]}}",
                          shell=True, executable="/bin/bash", capture_output=True, text=True,
                          env=clean_env(tmp_path), timeout=60)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
