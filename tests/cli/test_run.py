"""``d2kgrade run`` through the installed console script: exit codes, the endpoint pre-flight, API failures, the
writer's lock, SIGTERM, damaged stores, sampling settings, and output that survives a pipe."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from d2kgrade.runstore import load_run
from runner.agent.recorder import sent_requests
from tests.cli.conftest import ROOT, SCRIPT, clean_env, one_error_line
from tests.fakes.openai_server import FakeOpenAI


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return clean_env(tmp_path, OPENAI_API_KEY="test-key", **extra)


def _propose(base_url: str, out: Path, *extra: object) -> list[object]:
    return ["run", "--model", "fake-model", "--base-url", base_url, "--tasks", "softmax", "--arms", "propose",
            "--device", "cpu", "--out", out, *extra]


def _sessions(out: Path) -> list[tuple[str, int]]:
    con = sqlite3.connect(out / "results.sqlite")
    try:
        return con.execute("SELECT status, episodes_run FROM sessions ORDER BY session_id").fetchall()
    finally:
        con.close()


def test_no_run_without_an_explicit_model_or_key(d2k, tmp_path: Path):
    proc = d2k("run", "--out", tmp_path / "r", env=_env(tmp_path))
    assert proc.returncode == 1 and "--agent llm needs --model" in one_error_line(proc)
    proc = d2k("run", "--model", "m", "--tasks", "softmax", "--out", tmp_path / "r")
    assert proc.returncode == 1 and "no API key" in one_error_line(proc)
    assert not (tmp_path / "r").exists()


def test_a_dead_endpoint_is_one_line_in_seconds(d2k, tmp_path: Path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    proc = d2k(*_propose(f"http://127.0.0.1:{port}/v1", tmp_path / "r"), env=_env(tmp_path))
    wall = time.monotonic() - t0
    assert proc.returncode == 1
    err = one_error_line(proc)
    assert f"http://127.0.0.1:{port}/v1" in err and "gave no answer" in err and "no episode was run" in err
    assert wall < 30, wall  # was ~140 s per episode of retries
    assert not (tmp_path / "r" / "results.sqlite").exists()
    with FakeOpenAI(models_status=401) as srv:
        proc = d2k(*_propose(srv.base_url, tmp_path / "r"), env=_env(tmp_path))
    assert proc.returncode == 1 and "refused the API key" in one_error_line(proc) and "HTTP 401" in proc.stderr
    assert srv.requests == []  # no chat request was made


def test_success_records_sampling_settings_and_what_was_sent(d2k, tmp_path: Path):
    out = tmp_path / "r"
    with FakeOpenAI([{"content": "An online softmax in one pass."}]) as srv:
        proc = d2k(*_propose(srv.base_url, out, "--temperature", "0.3", "--top-p", "0.9", "--seed", "7", "--json"),
                   env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["summary"][0]["statuses"] == {"finished": 1}
    body = srv.requests[0]
    assert (body["temperature"], body["top_p"], body["seed"]) == (0.3, 0.9, 7)
    eps = load_run(out)["episodes"]
    cfg = json.loads(eps.config_json[0])
    assert (cfg["temperature"], cfg["top_p"], cfg["sampling_seed"]) == (0.3, 0.9, 7)
    transcript = [json.loads(line) for line in (out / eps.transcript_path[0]).read_text().splitlines()]
    sent = sent_requests(transcript)
    assert len(sent) == 1 and sent[0]["messages"] == body["messages"] and sent[0]["tools"] is None
    assert sent[0]["params"] == {"model": "fake-model", "temperature": 0.3, "top_p": 0.9, "seed": 7}
    assert _sessions(out) == [("completed", 1)]
    # a changed sampling setting defines other episodes: refused on resume
    with FakeOpenAI() as srv:
        proc = d2k(*_propose(srv.base_url, out, "--temperature", "0.5"), env=_env(tmp_path))
    assert proc.returncode == 1 and "temperature: the run has 0.3" in one_error_line(proc)


def test_api_failures_exit_1_and_are_their_own_status(d2k, tmp_path: Path):
    out = tmp_path / "r"
    with FakeOpenAI(responder=lambda body: {"status": 400, "body": {"error": {"message": "no such model"}}}) as srv:
        proc = d2k("run", "--model", "fake-model", "--base-url", srv.base_url, "--tasks", "softmax", "--device",
                   "cpu", "--out", out, env=_env(tmp_path))
    assert proc.returncode == 1
    err = one_error_line(proc)
    assert "2 of 2 episode(s) run this session failed on the API (status api_failed" in err and "no such model" in err
    assert set(load_run(out)["episodes"].status) == {"api_failed"}
    score = subprocess.run([str(SCRIPT), "score", str(out)], capture_output=True, text=True, env=_env(tmp_path),
                           timeout=120)
    assert score.returncode == 1 and "nothing to score" in one_error_line(score)
    assert "fake-model unguided: 1 api_failed" in score.stderr and "failed on the API" in score.stderr


def _slow_server() -> FakeOpenAI:
    return FakeOpenAI(responder=lambda body: {"sleep": 30, "content": "late"})


def _wait_for(cond, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.1)


def test_one_writer_per_run_dir_and_sigterm_like_ctrl_c(tmp_path: Path):
    out = tmp_path / "r"
    env = _env(tmp_path)
    with _slow_server() as srv:
        first = subprocess.Popen([str(SCRIPT), *map(str, _propose(srv.base_url, out))], env=env, cwd=tmp_path,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _wait_for(lambda: srv.requests or first.poll() is not None)
            assert first.poll() is None, first.communicate()
            second = subprocess.run([str(SCRIPT), *map(str, _propose(srv.base_url, out))], env=env, cwd=tmp_path,
                                    capture_output=True, text=True, timeout=120)
            assert second.returncode == 1
            err = one_error_line(second)
            assert "another d2kgrade is writing this run directory" in err and f"PID {first.pid}" in err
            first.send_signal(signal.SIGTERM)
            _, stderr = first.communicate(timeout=60)
        finally:
            if first.poll() is None:
                first.kill()
    assert first.returncode == 128 + signal.SIGTERM, stderr
    assert "terminated: finished episodes are saved" in stderr and "Traceback" not in stderr
    assert _sessions(out) == [("interrupted", 0)]  # not left 'running'
    assert (out / "run.lock").read_text() == ""  # released
    assert not [p for p in (tmp_path / "tmp").iterdir() if p.name.startswith("d2k-")]
    # the stopped episode resumes
    with FakeOpenAI([{"content": "a design"}]) as srv:
        again = subprocess.run([str(SCRIPT), *map(str, _propose(srv.base_url, out))], env=env, cwd=tmp_path,
                               capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "stale" not in again.stderr, again.stderr
    assert _sessions(out)[-1] == ("completed", 1)


def test_a_dead_holders_lock_is_taken_over_and_its_temp_folders_swept(d2k, tmp_path: Path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    out = tmp_path / "r"
    out.mkdir()
    (out / "run.lock").write_text(json.dumps({"pid": dead.pid, "host": os.uname().nodename, "since": "then",
                                              "argv": ["d2kgrade", "run"]}))
    left = tmp_path / "tmp" / f"d2k-sub-{dead.pid}-abc"
    left.mkdir(parents=True)
    (left / "kernel.py").write_text("x")
    mine = tmp_path / "tmp" / f"d2k-sub-{os.getpid()}-abc"  # a live process's folder stays
    mine.mkdir()
    with FakeOpenAI([{"content": "a design"}]) as srv:
        proc = d2k(*_propose(srv.base_url, out), env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "took over a stale lock" in proc.stderr and f"PID {dead.pid}" in proc.stderr
    assert not left.exists() and mine.is_dir()


@pytest.mark.parametrize("damage", ["empty", "garbled", "store_gone"])
def test_a_damaged_store_is_refused_and_touched_not(d2k, tmp_path: Path, damage: str):
    out = tmp_path / "r"
    (out / "episodes" / "softmax.propose.s0").mkdir(parents=True)
    keep = out / "episodes" / "softmax.propose.s0" / "design_note.md"
    keep.write_text("an earlier episode\n")
    db = out / "results.sqlite"
    if damage == "empty":
        db.write_bytes(b"")
        needle = "results.sqlite: is empty (0 bytes)"
    elif damage == "garbled":
        db.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
        needle = "results.sqlite: "
    else:
        needle = "results.sqlite: missing, but"
    before = db.read_bytes() if db.exists() else None
    with FakeOpenAI([{"content": "a design"}]) as srv:
        proc = d2k(*_propose(srv.base_url, out), env=_env(tmp_path))
        assert srv.requests == []
    assert proc.returncode == 1 and needle in one_error_line(proc) and "nothing was changed" in proc.stderr
    assert (db.read_bytes() if db.exists() else None) == before and keep.read_text() == "an earlier episode\n"


def test_reference_run_exit_codes(d2k, tmp_path: Path, mini_suite):
    ok = d2k("run", "--agent", "reference", "--tasks", "softmax", "--device", "cpu", "--out", tmp_path / "ok",
             timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "softmax.reference-triton.s0" in ok.stdout and "1 of 1 expert kernels passed" in ok.stdout
    root = mini_suite("softmax")
    (root / "references" / "softmax" / "triton.py").write_text("def kernel(x):\n    return x\n")
    bad = d2k("run", "--agent", "reference", "--tasks", "softmax", "--device", "cpu", "--out", tmp_path / "bad",
              "--suite", root, timeout=300)
    assert bad.returncode == 1
    assert "1 of 1 expert kernels did not pass: softmax.reference-triton.s0" in one_error_line(bad)
    (root / "references" / "softmax" / "triton.py").write_text("def kernel(x:\n")
    fault = d2k("run", "--agent", "reference", "--tasks", "softmax", "--device", "cpu", "--out", tmp_path / "f",
                "--suite", root)
    assert fault.returncode == 1 and "triton.py: line 1: Python syntax error" in one_error_line(fault)
    assert not (tmp_path / "f" / "results.sqlite").exists()


def test_piped_summary_keeps_every_column(d2k, tmp_path: Path):
    """stdout is a pipe here (capture_output): the table must keep the model and statuses columns whole."""
    out = tmp_path / "r"
    model = "a-rather-long-model-name-that-a-narrow-table-would-squeeze/v2"
    with FakeOpenAI(responder=lambda body: {"content": "design"}) as srv:
        proc = d2k("run", "--model", model, "--base-url", srv.base_url, "--tasks", "softmax", "--arms",
                   "propose", "--seeds", "2", "--device", "cpu", "--out", out, env=_env(tmp_path, COLUMNS=""))
    assert proc.returncode == 0, proc.stderr
    assert model in proc.stdout and "finished 2" in proc.stdout and "…" not in proc.stdout
