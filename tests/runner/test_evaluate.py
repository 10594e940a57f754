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
from runner.evaluator import CPU_ROTATION_RANGE
from runner.stats import seed_hash

HERE = Path(__file__).resolve().parent
ADVERSARIAL = sorted((HERE / "adversarial").glob("*.py"))
HONEST = sorted((HERE / "honest").glob("*.py"))
SEED = 20240611


def header(path: Path) -> dict[str, str]:
    return dict(re.findall(r"^# ([a-z-]+): (.+)$", path.read_text(), re.M))


def run(path: Path, *, tripwires: bool = True, timeout_s: float = 120, hidden: bool = True, **kw) -> EvalResult:
    return run_evaluation("softmax", path, device="cpu", seed=SEED, timeout_s=timeout_s, hidden=hidden,
                          options=EvalOptions(tripwires=tripwires, **kw))


@pytest.mark.parametrize("path", HONEST, ids=lambda p: p.stem)
def test_honest_variants_pass(path: Path) -> None:
    r = run(path)
    assert r.status == "passed", r.message + "\n" + r.log[-2000:]
    assert r.correct and not [f for f in r.flags if f.severity == "reject"]
    smoke, hidden = r.workloads
    assert (smoke.name, hidden.name, hidden.hidden) == ("smoke", "hidden", True)
    assert smoke.trials == 4 and hidden.trials == 2  # three distributions + the repeat trial; hidden: two
    assert CPU_ROTATION_RANGE[0] <= smoke.checked_calls <= CPU_ROTATION_RANGE[1]  # drawn from the secret seed
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
    crashed = run(HERE / "adversarial" / "segfault_signal.py", tripwires=False)
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


def test_a_killed_zygote_is_replaced_and_logs_are_trimmed(tmp_path: Path) -> None:
    import os
    import signal

    from runner import sandbox

    noisy = tmp_path / "noisy.py"
    noisy.write_text("import torch\n\ndef kernel(x):\n    print('HEAD-MARK')\n    print('x' * 100_000)\n"
                     "    print('TAIL-MARK')\n    return torch.empty_like(x)\n")
    run(noisy)  # make sure a zygote is up
    for z in list(sandbox._ZYGOTES.values()):
        os.kill(z.proc.pid, signal.SIGKILL)
        z.proc.wait()
    r = run(noisy)
    assert r.status == "incorrect", r.message
    assert "HEAD-MARK" in r.log and "TAIL-MARK" in r.log and "bytes cut" in r.log and len(r.log) < 20_000


CEILINGS = {"copy_bytes_per_s": 4.0e12, "mufu_per_s": 4.0e12,
            "matmul_flops_per_s": {"bf16": 8e14, "fp16": 8e14, "fp32": 4e14, "fp8": 1.6e15, "int8": 1.6e15}}


def test_timing_path_on_the_host_clock() -> None:
    """The GPU timing path (baselines before the import, rotation, rechecks, batch, statistics, speedups,
    roofline) driven on a CPU with the host clock: plumbing only, the figures mean nothing."""
    path = HERE / "honest" / "rows_per_program.py"
    r = run(path, host_timing=True, ceilings=CEILINGS, compile_baseline=False, target_s=0.05, min_reps=3,
            max_reps=4)
    assert r.status == "passed", r.message + r.log[-3000:]
    smoke = r.workloads[0]
    assert smoke.time.reps >= 3 and smoke.eager.reps >= 3 and smoke.compiled is None
    assert smoke.speedup_eager == pytest.approx(smoke.eager.median_ms / smoke.time.median_ms)
    assert smoke.roofline_floor_ms == pytest.approx(1e3 * 2 * 37 * 1000 * 4 / 4.0e12)
    assert smoke.roofline_fraction == pytest.approx(smoke.roofline_floor_ms / smoke.time.median_ms)
    assert smoke.host_ms is not None and smoke.checked_calls >= 3 + smoke.time.reps
    assert r.workloads[1].time is None  # the hidden workload is never timed
    slow_gpu = {**CEILINGS, "copy_bytes_per_s": 1.0e3}  # a floor of ~0.3 s: the kernel is "impossibly" fast
    rej = run(path, host_timing=True, ceilings=slow_gpu, compile_baseline=False, target_s=0.05, min_reps=3,
              max_reps=4, tripwires=True)
    assert rej.status == "rejected" and "timing.below_roofline" in {f.code for f in rej.flags}



def test_timed_calls_are_rechecked(tmp_path: Path) -> None:
    # Right on the 4 correctness calls (3 distributions + the repeat), garbage from then on: only the recheck
    # of timed outputs can see it.
    src = (HERE / "adversarial" / "first_calls.py").read_text().replace("<= 3", "<= 4")
    late = tmp_path / "late_garbage.py"
    late.write_text(src)
    r = run(late, host_timing=True, ceilings=CEILINGS, compile_baseline=False, target_s=0.05, min_reps=3,
            max_reps=4, hidden=False)
    smoke = r.workloads[0]
    assert smoke.status == "incorrect" and "timed calls returned a wrong output" in smoke.message, smoke.message
    assert r.status == "rejected"  # its later calls launch no Triton kernel either: the profile proof says so
    assert "profile.no_own_kernel" in {f.code for f in r.flags}


def test_the_evaluators_clock_catches_a_host_that_under_reports() -> None:
    """A compromised kernel host can report any event times; the evaluator's own clock around each batch,
    calibrated on a null kernel before the submission was loaded, must not agree with a tenth of the truth."""
    path = HERE / "honest" / "rows_per_program.py"
    kw = dict(host_timing=True, ceilings=CEILINGS, compile_baseline=False, baselines=False, target_s=0.3,
              min_reps=8, max_reps=12, hidden=False)
    honest = run(path, **kw)
    assert honest.status == "passed", honest.message
    smoke = honest.workloads[0]
    assert smoke.evaluator_ms is not None and "timing.untrusted" not in {f.code for f in honest.flags}
    # Where the time went, phase by phase, adds up to the evaluation's wall time.
    assert {"start", "host_start", "calibration", "import", "correctness", "timing"} <= set(honest.phases)
    assert sum(honest.phases.values()) == pytest.approx(honest.wall_s, rel=0.02, abs=0.05), honest.phases
    # ... and the evaluator's own breakdown lies inside the calibration and timing phases it refines.
    d = honest.phase_detail
    assert d["batches"] >= 8 + 3 and 0 < d["host_batch"] + d["host_verify"] + d["buffers"] + d["check"] <= \
        honest.phases["calibration"] + honest.phases["timing"] + 0.05, (d, honest.phases)
    forged = run(path, forge_events=0.1, **kw)
    assert forged.status == "rejected" and "timing.untrusted" in {f.code for f in forged.flags}, forged.message


def test_an_exception_at_import_is_a_compile_error(tmp_path: Path) -> None:
    bad = tmp_path / "raises_at_import.py"
    bad.write_text("import torch\n\nraise ValueError('boom at import')\n\ndef kernel(x):\n    return x\n")
    r = run(bad, hidden=False)
    assert r.status == "compile_error" and "boom at import" in r.message, r.message


@pytest.mark.parametrize(("mutation", "says"), [
    ("\nraise RuntimeError('reference.py is broken')\n", "reference.py: failed to import"),
    ("\n_orig = make_inputs\ndef make_inputs(*a, **k):\n    return _orig(*a, **k) * 2\n", "make_inputs"),
])
def test_a_task_fault_is_never_blamed_on_the_submission(tmp_path: Path, mutation: str, says: str) -> None:
    import shutil

    root = HERE.parent.parent
    suite = tmp_path / "suite"
    for part in ("tasks/softmax", "references/softmax"):
        shutil.copytree(root / part, suite / part)
    ref = suite / "tasks" / "softmax" / "reference.py"
    ref.write_text(ref.read_text() + mutation)
    with pytest.raises(UserError, match=says) as info:
        run_evaluation("softmax", HONEST[0], suite_root=suite, device="cpu", seed=SEED, hidden=False,
                       options=EvalOptions())
    assert "not of the submission" in str(info.value)


def test_a_small_staging_budget_chunks_the_batches_and_the_verify_steps(tmp_path: Path) -> None:
    """A budget of two reps' outputs (``budget_bytes``; on the H200, 30% of free memory against cross_entropy's
    4.8 GB rows): the calibration's batches and the probe are cut to it, the timed reps run in chunks of two on the
    same input sets, and no verify step fetches more than two rows. An honest kernel still passes; one that turns
    wrong after its correctness calls is still caught."""
    out_bytes = 37 * 1000 * 4  # the smoke workload's one fp32 output
    kw = dict(host_timing=True, ceilings=CEILINGS, compile_baseline=False, baselines=False, target_s=0.05,
              min_reps=7, max_reps=8, hidden=False, budget_bytes=2 * out_bytes)
    honest = run(HERE / "honest" / "rows_per_program.py", **kw)
    assert honest.status == "passed", honest.message + honest.log[-3000:]
    smoke = honest.workloads[0]
    reps = smoke.time.reps
    assert reps >= 7 and smoke.checked_calls >= reps
    d = honest.phase_detail
    # 8 calibration batches, the probe, ceil(reps / 2) chunks, the cross-check
    assert d["batches"] == 8 + 1 + -(-reps // 2) + 1, d
    assert d["verify_rows_max"] == 2, d
    unchunked = run(HERE / "honest" / "rows_per_program.py", **{**kw, "budget_bytes": None})
    u = unchunked.phase_detail
    assert unchunked.status == "passed" and u["batches"] == 8 + 1 + 1 + 1 and u["verify_rows_max"] > 2, u
    src = (HERE / "adversarial" / "first_calls.py").read_text().replace("<= 3", "<= 4")
    late = tmp_path / "late_garbage.py"
    late.write_text(src)
    r = run(late, **kw)
    assert r.workloads[0].status == "incorrect" and "timed calls returned a wrong output" in r.workloads[0].message
