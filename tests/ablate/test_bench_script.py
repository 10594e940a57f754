"""benchmarks/ablate_references.py with the fake GPU: records appended per reference, one JSON with a summary,
a rerun that resumes instead of evaluating again, and a clear refusal without a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import benchmarks.ablate_references as bench
from tests.ablate.fakes import FakeGPU


def test_the_benchmark_writes_jsonl_and_json_and_resumes(tmp_path: Path) -> None:
    argv = ["--tasks", "softmax", "--properties", "L3.exp2-fold", "L2.split-row-combine", "--rounds", "3",
            "--jsonl", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "ablation.json")]
    fake = FakeGPU()
    data = bench.run(bench.parse(argv), evaluate=fake, gpu="FakeGPU")
    on_disk = json.loads((tmp_path / "ablation.json").read_text())
    assert on_disk["complete"] and on_disk["gpu"] == "FakeGPU" and on_disk["rounds"] == 3
    assert data["summary"]["by_status"] == {"broke_correctness": 1, "load_bearing": 1}
    assert [x["property"] for x in data["summary"]["load_bearing"]] == ["softmax.L3.exp2-fold"]
    assert len((tmp_path / "a.jsonl").read_text().splitlines()) == 2
    calls = len(fake.calls)
    again = bench.run(bench.parse(argv), evaluate=fake, gpu="FakeGPU")
    assert len(fake.calls) == calls and again["records"] == data["records"]


def test_no_gpu_is_refused(capsys) -> None:
    from tests.conftest import HAS_GPU

    if HAS_GPU:
        return
    assert bench.main(["--tasks", "softmax"]) == 2
    assert "no CUDA GPU visible" in capsys.readouterr().err


class Clock:
    """A clock that the fake GPU moves: every evaluation takes 10 s."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_budget_stops_between_references_and_the_rerun_finishes(tmp_path: Path) -> None:
    """--budget-s 30: softmax (2 correctness and 2 x 3 timed evaluations, 80 s on the clock) runs past the
    budget, so swiglu is left for the rerun, which evaluates only swiglu."""
    clock, fake = Clock(), FakeGPU()

    def timed(task_id, path, **kw):
        clock.t += 10.0
        return fake(task_id, path, **kw)

    base = ["--tasks", "softmax", "swiglu", "--properties", "exp2-fold", "sigmoid-exp2", "--rounds", "2",
            "--jsonl", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "ablation.json")]
    first = bench.run(bench.parse([*base, "--budget-s", "30"]), evaluate=timed, gpu="FakeGPU", clock=clock)
    assert not first["complete"] and first["tasks"] == ["softmax"] and clock.t == 80.0
    assert not json.loads((tmp_path / "ablation.json").read_text())["complete"]
    n = len(fake.calls)
    second = bench.run(bench.parse(base), evaluate=timed, gpu="FakeGPU", clock=clock)
    assert second["complete"] and second["tasks"] == ["softmax", "swiglu"]
    assert {c[0] for c in fake.calls[n:]} <= {"triton", "swiglu_L3_sigmoid_exp2"}


def test_a_cpu_dry_run_never_stands_in_for_a_gpu_record(tmp_path: Path) -> None:
    """Dry-run records in the same file are not resumed from on cuda, nor reported in its JSON."""
    argv = ["--tasks", "softmax", "--properties", "exp2-fold", "--rounds", "2", "--jsonl", str(tmp_path / "a.jsonl"),
            "--out", str(tmp_path / "x.json")]
    dry = bench.run(bench.parse([*argv, "--device", "cpu"]), evaluate=FakeGPU(device="cpu"))
    assert dry["summary"]["by_status"] == {"untimed": 1}
    fake = FakeGPU()
    real = bench.run(bench.parse(argv), evaluate=fake, gpu="FakeGPU")
    assert any(t for _, _, t in fake.calls) and real["summary"]["by_status"] == {"load_bearing": 1}
    assert [r["device"] for r in real["records"]] == ["cuda"]


def test_a_property_of_none_of_the_tasks_is_one_error_line(tmp_path: Path, capsys) -> None:
    argv = ["--device", "cpu", "--tasks", "softmax", "swiglu", "--properties", "exp2-fold", "L9.nope",
            "--jsonl", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "x.json")]
    assert bench.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --properties: L9.nope: a property of none of the tasks softmax, swiglu")
    assert not (tmp_path / "a.jsonl").exists()


def test_a_reference_with_some_of_its_records_is_run_again(tmp_path: Path) -> None:
    """A kill between two appends leaves one of softmax's two records: the rerun ablates softmax again."""
    argv = ["--tasks", "softmax", "--properties", "exp2-fold", "reciprocal-scale", "--rounds", "2",
            "--jsonl", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "x.json")]
    bench.run(bench.parse(argv), evaluate=FakeGPU(), gpu="FakeGPU")
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    (tmp_path / "a.jsonl").write_text(lines[0] + "\n")
    fake = FakeGPU()
    again = bench.run(bench.parse(argv), evaluate=fake, gpu="FakeGPU")
    assert fake.calls and len(again["records"]) == 2


def test_a_reference_whose_original_failed_is_run_again(tmp_path: Path) -> None:
    """Round 16's paged_attention_decode ran out of memory, so its properties were ``untimed``; round 17's rerun
    skipped it as done. A rerun now ablates it again, and its new records replace the untimed ones."""
    argv = ["--tasks", "softmax", "--properties", "exp2-fold", "--rounds", "2",
            "--jsonl", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "x.json")]
    failing = FakeGPU()

    def oom(task_id, path, **kw):
        r = failing(task_id, path, **kw)
        if Path(path).stem == "triton":
            r.status, r.correct = "runtime_error", False
            r.workloads[0].status, r.workloads[0].message = "runtime_error", "OutOfMemoryError: CUDA out of memory"
        return r

    first = bench.run(bench.parse(argv), evaluate=oom, gpu="FakeGPU")
    assert first["summary"]["by_status"] == {"untimed": 1}
    fake = FakeGPU()
    again = bench.run(bench.parse(argv), evaluate=fake, gpu="FakeGPU")
    assert any(timing for _, _, timing in fake.calls)
    assert again["summary"]["by_status"] == {"load_bearing": 1} and len(again["records"]) == 1


def test_a_reference_edited_since_its_records_is_run_again(tmp_path: Path) -> None:
    """Records measured on other code of the reference (their code_sha256) do not count as done: the rerun
    ablates the reference again, and its new records replace the stale ones."""
    argv = ["--tasks", "softmax", "--properties", "exp2-fold", "--rounds", "2",
            "--jsonl", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "x.json")]
    bench.run(bench.parse(argv), evaluate=FakeGPU(), gpu="FakeGPU")
    fake = FakeGPU()
    bench.run(bench.parse(argv), evaluate=fake, gpu="FakeGPU")
    assert not fake.calls, "unchanged code: resumed"
    (rec,) = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert rec["code_sha256"] and rec["kernel_sha256"]
    (tmp_path / "a.jsonl").write_text(json.dumps({**rec, "code_sha256": "0" * 64}) + "\n")
    again = bench.run(bench.parse(argv), evaluate=fake, gpu="FakeGPU")
    assert fake.calls and [r["code_sha256"] for r in again["records"]] == [rec["code_sha256"]]


def test_a_spent_budget_still_ablates_the_first_reference_due(tmp_path: Path) -> None:
    """Round 18's warm phase spent the whole --budget-s, and the timed process, handed what was left (0 s), ablated
    nothing, so a rerun could never get further. The budget stops between references: the first one due runs."""
    fake, t = FakeGPU(), [0.0]

    def clock() -> float:  # every reading a second later: start-up takes time too
        t[0] += 1.0
        return t[0]

    base = ["--tasks", "softmax", "swiglu", "--properties", "exp2-fold", "sigmoid-exp2", "--rounds", "2",
            "--jsonl", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "ablation.json"), "--budget-s", "0"]
    first = bench.run(bench.parse(base), evaluate=fake, gpu="FakeGPU", clock=clock)
    assert not first["complete"] and first["tasks"] == ["softmax"]
    second = bench.run(bench.parse(base), evaluate=fake, gpu="FakeGPU", clock=clock)
    assert second["complete"] and second["tasks"] == ["softmax", "swiglu"]
