"""Task-defined checks for outputs that are not unique, in the sandboxed evaluator (CPU, Triton interpreter):
``topk``'s ``check`` judges the indices in the correctness trials, the CPU rotation and the timed rechecks.

The submission (``custom_checks/topk_bisect.py``) takes tied values in decreasing index order: valid, and unlike
the reference's canonical order on the bf16 smoke workload (its ``coarse_ties`` distribution ties dozens of
elements at the k-th value). Its variants spoil the indices one way each, from a given call on.
"""

from __future__ import annotations

import shutil
import types
from pathlib import Path

import pytest
import torch

from d2kgrade.schema import Task
from runner.checks import TaskRecheck, judge
from runner.evaluate import EvalOptions, default_suite_root, run_evaluation
from runner.inputs import WorkloadSpec

HERE = Path(__file__).resolve().parent
SUBMISSION = HERE / "custom_checks" / "topk_bisect.py"
SEED = 20240611
CEILINGS = {"copy_bytes_per_s": 4.0e12, "mufu_per_s": 4.0e12,
            "matmul_flops_per_s": {"bf16": 8e14, "fp16": 8e14, "fp32": 4e14, "fp8": 1.6e15, "int8": 1.6e15}}
HOST_TIMING = {"host_timing": True, "ceilings": CEILINGS, "compile_baseline": False, "target_s": 0.05,
               "min_reps": 3, "max_reps": 4}


def variant(tmp_path: Path, mode: str, from_call: int = 1) -> Path:
    src = SUBMISSION.read_text()
    assert 'MODE = "valid"' in src and "FROM_CALL = 1" in src
    path = tmp_path / f"topk_{mode}_{from_call}.py"
    path.write_text(src.replace('MODE = "valid"', f'MODE = "{mode}"').replace("FROM_CALL = 1",
                                                                             f"FROM_CALL = {from_call}"))
    return path


def run(path: Path, *, suite_root: Path | None = None, hidden: bool = False, **kw: object):
    return run_evaluation("topk", path, suite_root=suite_root, device="cpu", seed=SEED, timeout_s=120,
                          hidden=hidden, options=EvalOptions(**kw))  # type: ignore[arg-type]


@pytest.mark.parametrize("timed", [False, True], ids=["rotation", "host-timing"])
def test_valid_non_canonical_ties_pass(timed: bool) -> None:
    r = run(SUBMISSION, hidden=not timed, **(HOST_TIMING if timed else {}))
    assert r.status == "passed", r.message + "\n" + r.log[-2000:]
    smoke = r.workloads[0]
    assert smoke.trials == 4 and [w.trials for w in r.workloads[1:]] == ([] if timed else [2])
    assert (smoke.time is not None) == timed
    assert smoke.checked_calls >= (3 + smoke.time.reps if timed else 3)
    # The task's check ran in place of the elementwise comparison of the indices.
    assert [e.name for e in smoke.errors] == ["values", "indices", "indices"]


def test_the_same_ties_fail_an_elementwise_comparison(tmp_path: Path) -> None:
    """The control: a suite whose topk defines no CHECKED_OUTPUTS compares the indices elementwise, and the same
    submission fails there, so the test above passes because of the task's check."""
    suite = tmp_path / "suite"
    shutil.copytree(default_suite_root() / "tasks" / "topk", suite / "tasks" / "topk")
    ref = suite / "tasks" / "topk" / "reference.py"
    ref.write_text(ref.read_text().replace('CHECKED_OUTPUTS = ("indices",)', "CHECKED_OUTPUTS = ()"))
    r = run(SUBMISSION, suite_root=suite)
    assert r.status == "incorrect" and "indices:" in r.message and "out of tolerance" in r.message, r.message


@pytest.mark.parametrize(("mode", "says"), [
    ("duplicate", "rows repeat an index"),
    ("out_of_range", "indices outside [0, "),
    ("wrong_value", "point at a value other than the k largest"),
])
def test_invalid_indices_are_incorrect(tmp_path: Path, mode: str, says: str) -> None:
    r = run(variant(tmp_path, mode))
    assert r.status == "incorrect" and not r.correct, r.message
    assert says in r.message, r.message


def test_rotated_calls_are_judged_by_the_check(tmp_path: Path) -> None:
    # Valid on the 4 correctness calls (2 distributions, trials=3, + the repeat), duplicates from then on.
    r = run(variant(tmp_path, "duplicate", from_call=5))
    smoke = r.workloads[0]
    assert smoke.trials == 4 and smoke.status == "incorrect", smoke.message
    assert "repeated calls on rotated inputs were wrong" in smoke.message and "repeat an index" in smoke.message


def test_timed_calls_are_judged_by_the_check(tmp_path: Path) -> None:
    r = run(variant(tmp_path, "wrong_value", from_call=5), **HOST_TIMING)
    smoke = r.workloads[0]
    assert smoke.status == "incorrect", smoke.message
    assert "timed calls returned a wrong output" in smoke.message and "point at a value other" in smoke.message


# --------------------------------------------------------------------------------------------- the pieces


def _topk_case(k: int = 3) -> tuple[WorkloadSpec, types.ModuleType, torch.Tensor]:
    from runner.direct import load_reference

    root = default_suite_root() / "tasks" / "topk"
    from d2kgrade.io import load_model

    task = load_model(Task, root / "task.yaml")
    wl = task.smoke.model_copy(update={"params": {"B": 2, "V": 7, "k": k}})
    x = torch.tensor([[3.0, 1.0, 3.0, 0.5, 3.0, -1.0, 2.0], [0.0, 4.0, 4.0, 1.0, 2.0, 2.0, 2.0]],
                     dtype=torch.bfloat16)
    return WorkloadSpec.resolve(task, wl), load_reference(root), x


def test_judge_accepts_any_valid_tie_choice_and_names_the_problem() -> None:
    spec, ref, x = _topk_case()
    expected = ref.reference(x, k=3)
    values = expected[0].clone()
    good = torch.tensor([[4, 2, 0], [2, 1, 4]])  # ties reordered; row 1 takes index 4 of the three tied 2.0s
    res = judge(spec.task, spec, ref, (values, good), expected, (x,), torch.device("cpu"))
    assert all(m.ok for m in res) and [m.name for m in res] == ["values", "indices", "indices"]
    dup = torch.tensor([[4, 4, 0], [2, 1, 4]])
    res = judge(spec.task, spec, ref, (values, dup), expected, (x,), torch.device("cpu"))
    assert not res[-1].ok and "repeat an index" in res[-1].reason
    wrong_dtype = judge(spec.task, spec, ref, (values, good.int()), expected, (x,), torch.device("cpu"))
    assert not wrong_dtype[1].ok and "dtype" in wrong_dtype[1].reason and len(wrong_dtype) == 2  # check not run


def test_recheck_runs_the_check_when_the_batch_settles_and_poisons_its_copies() -> None:
    spec, ref, x = _topk_case()
    expected = ref.reference(x, k=3)
    seen: list[str] = []
    real_check = ref.check
    fake = types.ModuleType("fake_ref")
    fake.CHECKED_OUTPUTS = ("indices",)  # type: ignore[attr-defined]

    def check(inputs, outputs, exp, scalars):  # noqa: ANN001, ANN202
        seen.append("check")
        return real_check(inputs, outputs, exp, scalars)

    fake.check = check  # type: ignore[attr-defined]
    tols = [(0.0, 0.0), (0.0, 0.0)]
    rc = TaskRecheck([expected], tols, torch.device("cpu"), ref=fake, spec=spec, contents=[(x,)])
    out = (expected[0].clone(), torch.tensor([[4, 2, 0], [2, 1, 4]]))
    rc(0, out)
    assert bool(torch.all(out[1] == -1)) and seen == []  # the kernel's indices are poisoned once copied
    rc.settle()
    assert seen == ["check"] and rc.problems == [] and rc.calls == 1
    rc(0, (expected[0].clone(), torch.tensor([[4, 4, 0], [2, 1, 4]])))
    rc.settle()
    assert seen == ["check", "check"] and rc.problems and "repeat" in rc.problems[0]
