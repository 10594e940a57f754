"""benchmarks/merge_rerun.py: a rerun's rows replace the full run's for its tasks only, the replaced rows are kept,
and a rerun from another GPU, an unfinished one, or one without the asked tasks is refused."""

from __future__ import annotations

import json

import pytest

import benchmarks.merge_rerun as mr


def run(gpu: str, rows: dict[str, list[str]], complete: bool = True, ms: float = 1.0) -> dict:
    return {"gpu": gpu, "complete": complete, "command": "bench", "date": "d",
            "workloads": [{"task": t, "workload": w, "median_ms": ms} for t, ws in rows.items() for w in ws],
            "evaluations": [{"task": t, "status": "passed"} for t in rows]}


def test_rows_of_the_rerun_tasks_are_replaced_and_kept():
    full = run("H200", {"a": ["x", "y"], "b": ["z"]}, ms=2.0)
    out = mr.merge(full, run("H200", {"a": ["x", "y"]}, ms=1.0), None, "retuned", "r.json")
    by_task = {(r["task"], r["workload"]): r["median_ms"] for r in out["workloads"]}
    assert by_task == {("a", "x"): 1.0, ("a", "y"): 1.0, ("b", "z"): 2.0}
    assert [e["task"] for e in out["evaluations"]].count("a") == 1
    entry = out["reruns"][-1]
    assert entry["tasks"] == ["a"] and entry["why"] == "retuned" and entry["source"] == "r.json"
    assert [r["median_ms"] for r in entry["replaced"]["workloads"]] == [2.0, 2.0]
    assert full["workloads"][0]["median_ms"] == 2.0  # the input is not modified


def test_only_the_chosen_tasks_are_taken():
    full = run("H200", {"a": ["x"], "b": ["z"]}, ms=2.0)
    out = mr.merge(full, run("H200", {"a": ["x"], "b": ["z"]}, ms=1.0), ["b"], "w", "r.json")
    assert {(r["task"], r["median_ms"]) for r in out["workloads"]} == {("a", 2.0), ("b", 1.0)}


@pytest.mark.parametrize("rerun, tasks, words", [
    (run("A100", {"a": ["x"]}), None, "measured on 'A100'"),
    (run("H200", {"a": ["x"]}, complete=False), None, "did not complete"),
    (run("H200", {"a": ["x"]}), ["c"], "no rows for c"),
])
def test_refusals(rerun, tasks, words):
    with pytest.raises(ValueError, match=words):
        mr.merge(run("H200", {"a": ["x"]}), rerun, tasks, "w", "r.json")


def test_cli_reports_a_bad_file_without_a_traceback(tmp_path, capsys, monkeypatch):
    full = tmp_path / "full.json"
    full.write_text(json.dumps(run("H200", {"a": ["x"]})))
    bad = tmp_path / "rerun.json"
    bad.write_text("{not json")
    monkeypatch.setattr("sys.argv", ["merge_rerun.py", str(bad), "--into", str(full), "--why", "w"])
    assert mr.main() == 2
    assert "merge_rerun:" in capsys.readouterr().err
    assert json.loads(full.read_text())["workloads"][0]["median_ms"] == 1.0
