"""The run store's contract with score and judge: tables, columns, types, atomic episode writes."""

from __future__ import annotations

import math
import re
import sqlite3
from pathlib import Path

import pytest

from d2kgrade.runstore import EPISODE_COLUMNS, RunStore, load_run, suite_version, task_version
from tests.runner_agent.helpers import ROOT


def _episode(eid: str, **kw) -> dict:
    row = {c: None for c in EPISODE_COLUMNS}
    row.update(run_id="r", episode_id=eid, model="m", agent="llm", arm="guided", guidance="all", task="softmax",
               seed=0, status="finished", turns=3, tokens_in=10, tokens_out=5, cost_usd=float("nan"), wall_s=1.5,
               final_status="passed", correct=True, submissions=1, tool_calls=2, suite_version="s",
               task_version="t", config_json="{}", env_json="{}", attempt=1, started_at="a", ended_at="b")
    row.update(kw)
    return row


def _workload(eid: str, name: str, time_ms=None) -> dict:
    return {"run_id": "r", "episode_id": eid, "eval_id": 1, "workload": name, "status": "passed",
            "time_ms": time_ms, "speedup_eager": None if time_ms is None else 2.0}


def test_load_run_types_and_contract_columns(tmp_path: Path):
    store = RunStore(tmp_path)
    store.finish_episode(_episode("a"), workloads=[_workload("a", "smoke"), _workload("a", "hidden")])
    store.finish_episode(_episode("b", correct=False, final_status="no_submission", kernel_path=None,
                                  cost_usd=0.25, status="no_submission"))
    data = load_run(tmp_path)
    eps = data["episodes"].set_index("episode_id")
    assert eps.correct.dtype == bool and list(eps.correct) == [True, False]
    assert math.isnan(eps.loc["a", "cost_usd"]) and eps.loc["b", "cost_usd"] == 0.25
    contract = {"run_id", "episode_id", "model", "agent", "arm", "guidance", "task", "seed", "status", "turns",
                "tokens_in", "tokens_out", "cost_usd", "wall_s", "final_status", "correct", "design_note_path",
                "kernel_path", "suite_version", "config_json"}
    assert contract <= set(eps.reset_index().columns)
    wl = data["workloads"]
    assert {"episode_id", "workload", "status", "time_ms", "eager_ms", "compiled_ms", "speedup_eager",
            "speedup_compiled", "roofline_fraction"} <= set(wl.columns)
    assert wl.time_ms.dtype == float and wl.time_ms.isna().all() and set(wl.workload) == {"smoke", "hidden"}
    assert set(data) >= {"runs", "sessions", "episodes", "workloads", "turns", "tool_calls", "kernel_versions",
                         "evaluations"}


def test_an_episode_is_written_whole_or_not_at_all(tmp_path: Path):
    store = RunStore(tmp_path)
    with pytest.raises(KeyError):
        store.finish_episode(_episode("a"), workloads=[_workload("a", "smoke"), {"bogus": 1}])
    with pytest.raises(sqlite3.IntegrityError):  # a NOT NULL column missing: nothing of the episode is kept
        store.finish_episode(_episode("a", status=None), workloads=[_workload("a", "smoke")])
    data = load_run(tmp_path)
    assert data["episodes"].empty and data["workloads"].empty
    store.add_turn({"run_id": "r", "episode_id": "a", "turn": 1, "started_at": "x", "wall_s": 0.1, "tokens_in": 1,
                    "tokens_out": 1, "n_tool_calls": 0, "api_attempts": 1, "content_chars": 0, "context_chars": 0,
                    "elided_results": 0})
    store.finish_episode(_episode("a", status="failed"))
    assert store.done_episode_ids() == set() and store.episode_attempts("a") == 1
    store.reset_episode("a")
    data = load_run(tmp_path)
    assert data["episodes"].empty and data["turns"].empty


def test_missing_store_and_suite_versions(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="no run store"):
        load_run(tmp_path)
    assert suite_version(ROOT) == suite_version(ROOT) and len(suite_version(ROOT)) == 16
    copy = tmp_path / "suite" / "tasks" / "softmax"
    copy.mkdir(parents=True)
    for f in (ROOT / "tasks" / "softmax").glob("*.*"):
        (copy / f.name).write_bytes(f.read_bytes())
    v1 = task_version(tmp_path / "suite", "softmax")
    (copy / "task.yaml").write_text((copy / "task.yaml").read_text() + "\n")
    assert task_version(tmp_path / "suite", "softmax") != v1


def test_one_writer_lock_names_its_holder_and_a_stale_one_is_taken_over(tmp_path: Path):
    import json
    import os
    import socket
    import subprocess

    from d2kgrade.errors import RunStoreError
    from d2kgrade.runstore import RunLock

    first = RunLock(tmp_path)
    assert first.acquire() is None
    held = json.loads((tmp_path / "run.lock").read_text())
    assert held["pid"] == os.getpid() and held["host"] == socket.gethostname()
    with pytest.raises(RunStoreError, match=f"another d2kgrade is writing this run directory: PID {os.getpid()}"):
        RunLock(tmp_path).acquire()  # flock is per open file: a second open conflicts even in this process
    first.release()
    assert (tmp_path / "run.lock").read_text() == ""
    with RunLock(tmp_path):
        pass
    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / "run.lock").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "since": "x"}))
    lock = RunLock(tmp_path)
    warning = lock.acquire()
    assert warning is not None and "took over a stale lock" in warning and f"PID {dead.pid}" in warning
    lock.release()


@pytest.mark.parametrize("content, needle", [
    (b"", "is empty (0 bytes)"),
    (b"not a database at all, just some text\n" * 200, "is not an SQLite database"),
    (None, "an SQLite file but not a run store"),
])
def test_a_damaged_or_foreign_store_is_refused_before_anything_is_written(tmp_path: Path, content, needle):
    from d2kgrade.errors import RunStoreError

    db = tmp_path / "results.sqlite"
    if content is None:
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE other (x)")
        con.commit()
        con.close()
    else:
        db.write_bytes(content)
    before = db.read_bytes()
    with pytest.raises(RunStoreError, match=re.escape(needle)):
        RunStore(tmp_path)
    with pytest.raises(RunStoreError, match=re.escape(needle)):
        load_run(tmp_path)
    assert db.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]


def test_the_store_check_keeps_other_connections_locks(tmp_path: Path):
    """Checking a store while this process has it open must not drop SQLite's POSIX locks (it corrupted resumes)."""
    a = RunStore(tmp_path)
    a.finish_episode(_episode("a"))
    b = RunStore(tmp_path)  # runs check_store_file with a's connection live
    b.finish_episode(_episode("b"))
    a.finish_episode(_episode("c"))
    assert sorted(load_run(tmp_path)["episodes"].episode_id) == ["a", "b", "c"]
    con = sqlite3.connect(tmp_path / "results.sqlite")
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
