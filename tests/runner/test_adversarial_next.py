"""The red team of issues 14 and 15: every file in ``adversarial_next/`` through the real evaluator on CPU.

Each file is one attack class (its header says what it tries, ``# exploit:``, and which statuses a sound evaluator
may answer, ``# expect:``; never ``passed``). Canary secrets are planted in this process's environment; files
marked ``# isolate: subprocess`` (they read ancestors' /proc or signal the evaluator) run the evaluation in a child
process of their own whose initial environment holds them, so a successful attack only reaches that child. The
checks (status, canaries in four encodings, markers of processes that outlive the evaluation, leaked suite files,
an unchanged suite, a bounded log) are the ones ``benchmarks/adversarial_sweep.py`` applies to the CLI.

25 of the 40 attacks beat the evaluator of commit b5c38cb (docs/threat-model.md); every one is stopped by the
evaluator split (a trusted evaluator, an untrusted kernel host) and the checks that followed it. Of the 40, one
(``reuse_output_buffer``) turned out honest and moved to ``honest/``, and ``stale_after_20`` became a property of
the call-count draw (``test_parent_logic.test_rotated_call_count_has_no_fixed_top``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import adversarial_sweep as sweep
from d2kgrade.records import EVAL_STATUSES
from tests.fakes.openai_server import FakeOpenAI
from tests.runner_agent.helpers import step, tool_call

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NEXT = sorted(p for p in (HERE / "adversarial_next").glob("*.py") if not p.name.startswith("_"))
SEED = sweep.SEEDS[0]

# The evaluation in a child process: the submission's and the suite's paths are on its command line (the
# attacks that signal or tamper find their evaluator and its suite there), and its environment is this one's.
_CHILD = ("import sys; from pathlib import Path; from runner.evaluate import run_evaluation; "
          "r = run_evaluation('softmax', Path(sys.argv[1]), suite_root=Path(sys.argv[2]), device='cpu', "
          "seed=int(sys.argv[3]), timeout_s=float(sys.argv[4])); print(r.model_dump_json())")


@pytest.fixture(scope="module")
def shared_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sweep.copy_suite(ROOT, tmp_path_factory.mktemp("suite"))


@pytest.fixture
def canaries(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = sweep.make_canaries()
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    return values


def _in_process(prep: sweep.Prepared, timeout: float) -> tuple[str | None, list[str], str | None]:
    from runner.evaluate import run_evaluation

    r = run_evaluation("softmax", prep.path, suite_root=prep.suite, device="cpu", seed=SEED, timeout_s=timeout)
    texts = [r.model_dump_json(), r.log, r.message, *(f.message for f in r.flags),
             *(w.message for w in r.workloads)]
    return r.status, texts, r.log


def _in_child(prep: sweep.Prepared, timeout: float) -> tuple[str | None, list[str], str | None]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(prep.path), str(prep.suite), str(SEED),
                             str(timeout)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", env=env, cwd=prep.suite, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout + 120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the child's own session
        out, err = proc.communicate()
    try:
        data = json.loads(out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return None, [out, err], None
    texts = [out, err, data.get("log", ""), data.get("message", ""),
             *(f.get("message", "") for f in data.get("flags", []))]
    return data.get("status"), texts, data.get("log", "")


# --------------------------------------------------------------------------------------------- the attacks


# Not `slow`: the default run (CI) must prove that every attack is stopped (~4 CPU-s each).
@pytest.mark.parametrize("path", NEXT, ids=lambda p: p.stem)
def test_attack_is_stopped(path: Path, tmp_path: Path, shared_suite: Path, canaries: dict[str, str]) -> None:
    prep = sweep.prepare(path, tmp_path, shared_suite=shared_suite)
    timeout = float(prep.spec.get("timeout", 120))
    try:
        run = _in_child if prep.spec.get("isolate") == "subprocess" else _in_process
        status, texts, log = run(prep, timeout)
        found = sweep.problems(prep, status=status, texts=texts, canaries=canaries, seed=SEED, log=log,
                               ended_at=time.time())
    finally:
        prep.cleanup()
    assert not found, f"{path.name} ({status}): " + "; ".join(found)


LOG_ATTACK = (HERE / "adversarial_next" / "proc_environ_log.py").read_text()
RAISE_ATTACK = (HERE / "adversarial_next" / "proc_environ_exception.py").read_text()


def test_agent_run_leaks_no_canary(tmp_path: Path) -> None:
    """An agent tests two kernels that read the ancestors' environments (one prints them, one raises them) and
    submits the second, in a ``d2kgrade run`` started with canaries in its environment: none may reach the
    model (tool results), the transcript, the store or any file of the episode."""
    values = sweep.make_canaries()
    script = [{"content": "Design: read the environment."},
              step(tool_call("write_file", path="kernel.py", content=LOG_ATTACK), tool_call("test")),
              step(tool_call("write_file", path="kernel.py", content=RAISE_ATTACK), tool_call("test")),
              step(tool_call("submit")),
              {"content": "done"}]
    out = tmp_path / "run"
    env = {**os.environ, **values, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    with FakeOpenAI(script) as srv:
        proc = subprocess.run([sys.executable, "-c", "from d2kgrade.cli import main; main()", "run", "--model",
                               "fake-model", "--base-url", srv.base_url, "--tasks", "softmax", "--arms", "guided",
                               "--device", "cpu", "--concurrency", "1", "--out", str(out)],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900,
                              start_new_session=True)
    # The last request carries the whole conversation: every tool result the model was shown.
    tool_results = [m.get("content") or "" for m in srv.requests[-1]["messages"] if m["role"] == "tool"]
    tests = [t for t in tool_results if t.startswith("test kernel.py")]
    assert len(tests) == 2, (proc.returncode, proc.stderr[-2000:], tool_results)
    places = {"tool results": "\n".join(tool_results), "stdout": proc.stdout, "stderr": proc.stderr}
    for f in sorted(p for p in out.rglob("*") if p.is_file()):
        places[str(f.relative_to(out))] = f.read_bytes().decode(errors="replace")
    assert "transcript.jsonl" in " ".join(places) and "results.sqlite" in " ".join(places), sorted(places)
    leaks = {where: [name for name, value in values.items() if any(f in text for f in sweep.encodings(value))]
             for where, text in places.items()}
    assert not {k: v for k, v in leaks.items() if v}, {k: len(v) for k, v in leaks.items() if v}


# --------------------------------------------------------------------------------------------- our own checks


@pytest.mark.parametrize("path", NEXT, ids=lambda p: p.stem)
def test_every_attack_states_what_it_does_and_what_stops_it(path: Path) -> None:
    spec = sweep.header(path)
    assert spec.get("exploit") and spec.get("expect"), f"{path.name}: needs '# exploit:' and '# expect:'"
    allowed = sweep.expected(spec)
    assert "passed" not in allowed and allowed <= set(EVAL_STATUSES), allowed
    if "marker" in spec:
        assert spec["marker"] in ("never", "not-after-end") and sweep.MARKER_LINE.search(path.read_text())
    if "leak-file" in spec:
        assert (ROOT / spec["leak-file"]).is_file()
    assert set(spec) <= {"exploit", "expect", "issue", "isolate", "marker", "leak-file", "secret", "max-log",
                         "suite", "timeout", "flag"}, sorted(spec)


def test_the_checks_catch_each_failure(tmp_path: Path) -> None:
    """The contract checks fail where they should: a pass, an unexpected status, each canary encoding, the seed, a
    leaked suite line, an oversized log, a changed suite, markers."""
    suite = sweep.copy_suite(ROOT, tmp_path)
    src = tmp_path / "probe.py"
    src.write_text('# exploit: x\n# expect: incorrect\n# secret: seed\n# max-log: 10\n'
                   '# leak-file: references/softmax/triton.py\n# marker: never\nMARKER_DIR = "/nowhere"\n')
    prep = sweep.prepare(src, tmp_path, suite_source=ROOT, shared_suite=suite)
    assert str(prep.marker_dir) in prep.path.read_text()
    canary = {"OPENAI_API_KEY": "d2kCANARY-test"}

    def check(status: str | None = "incorrect", text: str = "", log: str = "") -> list[str]:
        return sweep.problems(prep, status=status, texts=[text], canaries=canary, seed=SEED, log=log,
                              ended_at=time.time())

    assert check() == []
    assert check(status="passed") and check(status="rejected") and check(status=None)
    for form in sweep.encodings("d2kCANARY-test"):
        assert check(text=f"...{form}...") == ["canary OPENAI_API_KEY leaked (1 of 4 encodings)"]
    assert check(text=f"seed={SEED}") and check(log="x" * 11)
    expert = next(ln for ln in (suite / "references/softmax/triton.py").read_text().splitlines() if len(ln) > 60)
    assert check(text=expert)
    (prep.marker_dir / "shell_ran.txt").write_text("0")
    assert check() and (prep.marker_dir / "shell_ran.txt").unlink() is None
    (suite / "tasks" / "softmax" / "reference.py").write_text("changed")
    assert check() == ["the suite changed on disk during the evaluation"]
    prep.cleanup()
    shutil.rmtree(suite)


def test_late_markers_and_live_processes_are_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, "LATE_WAIT_S", 0.0)
    src = tmp_path / "late.py"
    src.write_text('# exploit: x\n# expect: incorrect\n# marker: not-after-end\nMARKER_DIR = "/nowhere"\n')
    prep = sweep.prepare(src, tmp_path, shared_suite=sweep.copy_suite(ROOT, tmp_path))
    ended = time.time() - 5
    (prep.marker_dir / "orphan.heartbeat").write_text("beat")
    (prep.marker_dir / "orphan.pid").write_text(str(os.getpid()))  # this process: alive
    found = sweep.marker_problems(prep, ended)
    assert len(found) == 2 and "outlived" in found[0] and "still alive" in found[1]
    # Written before the end: only the pid. (An end in the future would make marker_problems sleep until it.)
    assert sweep.marker_problems(prep, time.time()) == found[1:]
    prep.cleanup()
