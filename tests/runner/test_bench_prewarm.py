"""benchmarks/bench_references.py's compile prewarm on CPU: it compiles the baseline the way the evaluator's worker
does, into the cache the worker then reads, and a workload that fails is reported, not raised."""

from __future__ import annotations

import pytest

import benchmarks.bench_references as bench


@pytest.mark.slow
def test_prewarm_compiles_the_smoke_baseline(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    out = bench.prewarm(["swiglu"], 1, device="cpu", smoke=True)
    assert [(i["task"], i["workload"], i["ok"]) for i in out["items"]] == [("swiglu", "smoke", True)], out
    assert any((tmp_path / "inductor").rglob("*")), "nothing was written to the inductor cache"


def test_a_failure_is_reported_not_raised(monkeypatch):
    import types

    import runner.direct

    def fails(*args, **kwargs):
        raise RuntimeError("the input maker failed")

    monkeypatch.setattr(runner.direct, "load_reference", lambda folder: types.SimpleNamespace(make_inputs=fails))
    out = bench._prewarm_one(("swiglu", "smoke", "cpu"))
    assert not out["ok"] and "the input maker failed" in out["error"]
    out = bench._prewarm_one(("no_such_task", "smoke", "cpu"))
    assert not out["ok"] and out["task"] == "no_such_task"
