"""benchmarks/dump_inductor.py refuses bad items with one line naming the item and what was expected, before it
compiles anything, and says so when there is no GPU."""

from __future__ import annotations

import pytest
import torch

import benchmarks.dump_inductor as dump


@pytest.mark.parametrize("item, words", [
    ("no_such_task:w", "unknown task 'no_such_task'"),
    ("swiglu", "has no workload '' (expected task:workload; workloads: prefill_14336"),
    ("swiglu:nope", "has no workload 'nope'"),
])
def test_bad_items_are_refused(item, words, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))  # main() sets it; restored after
    monkeypatch.setattr("sys.argv", ["dump_inductor.py", "--out", str(tmp_path / "out"), "swiglu:prefill_14336",
                                     item])
    assert dump.main() == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{item}: ") and words in err
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU message")
def test_no_gpu_is_said(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("sys.argv", ["dump_inductor.py", "--out", str(tmp_path), "swiglu:prefill_14336"])
    assert dump.main() == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
