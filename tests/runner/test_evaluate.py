"""The evaluator end to end on CPU (Triton interpreter, softmax smoke workload): honest kernels pass, every
exploit family in ``adversarial/`` does not, and each failure mode becomes its status.

Each adversarial file says in its header what the full evaluator must answer (``# expect:``) and, where a
static tripwire answers first, what the runtime defences behind it answer when the tripwires are off
(``# runtime:``), so both layers are tested. Fixed seeds keep the runs reproducible.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from d2kgrade.errors import UserError
from d2kgrade.records import EvalResult
from runner.evaluate import EvalOptions, evaluate, run_evaluation
from runner.stats import seed_hash

HERE = Path(__file__).resolve().parent
ADVERSARIAL = sorted((HERE / "adversarial").glob("*.py"))
HONEST = sorted((HERE / "honest").glob("*.py"))
SEED = 20240611


def header(path: Path) -> dict[str, str]:
    return dict(re.findall(r"^# ([a-z-]+): (.+)$", path.read_text(), re.M))


def run(path: Path, *, tripwires: bool = True, timeout_s: float = 120, **kw) -> EvalResult:
    return run_evaluation("softmax", path, device="cpu", seed=SEED, timeout_s=timeout_s,
                          options=EvalOptions(tripwires=tripwires, **kw))


@pytest.mark.parametrize("path", HONEST, ids=lambda p: p.stem)
def test_honest_variants_pass(path: Path) -> None:
    r = run(path)
    assert r.status == "passed", r.message + "\n" + r.log[-2000:]
    assert r.correct and not [f for f in r.flags if f.severity == "reject"]
    smoke, hidden = r.workloads
    assert (smoke.name, hidden.name, hidden.hidden) == ("smoke", "hidden", True)
    assert smoke.trials == 4 and hidden.trials == 2  # three distributions + the repeat trial; hidden: two
    assert smoke.checked_calls == 3
    assert hidden.params != smoke.params
    assert r.environment.interpreter and r.environment.device == "cpu" and smoke.time is None


@pytest.mark.parametrize("path", ADVERSARIAL, ids=lambda p: p.stem)
def test_adversarial_submission_does_not_pass(path: Path) -> None:
    spec = header(path)
    assert "expect" in spec, f"{path.name} lacks an '# expect:' header"
    timeout = float(spec.get("timeout", 120))
    r = run(path, timeout_s=timeout)
    assert r.status != "passed" and not r.correct
    assert r.status in spec["expect"].split("|"), f"{r.status}: {r.message}"
    if "flag" in spec:
        assert spec["flag"] in {f.code for f in r.flags}, r.flags
    if r.status == "rejected":
        assert any(f.severity == "reject" for f in r.flags)
    if "runtime" in spec and spec["runtime"] != "passed":
        rt = run(path, tripwires=False, timeout_s=timeout)
        assert rt.status in spec["runtime"].split("|"), f"runtime: {rt.status}: {rt.message}"
        assert not rt.correct
        if "runtime-flag" in spec:
            assert spec["runtime-flag"] in {f.code for f in rt.flags}, rt.flags


def test_static_rejection_names_the_line() -> None:
    r = run(HERE / "adversarial" / "torch_op.py")
    flag = next(f for f in r.flags if f.code == "static.forbidden_op")
    assert flag.line == 9 and "torch.nn.functional.softmax" in flag.message
    assert r.workloads == [] and r.log == ""  # nothing ran


def test_fake_json_on_stdout_stays_in_the_log() -> None:
    r = run(HERE / "adversarial" / "fake_stdout.py", tripwires=False)
    assert r.status == "crashed" and "exited with code 0" in r.message
    assert "FAKE-RESULT" in r.log and "FAKE-RESULT" not in r.message


def test_secrets_never_reach_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh (spawned) worker started while the caller holds secrets prints its whole environment."""
    secrets = {"OPENAI_API_KEY": "sk-d2k-test-1", "AWS_SECRET_ACCESS_KEY": "aws-d2k-test-2",
               "GITHUB_TOKEN": "ghp-d2k-test-3", "DB_PASSWORD": "pw-d2k-test-4", "MY_SERVICE_CREDENTIALS": "c-5",
               "UNLISTED_VARIABLE": "plain-d2k-test-6"}
    for k, v in secrets.items():
        monkeypatch.setenv(k, v)
    r = run(HERE / "adversarial" / "read_secrets.py", tripwires=False, mode="spawn")
    assert r.status == "passed", r.message  # it computes honestly; it just learns nothing worth having
    assert "ENV PATH" in r.log
    for v in secrets.values():
        assert v not in r.log and v not in r.model_dump_json()


def test_crash_then_clean_run_and_error_statuses(tmp_path: Path) -> None:
    crashed = run(HERE / "adversarial" / "segfault.py", tripwires=False)
    assert crashed.status == "crashed" and "signal 11" in crashed.message
    raising = tmp_path / "raises.py"
    raising.write_text("import torch\n\ndef kernel(x):\n    raise ValueError('boom from the kernel')\n")
    r = run(raising)
    assert r.status == "runtime_error" and "boom from the kernel" in r.message
    assert "runner/worker.py" not in r.message  # the harness's own frames are cut from the traceback
    wrong_dtype = tmp_path / "wrong_dtype.py"
    wrong_dtype.write_text("import torch\n\ndef kernel(x):\n    return torch.zeros(x.shape, dtype=torch.float64)\n")
    r = run(wrong_dtype)
    assert r.status == "incorrect" and "dtype fp64, expected fp32" in r.message


def test_compile_errors_need_no_worker(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def kernel(x:\n    return x\n")
    r = run(bad)
    assert r.status == "compile_error" and "line 1" in r.message and r.log == ""
    binary = tmp_path / "bin.py"
    binary.write_bytes(b"\x00\x01\x02")
    assert run(binary).status == "compile_error"
    no_kernel = tmp_path / "nok.py"
    no_kernel.write_text("import torch\n\ndef other(x):\n    return x\n")
    r = run(no_kernel)
    assert r.status == "compile_error" and "no callable kernel" in r.message
    assert "static.no_kernel" in {f.code for f in r.flags}


def test_user_mistakes_raise(tmp_path: Path) -> None:
    sub = HONEST[0]
    with pytest.raises(UserError, match="unknown task"):
        evaluate("no_such_task", sub, device="cpu")
    with pytest.raises(UserError, match="file not found"):
        evaluate("softmax", tmp_path / "missing.py", device="cpu")
    with pytest.raises(UserError, match="no workload"):
        evaluate("softmax", sub, device="cpu", workloads=["rows_5k"])
    with pytest.raises(UserError, match="only 'smoke' runs"):
        evaluate("softmax", sub, device="cpu", workloads=["rows_4k"])
    with pytest.raises(UserError, match="--device"):
        evaluate("softmax", sub, device="tpu")


def test_cli_json_is_an_eval_result() -> None:
    from d2kgrade.cli import app

    path = HERE / "honest" / "rows_per_program.py"
    res = CliRunner().invoke(app, ["eval", "softmax", str(path), "--device", "cpu", "--seed", "7", "--json",
                                   "--no-hidden"])
    assert res.exit_code == 0, res.output
    r = EvalResult.model_validate(json.loads(res.stdout))
    assert (r.task, r.status, r.correct) == ("softmax", "passed", True)
    assert [w.name for w in r.workloads] == ["smoke"] and r.environment.torch
    assert r.seed_hash == seed_hash(7) and '"seed"' not in res.stdout
    bad = CliRunner().invoke(app, ["eval", "softmax", "/nonexistent/k.py", "--device", "cpu"])
    assert bad.exit_code == 1
