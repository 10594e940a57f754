"""benchmarks/summary.py recomputes the headline H200 figures from the committed JSON (no GPU needed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

KEYS = {"workloads", "correct", "geomean_roofline_fraction", "below_0_5", "at_least_best_baseline",
        "vendor_ratio_geomean", "best_baseline_by_workload", "ablation_tasks", "full_run_s",
        "timing_spread_max_pct", "timing_spread_tasks", "cuda_reeval_build_s", "gpu_tests", "missing"}


def _summary():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("d2k_summary", ROOT / "benchmarks" / "summary.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def test_summary_has_every_headline_and_they_agree() -> None:
    s = _summary().summarize()
    assert KEYS <= set(s)
    assert s["workloads"] == 85 and 0 < s["correct"] <= s["workloads"]
    assert 0 < s["geomean_roofline_fraction"] < 1.25 and s["below_0_5"] <= s["correct"]
    assert s["at_least_best_baseline"] <= s["workloads"] and len(s["best_baseline_by_workload"]) == s["workloads"]
    # The flash-attention workloads were measured against every candidate: cuDNN's SDPA is the best peer there.
    fa = {k: v for k, v in s["best_baseline_by_workload"].items() if k.startswith("flash_attention_fwd:")}
    assert len(fa) == 4 and {v["best"] for v in fa.values()} == {"sdpa_cudnn"}
    assert s["gpu_tests"]["passed"] <= s["gpu_tests"]["total"]
    for key in ("cuda_reeval_build_s", "ablation_tasks"):  # not measured: null or empty, and said so
        assert (s[key] in (None, [])) == (key in s["missing"])


def test_a_missing_source_is_missing_not_guessed(tmp_path: Path) -> None:
    s = _summary().summarize(tmp_path)
    assert s["workloads"] == 0 and s["geomean_roofline_fraction"] is None and s["full_run_s"] is None
    assert "full_run_s" in s["missing"] and s["gpu_tests"] is None


def test_bench_round_spread_covers_the_kernel_and_every_candidate() -> None:
    spec = importlib.util.spec_from_file_location("d2k_bench_round", ROOT / "benchmarks" / "bench_round.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]

    def run(k: float, eager: float) -> dict:
        return {"workloads": [{"name": "w", "median_ms": k, "baselines": [{"name": "eager", "median_ms": eager},
                                                                         {"name": "x", "median_ms": None}]}]}

    out = mod.spread([run(1.00, 2.0), run(1.01, 2.1), run(0.99, 2.0)])
    assert out["w"]["by"]["kernel"] == 100 * (1.01 - 0.99) / 0.99
    assert abs(out["w"]["by"]["eager"] - 5.0) < 1e-9 and out["w"]["spread_pct"] == out["w"]["by"]["eager"]
    assert "x" not in out["w"]["by"] and out["w"]["runs"] == 3
