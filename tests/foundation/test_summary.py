"""benchmarks/summary.py recomputes the headline H200 figures from the committed JSON (no GPU needed)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

KEYS = {"workloads", "correct", "geomean_roofline_fraction", "below_0_5", "at_least_best_baseline",
        "vendor_ratio_geomean", "best_baseline_by_workload", "ablation_tasks", "full_run_s",
        "timing_spread_max_pct", "timing_spread_tasks", "cuda_reeval_build_s", "gpu_tests", "missing",
        "geomean_derived_floor_fraction", "derived_floors", "derived_floors_source"}


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
    # The GPU tests come from the newest round's pytest log (round 17: every test on this evaluator).
    log = (ROOT / "benchmarks" / "data" / "runs" / "round17" / "gpu_tests.log").read_text().splitlines()
    assert s["gpu_tests"]["passed"] == sum(ln.startswith("PASSED ") for ln in log) > 0
    assert len(s["gpu_tests"]["failed"]) == sum(ln.startswith(("FAILED ", "ERROR ")) for ln in log)
    # Round 12's structured record stays consistent on its own.
    r12 = json.loads((ROOT / "benchmarks" / "data" / "h200_round12.json").read_text())
    g = r12["gpu_tests_structured"]
    assert not set(g["passed"]) & set(g["failed"]) and len(g["passed"]) + len(g["failed"]) == g["total"]
    assert set(g["latest"]) == {*g["passed"], *g["failed"]}  # one latest result per test, each counted once
    # The cut full run of round 12: its per-task walls add up to (at most) its total.
    p = s["full_run_partial"]
    assert p["tasks_done"] == len(p["per_task_s"]) < p["tasks_total"]
    assert sum(p["per_task_s"].values()) <= p["wall_s"] + 1.0
    assert s["rmsnorm_residual_eager_only_s"]["after"] < s["rmsnorm_residual_eager_only_s"]["before"]
    # One softmax evaluation before and after round 11's evaluator changes: the phases add up to the wall time.
    for k in ("before", "after"):
        ph = s["softmax_evaluation_phases"][k]
        assert abs(sum(v for n, v in ph.items() if n != "detail") - s["softmax_evaluation_s"][k]) < 1.0
    for key in ("cuda_reeval_build_s", "ablation_tasks"):  # not measured: null or empty, and said so
        assert (s[key] in (None, [])) == (key in s["missing"])


def test_a_missing_source_is_missing_not_guessed(tmp_path: Path) -> None:
    s = _summary().summarize(tmp_path)
    assert s["workloads"] == 0 and s["geomean_roofline_fraction"] is None and s["full_run_s"] is None
    assert "full_run_s" in s["missing"] and s["gpu_tests"] is None
    assert s["derived_floors"] == {} and s["geomean_derived_floor_fraction"] is None
    assert {"derived_floors", "geomean_derived_floor_fraction"} <= set(s["missing"])


def test_derived_floors_are_the_floors_file() -> None:
    s = _summary().summarize()
    floors = json.loads((ROOT / "benchmarks" / "data" / "floors_h200.json").read_text())
    want = {f"{t}:{w}": f for t, per in floors["floors"].items() for w, f in per.items()}
    assert set(s["derived_floors"]) == set(want) and len(want) == 14  # topk 4, histogram 3, spmv_csr 4, scan 3
    assert s["derived_floors_source"] == "floors_h200.json (NVIDIA H200, 2026-12-02)"
    rows = s["best_baseline_by_workload"]  # each workload's row, from the newest file that has its task
    for name, got in s["derived_floors"].items():
        f = want[name]
        assert (got["roofline_floor_ms"], got["derived_floor_ms"], got["binding"]) == (
            f["roofline_floor_ms"], f["derived_floor_ms"], f["binding"])
        assert got["ratio"] == pytest.approx(f["ratio"]) and got["ratio"] >= 1.0
        ref = rows[name]  # every one of the 14 passed in the rounds the summary reads
        assert ref["status"] == "passed" and got["reference_roofline_fraction"] == ref["roofline_fraction"]
        assert got["reference_derived_floor_fraction"] == pytest.approx(ref["roofline_fraction"] * f["ratio"])
    # The roofline binds on 7 of the 14: selective_scan x3, topk x3 (all but sparse_attention), spmv_csr's stencil.
    assert sorted(n for n, f in s["derived_floors"].items() if f["binding"] == "roofline") == [
        "selective_scan:batch_short", "selective_scan:long_narrow", "selective_scan:mamba_2p8b",
        "spmv_csr:stencil_27pt", "topk:bf16_ties_k256", "topk:moe_router_k8", "topk:sampling_k50"]
    # Over the same passed workloads, log geomean(derived) - log geomean(roofline) = sum(log ratio) / n.
    n = sum(1 for r in rows.values() if r["status"] == "passed" and r["roofline_fraction"])
    shift = sum(math.log(f["ratio"]) for f in want.values()) / n
    assert math.log(s["geomean_derived_floor_fraction"]) - math.log(s["geomean_roofline_fraction"]) == \
        pytest.approx(shift)
    assert s["geomean_roofline_fraction"] < s["geomean_derived_floor_fraction"] < 1.0


def test_derived_floor_geomean_by_hand(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    row = {"hidden": False, "status": "passed", "eager_ms": 2.0, "compiled_ms": 3.0}
    (data / "references_h200.json").write_text(json.dumps({"workloads": [
        {**row, "task": "histogram", "workload": "a", "median_ms": 1.0, "roofline_fraction": 0.25},
        {**row, "task": "softmax", "workload": "b", "median_ms": 1.0, "roofline_fraction": 0.64},
        {**row, "task": "histogram", "workload": "c", "status": "failed", "median_ms": None,
         "roofline_fraction": None}]}))
    f = {"roofline_floor_ms": 0.25, "derived_floor_ms": 1.0, "binding": "histogram_updates"}
    (data / "floors_h200.json").write_text(json.dumps({"gpu": {"name": "NVIDIA H200"}, "date": "2026-12-02T00:00",
                                                       "floors": {"histogram": {"a": f, "c": f}}}))
    s = _summary().summarize(tmp_path)
    # Roofline: sqrt(0.25 * 0.64) = 0.4. Derived: a's floor is 4x its roofline floor, so sqrt(1.0 * 0.64) = 0.8.
    assert s["geomean_roofline_fraction"] == pytest.approx(0.4)
    assert s["geomean_derived_floor_fraction"] == pytest.approx(0.8)
    assert s["derived_floors"]["histogram:a"]["reference_derived_floor_fraction"] == pytest.approx(1.0)
    c = s["derived_floors"]["histogram:c"]  # a failed reference has no fraction of either floor
    assert c["ratio"] == 4.0
    assert c["reference_roofline_fraction"] is None and c["reference_derived_floor_fraction"] is None


def _bench_round():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("d2k_bench_round", ROOT / "benchmarks" / "bench_round.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def test_bench_round_clock_sampler_flags_moved_clocks() -> None:
    cls = _bench_round().ClockSampler

    def summary(lines: list[str]) -> dict:
        c = cls()
        c.lines = lines
        return c.summary()

    idle = "0, 345, 0x0000000000000001"
    steady = summary([idle, "95, 1980, 0x0000000000000000", "100, 1980, 0x0000000000000000", "garbage"])
    assert steady == {"samples": 2, "sm_mhz_min": 1980, "sm_mhz_max": 1980, "reasons_seen": "0x0",
                      "slowdown": False, "moved": False}
    assert summary([idle, "90, 1980, 0x0", "90, 1900, 0x0"])["moved"]             # 4% apart
    thermal = summary(["90, 1980, 0x0000000000000020"])                           # software thermal slowdown
    assert thermal["slowdown"] and thermal["moved"]
    assert summary([idle]) == {"samples": 0}                                        # never busy: nothing to say


def test_bench_round_spread_covers_the_kernel_and_every_candidate() -> None:
    mod = _bench_round()

    def run(k: float, eager: float) -> dict:
        return {"workloads": [{"name": "w", "median_ms": k, "baselines": [{"name": "eager", "median_ms": eager},
                                                                         {"name": "x", "median_ms": None}]}]}

    out = mod.spread([run(1.00, 2.0), run(1.01, 2.1), run(0.99, 2.0)])
    assert out["w"]["by"]["kernel"] == 100 * (1.01 - 0.99) / 0.99
    assert abs(out["w"]["by"]["eager"] - 5.0) < 1e-9 and out["w"]["spread_pct"] == out["w"]["by"]["eager"]
    assert "x" not in out["w"]["by"] and out["w"]["runs"] == 3 and out["w"]["clocks_moved"] == []
    moved = mod.spread([run(1.0, 2.0), {**run(1.0, 2.0), "clocks": {"moved": True}}])
    assert moved["w"]["clocks_moved"] == [1]
