"""Baseline candidates: which one is best, which are excluded and why, and what keys the cache (issue 18)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from d2kgrade.records import WorkloadResult
from d2kgrade.schema import BaselineCandidate, Workload
from runner.baselines import Cache, brief, cache_key
from runner.evaluate import EvalOptions, _baselines_into, run_evaluation

ROOT = Path(__file__).resolve().parents[2]
HONEST = ROOT / "tests" / "runner" / "honest" / "rows_per_program.py"


def cand(name: str, status: str, median: float | None, **kw: object) -> dict[str, object]:
    rec: dict[str, object] = {"name": name, "kind": kw.pop("kind", "eager"), "status": status, "reason": "", **kw}
    if median is not None:
        rec["samples"] = [median * f for f in (0.99, 1.0, 1.01)]
    return rec


def test_the_best_baseline_is_the_fastest_correct_candidate() -> None:
    r = WorkloadResult(name="w", status="passed")
    _baselines_into(r, [cand("eager", "ok", 2.0), cand("compile", "ok", 1.5, kind="compile"),
                        cand("sdpa_cudnn", "ok", 1.0, vendor=True), cand("liger", "incorrect", 0.5, kind="peer",
                                                                        reason="y: 3 of 10 out of tolerance"),
                        cand("flash_attn", "unavailable", None, kind="peer", reason="not installed: flash_attn")])
    assert r.best_baseline == "sdpa_cudnn"  # liger is faster but incorrect: excluded
    assert r.eager.median_ms == pytest.approx(2.0) and r.compiled.median_ms == pytest.approx(1.5)
    by = {b.name: b for b in r.baselines}
    assert by["liger"].status == "incorrect" and "out of tolerance" in by["liger"].reason
    assert by["flash_attn"].time is None and by["sdpa_cudnn"].vendor
    none = WorkloadResult(name="w", status="passed")
    _baselines_into(none, [cand("eager", "failed", None, reason="RuntimeError: boom")])
    assert none.best_baseline is None and none.eager is None


def test_the_cache_key_changes_with_everything_a_figure_depends_on(tmp_path: Path) -> None:
    env = {"gpu": "NVIDIA H200", "driver": "580.1", "torch": "2.11", "triton": "3.6", "cuda": "13.0",
           "python": "3.12"}
    wl = Workload(name="w", params={"M": 4096, "N": 4096}, dtype="bf16")
    c = BaselineCandidate(name="compile", kind="compile", mode="default")
    timing = {"target_s": 0.4, "min_reps": 20, "max_reps": 500, "warmup_ms": 100.0}
    base = cache_key(env, "softmax", wl, c, "sha", timing, {})
    assert base == cache_key(dict(env), "softmax", wl, c, "sha", dict(timing), {})
    variants = [
        cache_key({**env, "driver": "580.2"}, "softmax", wl, c, "sha", timing, {}),
        cache_key({**env, "torch": "2.12"}, "softmax", wl, c, "sha", timing, {}),
        cache_key(env, "layernorm", wl, c, "sha", timing, {}),
        cache_key(env, "softmax", wl.model_copy(update={"dtype": "fp32"}), c, "sha", timing, {}),
        cache_key(env, "softmax", wl, c.model_copy(update={"mode": "max-autotune-no-cudagraphs"}), "sha", timing, {}),
        cache_key(env, "softmax", wl, c, "other-reference", timing, {}),
        cache_key(env, "softmax", wl, c, "sha", {**timing, "target_s": 0.2}, {}),
        cache_key(env, "softmax", wl, c, "sha", timing, {"liger_kernel": "0.8.5"}),
    ]
    assert len({base, *variants}) == len(variants) + 1
    cache = Cache(tmp_path / "b.sqlite")
    cache.put(base, {"status": "ok", "samples": [1.0]}, "2026-12-01T00:00:00+00:00")
    assert cache.get(base) == {"status": "ok", "samples": [1.0], "measured_at": "2026-12-01T00:00:00+00:00"}
    assert cache.get(variants[0]) is None
    cache.close()


CEILINGS = {"copy_bytes_per_s": 4.0e12, "mufu_per_s": 4.0e12,
            "matmul_flops_per_s": {"bf16": 8e14, "fp16": 8e14, "fp32": 4e14, "fp8": 1.6e15, "int8": 1.6e15}}


def test_an_incorrect_candidate_is_excluded_end_to_end(tmp_path: Path) -> None:
    """A suite whose softmax declares a wrong peer: it is checked, excluded with the reason, and never best."""
    suite = tmp_path / "suite"
    for part in ("tasks/softmax", "references/softmax"):
        shutil.copytree(ROOT / part, suite / part)
    ref = suite / "tasks" / "softmax" / "reference.py"
    ref.write_text(ref.read_text() + "\n\ndef baseline_wrong(x):\n    return torch.zeros_like(x)\n")
    yaml = suite / "tasks" / "softmax" / "task.yaml"
    text = yaml.read_text()
    extra = ("- name: wrong\n  kind: eager\n  fn: baseline_wrong\n  device: any\n"
             "  description: a peer that returns zeros\n")
    text = text.replace("baselines:\n", "baselines:\n" + extra, 1) if "baselines:\n" in text else \
        text + "baselines:\n- name: eager\n  kind: eager\n" + extra
    yaml.write_text(text)
    r = run_evaluation("softmax", HONEST, suite_root=suite, device="cpu", seed=3, hidden=False,
                       options=EvalOptions(host_timing=True, ceilings=CEILINGS, compile_baseline=False, target_s=0.05,
                                           min_reps=3, max_reps=3, candidates=("eager", "wrong")))
    assert r.status == "passed", r.message
    w = r.workloads[0]
    by = {b.name: b for b in w.baselines}
    assert by["wrong"].status == "incorrect" and "out of tolerance" in by["wrong"].reason, by["wrong"]
    assert by["eager"].status == "ok" and w.best_baseline == "eager"


def test_on_cpu_every_candidate_is_reported_without_a_figure() -> None:
    r = run_evaluation("softmax", HONEST, device="cpu", seed=3, hidden=False, options=EvalOptions())
    names = [b.name for b in r.workloads[0].baselines]
    assert names[:3] == ["eager", "compile", "compile_max_autotune"]
    assert all(b.time is None and b.status in ("not_timed", "unavailable") for b in r.workloads[0].baselines)
    assert r.workloads[0].best_baseline is None


def test_a_long_failure_reason_keeps_its_start_and_its_end() -> None:
    """A compiler's error comes after pages of source: the reason keeps the end, where the error is named."""
    text = "InductorError: CompilationError: at 194:23:\n" + "source line\n" * 200 + "ValueError: the real error"
    short = brief(text)
    assert len(short) <= 510 and short.startswith("InductorError: CompilationError")
    assert short.endswith("ValueError: the real error") and "[...]" in short
    assert brief("short") == "short"
