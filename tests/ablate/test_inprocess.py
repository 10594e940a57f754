"""benchmarks/inprocess_eval.py (the references' ablation without the sandbox) and the supervisor of
``ablate_references.py --in-process``, on the CPU: right kernels pass, wrong ones fail as the sandboxed evaluator
would fail them, timing returns what it measured, and a process that dies costs one reference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import benchmarks.ablate_references as bench
REPO = Path(__file__).resolve().parents[2]

pytest.importorskip("torch")

from benchmarks.inprocess_eval import InProcessEvaluator  # noqa: E402

SOFTMAX = REPO / "references" / "softmax" / "triton.py"


@pytest.fixture(scope="module")
def ev() -> InProcessEvaluator:
    return InProcessEvaluator(REPO, target_s=0.01, min_reps=3, max_reps=8)


def _kernel(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text("import torch\n\n\ndef kernel(x, **scalars):\n" + body)
    return path


def test_the_reference_passes_on_smoke_and_hidden(ev: InProcessEvaluator) -> None:
    res = ev("softmax", SOFTMAX, device="cpu", workloads="all", seed=0, hidden=True)
    assert res.status == "passed" and res.correct, res.message
    assert [w.name for w in res.workloads] == ["smoke", "hidden"]
    assert all(w.trials >= 1 and w.errors and all(e.ok for e in w.errors) for w in res.workloads)
    assert res.environment.sandbox.startswith("none")


@pytest.mark.parametrize(("body", "status", "says"), [
    ("    return torch.softmax(x.float(), -1).to(x.dtype) * 1.05\n", "incorrect", "out of tolerance"),
    ("    return torch.softmax(x.double(), -1)\n", "incorrect", "dtype"),
    ("    raise RuntimeError('no luck')\n", "runtime_error", "no luck"),
    ("    return (\n", "compile_error", "SyntaxError"),
])
def test_a_wrong_kernel_fails_with_the_evaluators_status(ev: InProcessEvaluator, tmp_path: Path, body: str,
                                                         status: str, says: str) -> None:
    res = ev("softmax", _kernel(tmp_path, status, body), device="cpu", workloads="all", seed=0, hidden=False)
    assert res.status == status and not res.correct
    assert says in (res.message + " ".join(w.message for w in res.workloads))


def test_draws_are_kept_per_task_and_dropped_for_the_next(ev: InProcessEvaluator, tmp_path: Path) -> None:
    """A kernel that mutates its input does not change the next kernel's draw (each call gets clones)."""
    bad = _kernel(tmp_path, "mutates", "    out = torch.softmax(x.float(), -1).to(x.dtype)\n    x.zero_()\n"
                                       "    return out\n")
    assert ev("softmax", bad, device="cpu", workloads="all", seed=3, hidden=False).correct
    assert ev("softmax", SOFTMAX, device="cpu", workloads="all", seed=3, hidden=False).correct
    ev("swiglu", REPO / "references" / "swiglu" / "triton.py", device="cpu", workloads="all", seed=3, hidden=False)
    assert ev._task is not None and ev._task[0] == "swiglu"
    assert all(k[1] == 3 for k in ev._draws) and len(ev._modules) == 1


def test_kept_draws_stay_within_their_budget_and_are_made_again_the_same(tmp_path: Path) -> None:
    """Round 16: paged_attention_decode's draws, all kept, ran the H200 out of memory. Past the budget the oldest
    draws are dropped and made again when needed, from the same seed: the verdict does not change."""
    roomy = InProcessEvaluator(REPO, target_s=0.01)
    assert roomy("softmax", SOFTMAX, device="cpu", workloads="all", seed=5, hidden=False).correct
    first = roomy.draws_made
    assert first >= 2 and len(roomy._draws) == first  # all kept when they fit
    tight = InProcessEvaluator(REPO, target_s=0.01)
    tight.draw_budget = 1  # room for none: each draw is dropped before the next is made
    wrong = _kernel(tmp_path, "wrong", "    return torch.softmax(x.float(), -1).to(x.dtype) * 1.01\n")
    assert tight("softmax", SOFTMAX, device="cpu", workloads="all", seed=5, hidden=False).correct
    assert len(tight._draws) == 1 and tight.draws_made == first
    res = tight("softmax", wrong, device="cpu", workloads="all", seed=5, hidden=False)
    assert res.status == "incorrect" and not res.correct and tight.draws_made > first
    (key, (inputs, expected)), = tight._draws.items()  # the last draw, made again
    import torch

    same = [torch.equal(a, b) for a, b in zip((*inputs, expected), (*roomy._draws[key][0], roomy._draws[key][1]),
                                              strict=True) if isinstance(a, torch.Tensor)]
    assert same and all(same)


def test_timing_returns_its_repetitions(ev: InProcessEvaluator) -> None:
    import torch

    from runner.evaluate import load_task
    from runner.inputs import WorkloadSpec

    task = load_task(REPO, "softmax")
    spec = WorkloadSpec.resolve(task, task.smoke)
    calls = []

    def kernel(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return torch.softmax(x.float(), -1).to(x.dtype)

    t = ev.time(kernel, (torch.randn(64, 128, dtype=torch.float16),), spec)
    assert 3 <= t.reps <= 8 and len(calls) == 3 + t.reps and 0 < t.min_ms <= t.median_ms


def test_the_cpu_dry_run_in_process_breaks_what_the_sandbox_breaks(tmp_path: Path, monkeypatch) -> None:
    """rmsnorm_residual without its fp32 sum of squares fails on the smoke workload (as in docs/ablation.md's
    sandboxed dry run); the vector-io variant passes and stays untimed on the CPU."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    argv = ["--device", "cpu", "--in-process", "--child", "--tasks", "rmsnorm_residual", "--properties",
            "L1.fp32-sumsq", "L3.vector-io", "--jsonl", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "a.json"),
            "--work-dir", str(tmp_path / "work")]
    data = bench.run(bench.parse(argv))
    by = {r["property"]: r["status"] for r in data["records"]}
    assert by == {"rmsnorm_residual.L1.fp32-sumsq": "broke_correctness", "rmsnorm_residual.L3.vector-io": "untimed"}
    assert data["evaluator"].startswith("in-process") and data["crashed"] == []
    assert sorted(p.name for p in (tmp_path / "work" / "rmsnorm_residual").iterdir()) == [
        "rmsnorm_residual_L1_fp32_sumsq.py", "rmsnorm_residual_L3_vector_io.py"]


def _opt(argv: list[str], flag: str) -> list[str]:
    """The values after ``flag`` in a command line, up to the next option."""
    if flag not in argv:
        return []
    rest = argv[argv.index(flag) + 1:]
    return rest[:next((i for i, a in enumerate(rest) if a.startswith("--")), len(rest))]


class Proc:
    """A child process that exits with ``rc``, or runs until killed (``rc=None``)."""

    def __init__(self, rc: int | None) -> None:
        self.rc = rc
        self.killed = False

    def poll(self) -> int | None:
        return self.rc

    def kill(self) -> None:
        self.killed, self.rc = True, -9

    def wait(self) -> int:
        assert self.rc is not None
        return self.rc


class Clock:
    """Time that passes only when the supervisor sleeps."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def _mark(path: Path, task: str, prop: str | None = None, step: str = "correctness") -> None:
    bench.write_marker(path, task, prop, step)


def test_the_supervisor_warms_in_parallel_then_goes_on_past_a_crash(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TRITON_CACHE_AUTOTUNING", "1")
    args = bench.parse(["--in-process", "--warm-jobs", "2", "--tasks", "softmax", "swiglu", "layernorm",
                        "--work-dir", str(tmp_path / "w"), "--budget-s", "100"])
    args.jsonl, args.out = tmp_path / "a.jsonl", tmp_path / "a.json"
    spawned: list[tuple[list[str], dict | None]] = []
    current = tmp_path / "a.jsonl.current"

    def spawn(argv: list[str], env: dict | None = None) -> Proc:
        spawned.append((argv, env))
        if "--check-only" in argv:
            return Proc(0)
        timed = [a for a, _ in spawned if "--check-only" not in a]
        if len(timed) == 1:  # the first timed process dies on swiglu's original
            _mark(current, "swiglu")
            return Proc(-11)
        return Proc(0)

    assert bench.supervise(args, ["softmax", "swiglu", "layernorm"], spawn=spawn, sleep=lambda s: None) == 1
    warm = [(a, e) for a, e in spawned if "--check-only" in a]
    assert [_opt(a, "--tasks") for a, _ in warm] == [["softmax", "layernorm"], ["swiglu"]]
    assert all(e is not None and "TRITON_CACHE_AUTOTUNING" not in e for _, e in warm)
    assert [_opt(a, "--jsonl") for a, _ in warm] == [[str(tmp_path / "w" / "warm" / f"warm{i}.jsonl")]
                                                     for i in range(2)]
    timed = [a for a, _ in spawned if "--check-only" not in a]
    assert len(timed) == 2 and _opt(timed[0], "--crashed") == [] and _opt(timed[1], "--crashed") == ["swiglu"]
    assert _opt(timed[1], "--tasks") == ["softmax", "swiglu", "layernorm"] and _opt(timed[1], "--lost") == []
    assert 0 <= float(_opt(timed[1], "--budget-s")[0]) <= 100


def test_the_supervisor_stops_on_an_exit_outside_a_reference(tmp_path: Path) -> None:
    args = bench.parse(["--in-process", "--tasks", "softmax", "--work-dir", str(tmp_path / "w")])
    args.jsonl, args.out = tmp_path / "a.jsonl", tmp_path / "a.json"
    spawned = []
    assert bench.supervise(args, ["softmax"], spawn=lambda argv, **kw: spawned.append(argv) or Proc(1),
                           sleep=lambda s: None) == 1
    assert len(spawned) == 1


def test_a_variant_that_hangs_a_warm_process_is_lost_for_every_process(tmp_path: Path) -> None:
    """Round 15's first machine: histogram's strategy-by-bins variant ran 500 s and more in a warm process. Past
    --step-timeout-s the warm process is killed and restarted without that variant, and the timed process is
    told it was lost (it records it, never runs it); a reference whose original hangs is named under crashed."""
    args = bench.parse(["--in-process", "--warm-jobs", "2", "--tasks", "histogram", "softmax", "--work-dir",
                        str(tmp_path / "w"), "--step-timeout-s", "50", "--warm-timeout-s", "400"])
    args.jsonl, args.out = tmp_path / "a.jsonl", tmp_path / "a.json"
    bins = "histogram.L2.strategy-by-bins"
    clock, procs = Clock(), []

    def spawn(argv: list[str], env: dict | None = None) -> Proc:
        marker = Path(_opt(argv, "--jsonl")[0] + ".current") if "--check-only" in argv else tmp_path / "a.jsonl.current"
        hangs = False
        if _opt(argv, "--tasks") == ["histogram"] and not _opt(argv, "--lost"):
            _mark(marker, "histogram", bins, f"reference:histogram: correctness without {bins}")
            hangs = True
        elif "--check-only" not in argv and not _opt(argv, "--crashed"):
            _mark(marker, "softmax")  # the original itself hangs the timed process
            hangs = True
        procs.append((argv, Proc(None if hangs else 0)))
        return procs[-1][1]

    assert bench.supervise(args, ["histogram", "softmax"], clock=clock, spawn=spawn, sleep=clock.sleep) == 1
    warm = [(a, p) for a, p in procs if "--check-only" in a]
    assert [(_opt(a, "--tasks"), p.killed) for a, p in warm] == [(["histogram"], True), (["softmax"], False),
                                                                   (["histogram"], False)]
    lost = _opt(warm[2][0], "--lost")
    assert len(lost) == 1 and lost[0].startswith(bins + "=its evaluation in a warm process (")
    assert "ran past --step-timeout-s 50 s" in lost[0]
    timed = [(a, p) for a, p in procs if "--check-only" not in a]
    assert len(timed) == 2 and timed[0][1].killed and _opt(timed[0][0], "--lost") == lost
    assert _opt(timed[1][0], "--crashed") == ["softmax"]
    assert 2 * 50 <= clock.t <= 2 * 50 + 10


def test_a_lost_variant_is_recorded_as_failing_and_the_rest_is_ablated(tmp_path: Path) -> None:
    from tests.ablate.fakes import FakeGPU

    argv = ["--in-process", "--child", "--tasks", "swiglu", "--properties", "sigmoid-exp2", "enough-work-per-program",
            "--rounds", "2", "--lost", "swiglu.L3.sigmoid-exp2=its evaluation ran past --step-timeout-s 5 s",
            "--jsonl", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "a.json")]
    fake, marks = FakeGPU(), []

    def evaluate(*a, **kw):  # what the supervisor would read while each evaluation runs
        marks.append(bench.read_marker(tmp_path / "a.jsonl.current"))
        return fake(*a, **kw)

    data = bench.run(bench.parse(argv), evaluate=evaluate, gpu="FakeGPU")
    recs = {r["property"]: r for r in data["records"]}
    assert list(recs) == ["swiglu.L3.sigmoid-exp2", "swiglu.L2.enough-work-per-program"]  # the order asked
    # The lost variant is never run; the marker names the variant under evaluation, None for the original.
    assert {m["property"] for m in marks} == {None, "swiglu.L2.enough-work-per-program"}
    assert all(m["task"] == "swiglu" for m in marks) and fake.calls[0][0] == "triton"
    lost = recs["swiglu.L3.sigmoid-exp2"]
    assert lost["status"] == "broke_correctness" and lost["message"].startswith("its evaluation ran past")
    assert lost["transform"] == "exp2_to_exp+exact_division" and lost["device"] == "cuda"
    assert recs["swiglu.L2.enough-work-per-program"]["status"] in ("load_bearing", "not_load_bearing")


def test_a_crashed_reference_is_skipped_and_named(tmp_path: Path) -> None:
    from tests.ablate.fakes import FakeGPU

    argv = ["--in-process", "--child", "--tasks", "softmax", "swiglu", "--properties", "exp2-fold", "sigmoid-exp2",
            "--rounds", "2", "--crashed", "softmax", "--jsonl", str(tmp_path / "a.jsonl"), "--out",
            str(tmp_path / "a.json")]
    fake = FakeGPU()
    data = bench.run(bench.parse(argv), evaluate=fake, gpu="FakeGPU")
    assert data["tasks"] == ["swiglu"] and data["crashed"] == ["softmax"]
    assert json.loads((tmp_path / "a.json").read_text())["crashed"] == ["softmax"]
    assert not (tmp_path / "a.jsonl.current").exists()


def test_merge_joins_rounds_and_refuses_different_setups(tmp_path: Path, capsys) -> None:
    from tests.ablate.fakes import FakeGPU

    outs = []
    for task, prop in (("softmax", "exp2-fold"), ("swiglu", "sigmoid-exp2")):
        out = tmp_path / f"{task}.json"
        bench.run(bench.parse(["--in-process", "--child", "--tasks", task, "--properties", prop, "--rounds", "2",
                               "--jsonl", str(tmp_path / f"{task}.jsonl"), "--out", str(out)]),
                  evaluate=FakeGPU(), gpu="FakeGPU")
        outs.append(out)
    merged = tmp_path / "merged.json"
    assert bench.main(["--merge", *map(str, outs), "--out", str(merged)]) == 0
    data = json.loads(merged.read_text())
    assert data["tasks"] == ["softmax", "swiglu"] and [r["file"] for r in data["runs"]] == list(map(str, outs))
    assert data["summary"]["properties"] == len(data["records"]) == 2 and data["gpu"] == "FakeGPU"
    other = json.loads(outs[1].read_text())
    other["rounds"] = 5
    outs[1].write_text(json.dumps(other))
    assert bench.main(["--merge", *map(str, outs), "--out", str(merged)]) == 1
    assert "differ in 'rounds'" in capsys.readouterr().err
    assert bench.main(["--merge", str(tmp_path / "softmax.jsonl"), "--out", str(merged)]) == 1
    assert "expected the JSON" in capsys.readouterr().err
