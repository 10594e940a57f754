"""benchmarks/summary.py: the headline figures read from the committed run files, and the timing spread's rules
(short workloads left out, every candidate counted, the over-1% entries named)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import benchmarks.summary as summary

DATA = Path(summary.__file__).resolve().parent / "data"


def _run(status: str, median_ms: float, baselines: dict[str, float], moved: bool = False) -> dict:
    return {"status": status, "clocks": {"moved": moved}, "phases": {"timing": 1.0, "correctness": 2.0}, "wall_s": 5.0,
            "workloads": [{"name": "w", "median_ms": median_ms,
                           "baselines": [{"name": k, "median_ms": v} for k, v in baselines.items()]}]}


def test_the_spread_leaves_short_workloads_out_and_names_what_is_over_one_percent(tmp_path: Path) -> None:
    doc = {"tasks": {"fast": [_run("passed", 0.02, {"eager": 0.1})] * 2,
                     "slow": [_run("passed", 1.0, {"eager": 2.0}, moved=True), _run("passed", 1.005, {"eager": 2.1})]},
           "spread": {"fast": {"w": {"spread_pct": 30.0, "runs": 2, "by": {"kernel": 30.0}}},
                      "slow": {"w": {"spread_pct": 5.0, "runs": 2, "by": {"kernel": 0.5, "eager": 5.0}}}}}
    path = tmp_path / "repeat.json"
    path.write_text(json.dumps(doc))
    got = summary.repeat_spread([path, tmp_path / "absent.json"])
    assert got is not None
    assert got["max_pct"] == 5.0 and got["kernel_max_pct"] == 0.5 and got["tasks"] == ["slow"]
    assert got["short_left_out"] == ["fast:w"] and got["over_1pct"] == {"slow:w": {"eager": 5.0}}
    assert got["runs_with_clocks_moved"] == {"fast": 0, "slow": 1}


def test_a_later_round_replaces_a_task_unless_it_has_fewer_evaluations(tmp_path: Path) -> None:
    def repeat(name: str, runs: int, pct: float) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps({"tasks": {"slow": [_run("passed", 1.0, {"eager": 2.0})] * runs},
                                    "spread": {"slow": {"w": {"spread_pct": pct, "runs": runs,
                                                              "by": {"kernel": pct}}}}}))
        return path

    old, better, cut = repeat("old.json", 5, 9.0), repeat("better.json", 5, 0.4), repeat("cut.json", 3, 0.1)
    got = summary.repeat_spread([old, better, cut])
    assert got is not None and got["max_pct"] == 0.4 and got["workloads"]["slow:w"]["source"].endswith("better.json")
    assert summary.repeat_spread([old, cut])["max_pct"] == 9.0


def test_a_suite_run_sums_its_phases_and_names_what_did_not_pass(tmp_path: Path) -> None:
    doc = {"date": "2026-12-03T07:00:00", "gpu": {"name": "GPU"}, "total_wall_s": 12.34,
           "tasks": {"a": [_run("passed", 1.0, {})], "b": [_run("incorrect", 1.0, {})]}}
    path = tmp_path / "full.json"
    path.write_text(json.dumps(doc))
    got = summary.full_run(path)
    assert got is not None
    assert (got["wall_s"], got["tasks"], got["passed"], got["not_passed"]) == (12.3, 2, 1, ["b"])
    assert got["phases_s"] == {"correctness": 4.0, "timing": 2.0}
    assert got["task_wall_s"] == {"a": 5.0, "b": 5.0}


def test_gpu_tests_are_counted_from_the_log(tmp_path: Path) -> None:
    log = tmp_path / "gpu.log"
    log.write_text("PASSED tests/a.py::x\nFAILED tests/a.py::y - boom\nSKIPPED [1] tests/b.py: no ray\n")
    got = summary.gpu_test_log(log)
    assert got is not None and (got["passed"], got["total"]) == (1, 2) and got["failed"] == ["tests/a.py::y - boom"]
    assert summary.gpu_test_log(tmp_path / "none.log") is None


def test_the_committed_figures_come_from_the_newest_rounds() -> None:
    s = summary.summarize()
    runs = [json.loads((DATA / "runs" / r / "full_warm_round.json").read_text()) for r in ("round19", "round19b")]
    rerun = sum(runs[0]["tasks"][t][0]["wall_s"] for t in runs[1]["tasks"])  # round 19b reran these tasks
    assert s["full_run_s"] == round(runs[0]["total_wall_s"] + runs[1]["total_wall_s"] - rerun, 1)
    assert s["full_run"]["passed"] == s["full_run"]["tasks"] == s["full_run_cold"]["passed"] == 26
    assert s["full_run_cold"]["wall_s"] > s["full_run_s"]
    cold = json.loads((DATA / "runs" / "round22b" / "full_round.json").read_text())  # one machine, every task
    assert s["full_run_cold"]["wall_s"] == round(cold["total_wall_s"], 1)
    assert any(m.startswith("full_run_cold at or under 300 s") for m in s["missing"]) == (cold["total_wall_s"] > 300)
    cut = s["full_run_warm_partial"]  # round 22b's warm rerun, cut after a few tasks
    same = sum(cold["tasks"][t][0]["wall_s"] for t in cut["task_wall_s"])
    assert cut["tasks"] < 26 and cut["cold_wall_s_same_tasks"] == pytest.approx(same, abs=0.05 * cut["tasks"])
    assert s["gpu_tests"]["passed"] == s["gpu_tests"]["total"] > 0
    assert len(s["timing_spread_tasks"]) >= 10


def _rec(task: str, prop: str, status: str, slowdown: float | None = None) -> dict:
    return {"task": task, "property": f"{task}.{prop}", "status": status, "slowdown": slowdown,
            "ci_low": None if slowdown is None else slowdown - 0.01,
            "ci_high": None if slowdown is None else slowdown + 0.01, "noise_pct": 0.2}


def test_only_timed_references_count_as_ablated_and_the_rest_is_named(tmp_path: Path) -> None:
    """A reference whose records are all untimed (a CPU dry run, a cut round) is not an ablation task; the
    properties are listed load-bearing first, by slowdown; ``missing`` says how many of the references are done."""
    for t in ("a", "b", "c"):
        (tmp_path / "references" / t).mkdir(parents=True)
        (tmp_path / "references" / t / "triton.py").write_text("")
    data = tmp_path / "benchmarks" / "data"
    data.mkdir(parents=True)
    (data / "ablation_h200.json").write_text(json.dumps({"gpu": "GPU", "date": "2026-12-03", "rounds": 4,
        "evaluator": "in-process", "records": [
            _rec("a", "L3.x", "not_load_bearing", 1.001), _rec("a", "L2.y", "load_bearing", 1.2),
            _rec("a", "L3.z", "load_bearing", 1.5), _rec("a", "L1.w", "no_transform"),
            _rec("b", "L2.y", "untimed")]}))
    s = summary.summarize(tmp_path / "benchmarks")
    assert s["ablation_tasks"] == ["a"]
    assert [x["property"] for x in s["ablation"]["tasks"]["a"]] == ["a.L3.z", "a.L2.y", "a.L3.x"]
    assert s["ablation"]["by_status"] == {"load_bearing": 2, "no_transform": 1, "not_load_bearing": 1, "untimed": 1}
    assert "ablation_tasks: 1 of 3 references timed" in s["missing"]
    assert s["ablation"]["stale"] == []


def test_records_of_other_code_are_named_stale(tmp_path: Path) -> None:
    """A reference whose records name another code hash than its current source's (a docstring edit keeps the
    hash) is named under ``ablation.stale`` and in ``missing``."""
    from d2kgrade.ablate.results import code_sha256

    old, new = "X = 1\n", '"""Doc."""\nX = 2\n'
    for t, src in (("a", old), ("b", '"""Edited prose."""\n' + old)):
        (tmp_path / "references" / t).mkdir(parents=True)
        (tmp_path / "references" / t / "triton.py").write_text(src if t == "b" else new)
    data = tmp_path / "benchmarks" / "data"
    data.mkdir(parents=True)
    recs = [{**_rec(t, "L2.y", "load_bearing", 1.2), "code_sha256": code_sha256(old)} for t in ("a", "b")]
    (data / "ablation_h200.json").write_text(json.dumps({"gpu": "GPU", "records": recs}))
    s = summary.summarize(tmp_path / "benchmarks")
    assert s["ablation"]["stale"] == ["a"]
    assert any(m.startswith("ablation of the current source of a ") for m in s["missing"])


def _cand_run(kernel: float, cands: list[tuple[str, str, float | None, bool]], status: str = "passed") -> dict:
    return {"status": "passed", "workloads": [
        {"name": "w", "status": status, "median_ms": kernel, "roofline_floor_ms": 0.5,
         "baselines": [{"name": n, "status": st, "median_ms": ms, "vendor": v, "reason": "" if st == "ok" else st}
                       for n, st, ms, v in cands]},
        {"name": "hidden", "hidden": True, "status": "passed", "median_ms": None, "baselines": []}]}


def test_every_candidate_counts_only_where_it_was_correct_in_every_evaluation(tmp_path: Path) -> None:
    """Medians over a file's evaluations; compile, incorrect once, is not the best baseline though it is fastest;
    the vendor ratio is the fastest vendor candidate's; a later file with fewer evaluations replaces nothing."""
    runs = [_cand_run(1.0, [("eager", "ok", 2.0, True), ("cublas", "ok", 1.6, True), ("compile", "ok", 0.5, False)]),
            _cand_run(1.2, [("eager", "ok", 2.2, True), ("cublas", "ok", 1.8, True),
                            ("compile", "incorrect", 0.5, False)]),
            _cand_run(1.1, [("eager", "ok", 2.1, True), ("cublas", "ok", 1.7, True), ("compile", "ok", 0.5, False)])]
    a = tmp_path / "a.json"
    a.write_text(json.dumps({"command": "bench_round.py --exclude compile_max_autotune --tasks t",
                             "tasks": {"t": runs}}))
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"command": "bench_round.py --tasks t", "tasks": {"t": [_cand_run(9.0, [])]}}))
    rows = summary.candidate_rows([a, b])
    assert set(rows) == {("t", "w")}  # the hidden workload is not a catalog row
    r = rows[("t", "w")]
    assert r["median_ms"] == 1.1 and r["best_baseline"] == "cublas" and r["speedup_best"] == 1.7 / 1.1
    assert r["vendor_ratio"] == 1.7 / 1.1 and r["roofline_fraction"] == 0.5 / 1.1
    assert r["candidates"] == {"eager": 2.1, "cublas": 1.7, "compile": "incorrect"}
    assert r["source"].endswith("(3 evaluations; every candidate but compile_max_autotune)")
    assert r["excluded"] == ["compile_max_autotune"]
    failed = tmp_path / "c.json"
    failed.write_text(json.dumps({"command": "x", "tasks": {"t": [_cand_run(1.0, [("eager", "ok", 2.0, True)],
                                                                           status="incorrect")]}}))
    f = summary.candidate_rows([failed])[("t", "w")]
    assert f["status"] == "incorrect" and f["median_ms"] is None and f["speedup_best"] is None


def test_a_workload_whose_distributions_differ_is_named_dist_sensitive(tmp_path: Path) -> None:
    """Per distribution, the median over evaluations of each evaluation's by_dist median, and the samples summed;
    only a workload whose slowest distribution's median is 1.5x its fastest's is listed."""
    runs = [_cand_run(1.0, [("eager", "ok", 2.0, True)]) for _ in range(3)]
    for run, (fast, slow) in zip(runs, [(1.0, 5.0), (1.1, 5.5), (0.9, 4.0)], strict=True):
        run["workloads"][0]["by_dist"] = {"normal": {"median_ms": fast, "reps": 10},
                                          "negative": {"median_ms": slow, "reps": 5}}
    even = _cand_run(1.0, [("eager", "ok", 2.0, True)])
    even["workloads"][0]["by_dist"] = {"normal": {"median_ms": 1.0, "reps": 10},
                                       "negative": {"median_ms": 1.4, "reps": 5}}
    a = tmp_path / "a.json"
    a.write_text(json.dumps({"command": "bench_round.py", "tasks": {"t": runs, "u": [even]}}))
    rows = summary.candidate_rows([a])
    assert rows[("t", "w")]["by_dist"] == {"normal": {"median_ms": 1.0, "reps": 30},
                                           "negative": {"median_ms": 5.0, "reps": 15}}
    flagged = summary.dist_sensitive(rows)
    assert list(flagged) == ["t:w"] and flagged["t:w"]["ratio"] == 5.0


def test_a_later_file_with_fewer_evaluations_adds_only_the_candidates_a_row_lacks(tmp_path: Path) -> None:
    """Round 20 timed compile max-autotune once where the other figures are five-evaluation repeats: the row keeps
    its kernel median and candidates, gains the new one (here the fastest, so the best baseline), and says so."""
    a = tmp_path / "a.json"
    a.write_text(json.dumps({"command": "bench_round.py --exclude compile_max_autotune --tasks t", "tasks": {"t": [
        _cand_run(1.0 + i / 10, [("eager", "ok", 2.0, True), ("compile", "ok", 1.5, False)]) for i in range(3)]}}))
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"command": "bench_round.py --tasks t", "tasks": {"t": [
        _cand_run(9.0, [("eager", "ok", 0.1, True), ("compile_max_autotune", "ok", 0.88, False)])]}}))
    r = summary.candidate_rows([a, b])[("t", "w")]
    assert r["median_ms"] == 1.1 and r["candidates"] == {"eager": 2.0, "compile": 1.5, "compile_max_autotune": 0.88}
    assert r["best_baseline"] == "compile_max_autotune" and r["speedup_best"] == 0.88 / 1.1
    assert r["excluded"] == [] and r["source"].endswith("; compile_max_autotune from " + str(b) + " (1 evaluation)")


def test_the_committed_rows_name_every_candidate_they_lack() -> None:
    """Rounds 17-22 measured every candidate on every task (compile max-autotune in rounds 20-22); what was not
    timed is named, with why."""
    s = summary.summarize()
    rows = s["best_baseline_by_workload"]
    lacking = s["baselines_not_timed"]["tasks_eager_and_compile_only"]
    assert len(lacking) <= 1 and all(("candidates" in r) == (k.split(":")[0] not in lacking) for k, r in rows.items())
    assert s["baselines_not_timed"]["excluded"] == []
    assert not any("compile_max_autotune" in m for m in s["missing"])
    assert all(isinstance(r["candidates"].get("compile_max_autotune"), (float, str)) for r in rows.values())
    assert s["baselines_not_timed"]["candidates"]["flashinfer"]["reasons"] == ["not installed: flashinfer"]
