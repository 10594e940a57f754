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
