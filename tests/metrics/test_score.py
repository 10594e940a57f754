"""Score: hand-computed cases for every metric, the paired bootstrap, seeds, and errors that name file and row."""

from __future__ import annotations

import math

import numpy as np
import pytest

from d2kgrade.errors import SpecError, UserError
from d2kgrade.metrics import ScoreConfig, load_run_dir, score_runs
from d2kgrade.metrics import bootstrap
from tests.metrics.synthetic import episode, grade_line, make_run, rubric_for, workloads, write_tables

CFG = ScoreConfig(resamples=200, seed=1)


def _hand_run(tmp_path):
    """Three tasks, one model, one seed; the expected numbers are worked out in the comments."""
    eps = [episode("A-u", "ta", "unguided", True), episode("A-g", "ta", "guided", True),
           episode("B-u", "tb", "unguided", False), episode("B-g", "tb", "guided", True),
           episode("C-u", "tc", "unguided", True), episode("C-g", "tc", "guided", True),
           episode("ref-A", "ta", "guided", True, model="expert", agent="reference"),
           episode("ref-B", "tb", "guided", True, model="expert", agent="reference"),
           episode("ref-C", "tc", "guided", True, model="expert", agent="reference")]
    wl = [*workloads("A-u", [2.0, 0.5], compiled=[1.0, 1.0], roofline=[0.2, 0.4]),  # geo 1.0 -> level 1
          *workloads("A-g", [4.0, 1.0], compiled=[2.0, 2.0], roofline=[0.6, 0.8]),  # geo 2, ref ratio .5 -> 2
          *workloads("B-u", [9.0, 9.0], status="incorrect"),                       # wrong -> 0
          *workloads("B-g", [3.0, 3.0]),                                          # ref ratio 1 -> 3
          *workloads("C-u", [1.5, 1.5]),                                          # ref ratio .75 -> 2
          *workloads("C-g", [2.0, 2.0]),                                          # ref ratio 1 -> 3
          *workloads("ref-A", [4.0, 4.0]), *workloads("ref-B", [3.0, 3.0]), *workloads("ref-C", [2.0, 2.0])]
    rub = {t: rubric_for(t, {"L1": 1, "L2": 1}) for t in ("ta", "tb", "tc")}
    g = [grade_line(rub["ta"], "A-u", "code", "combined", {"ta.L1.p0"}),               # 50 (level weights 40/35)
         grade_line(rub["ta"], "A-g", "code", "combined", {"ta.L1.p0", "ta.L2.p0"}),   # 100
         grade_line(rub["tb"], "B-u", "code", "combined", set()),                      # 0
         grade_line(rub["tb"], "B-g", "code", "combined", {"tb.L2.p0"}),               # 35/75*100
         grade_line(rub["tc"], "C-u", "code", "combined", {"tc.L2.p0"}),
         grade_line(rub["tc"], "C-g", "code", "combined", {"tc.L2.p0"}),
         grade_line(rub["ta"], "A-u", "proposal", "llm", {"ta.L1.p0", "ta.L2.p0"}),
         grade_line(rub["ta"], "A-g", "proposal", "llm", {"ta.L2.p0"})]
    return write_tables(tmp_path / "run", eps, wl, g)


def _arm(res, model, arm):
    return next(a for a in res.arms if a.model == model and a.arm == arm)


def test_hand_computed_metrics(tmp_path):
    res = score_runs([load_run_dir(_hand_run(tmp_path))], CFG)
    u, g = _arm(res, "m", "unguided").metrics, _arm(res, "m", "guided").metrics
    assert u["correctness"].value == pytest.approx(2 / 3) and g["correctness"].value == 1.0
    assert u["perf_score"].value == pytest.approx((1 + 0 + 2) / 3)
    assert g["perf_score"].value == pytest.approx((2 + 3 + 3) / 3)
    # unpaired: the arm's own correct tasks
    assert u["geomean_speedup_eager"].value == pytest.approx(math.sqrt(1.0 * 1.5))
    assert g["geomean_speedup_eager"].value == pytest.approx((2 * 3 * 2) ** (1 / 3))
    assert u["geomean_speedup_compiled"].value == pytest.approx(math.sqrt(1.0 * 1.5))
    assert u["fast_0"].value == pytest.approx(2 / 3)
    assert u["fast_1"].value == pytest.approx(1 / 3) and g["fast_1"].value == 1.0
    assert u["fast_2"].value == 0.0 and g["fast_2"].value == pytest.approx(1 / 3)
    assert u["roofline_fraction"].value == pytest.approx((0.3 + 0.5) / 2)
    assert u["impl_score"].value == pytest.approx((40 / 75 * 100 + 0 + 35 / 75 * 100) / 3)
    assert g["impl_L1"].value == pytest.approx((100 + 0 + 0) / 3)
    # design rates: only task ta has notes; A-u proposed both, implemented L1 only
    assert u["proposed_L2"].value == 1.0 and u["implemented_L2"].value == pytest.approx(1 / 3)
    assert u["proposed_not_implemented_L2"].value == 1.0 and u["proposed_not_implemented_L2"].n == 1
    assert g["impl_without_proposed_L1"].value == 1.0 and g["proposed_L1"].value == 0.0

    cmp_ = next(c for c in res.comparisons if c.model == "m" and c.treatment == "guided")
    d = cmp_.metrics
    assert cmp_.n_pairs == 3
    assert d["correctness"].delta == pytest.approx(1 / 3)
    # paired speed: only tasks correct in both arms (ta, tc)
    assert d["geomean_speedup_eager"].n == 2
    assert d["geomean_speedup_eager"].baseline == pytest.approx(math.sqrt(1.5))
    assert d["geomean_speedup_eager"].treatment == pytest.approx(2.0)
    assert d["geomean_speedup_eager"].delta == pytest.approx(2.0 - math.sqrt(1.5))
    assert res.reference_speedup["ta"] == pytest.approx(4.0)
    assert not any("reference" in w for w in res.warnings)


def test_paired_bootstrap_matches_a_plain_loop(tmp_path):
    run = make_run(tmp_path / "r", models=("m1",), tasks=tuple(f"t{i}" for i in range(7)), seed=3)
    cfg = ScoreConfig(resamples=300, seed=11)
    res = score_runs([load_run_dir(run)], cfg)
    d = next(c for c in res.comparisons if c.model == "m1").metrics["correctness"]
    rows = {(t.arm, t.task): t.values["correct"] for t in res.tasks if t.model == "m1"}
    tasks = sorted({t for _, t in rows})
    idx = bootstrap.draw(len(tasks), 300, 11)
    deltas = [np.mean([rows[("guided", tasks[i])] - rows[("unguided", tasks[i])] for i in draw]) for draw in idx]
    lo, hi = np.percentile(deltas, [2.5, 97.5])
    assert d.ci_low == pytest.approx(lo) and d.ci_high == pytest.approx(hi)
    assert d.ci_low <= d.delta <= d.ci_high
    # seeded: the same seed gives the same interval, another seed another one
    again = score_runs([load_run_dir(run)], cfg)
    assert next(c for c in again.comparisons if c.model == "m1").metrics["correctness"].ci_low == d.ci_low
    other = score_runs([load_run_dir(run)], ScoreConfig(resamples=300, seed=12))
    assert next(c for c in other.comparisons if c.model == "m1").metrics["correctness"].ci_low != d.ci_low or \
        next(c for c in other.comparisons if c.model == "m1").metrics["correctness"].ci_high != d.ci_high


def test_seeds_mean_and_best(tmp_path):
    eps = [episode("u0", "ta", "unguided", True, seed=0), episode("u1", "ta", "unguided", False, seed=1),
           episode("g0", "ta", "guided", True, seed=0), episode("g1", "ta", "guided", True, seed=1)]
    wl = [*workloads("u0", [2.0, 2.0]), *workloads("u1", [5.0, 5.0], status="incorrect"),
          *workloads("g0", [1.0, 1.0]), *workloads("g1", [4.0, 4.0])]
    run = write_tables(tmp_path / "run", eps, wl)
    mean = score_runs([load_run_dir(run)], CFG)
    u = _arm(mean, "m", "unguided").metrics
    g = _arm(mean, "m", "guided").metrics
    assert u["correctness"].value == 0.5
    assert u["geomean_speedup_eager"].value == pytest.approx(2.0)  # the wrong seed's speed never counts
    assert g["geomean_speedup_eager"].value == pytest.approx(2.0)  # geomean of 1 and 4
    assert u["fast_1"].value == 0.5 and g["fast_1"].value == 0.5
    best = score_runs([load_run_dir(run)], ScoreConfig(resamples=0, seed_agg="best"))
    assert _arm(best, "m", "unguided").metrics["correctness"].value == 1.0
    assert _arm(best, "m", "guided").metrics["geomean_speedup_eager"].value == pytest.approx(4.0)
    assert _arm(best, "m", "guided").metrics["geomean_speedup_eager"].ci_low is None  # no resamples, no CI
    # no reference run: level 3 cannot be reached and the result says so
    assert any("Performance Score 3 cannot be reached" in w for w in mean.warnings)
    assert any("no code grades" in w for w in mean.warnings)


def test_pooled_rows_average_model_task_pairs(tmp_path):
    run = make_run(tmp_path / "r", models=("m1", "m2", "m3"), tasks=("ta", "tb", "tc"), seed=5)
    res = score_runs([load_run_dir(run)], CFG)
    per_model = [_arm(res, m, "guided").metrics["correctness"] for m in ("m1", "m2", "m3")]
    pooled = _arm(res, "all", "guided").metrics["correctness"]
    assert pooled.n == 9
    assert pooled.value == pytest.approx(np.mean([p.value for p in per_model]))
    assert pooled.ci_low <= pooled.value <= pooled.ci_high
    assert any(c.model == "all" for c in res.comparisons)


def test_untimed_correct_episode_has_no_performance_score(tmp_path):
    eps = [episode("u", "ta", "unguided", True), episode("g", "ta", "guided", True)]
    wl = [{"episode_id": "u", "workload": "w1", "status": "passed", "speedup_eager": ""},
          *workloads("g", [3.0])]
    res = score_runs([load_run_dir(write_tables(tmp_path / "run", eps, wl))], CFG)
    u = _arm(res, "m", "unguided").metrics
    assert u["perf_score"].value is None and u["fast_0"].value == 1.0 and u["fast_1"].value is None
    assert any("no timed workload" in w for w in res.warnings)


def test_bad_tables_name_file_row_and_column(tmp_path):
    eps = [episode("a", "ta", "unguided", True), episode("b", "ta", "guided", True)]
    eps[1]["arm"] = "guidedd"
    run = write_tables(tmp_path / "run", eps, workloads("a", [1.0]))
    with pytest.raises(SpecError) as err:
        load_run_dir(run)
    assert "episodes.csv: row 2, column arm: expected one of unguided, guided, propose, got 'guidedd'" in str(
        err.value)
    eps[1]["arm"] = "guided"
    eps[0]["seed"] = "x"
    write_tables(run, eps, workloads("a", [1.0]))
    with pytest.raises(SpecError, match=r"row 1, column seed: expected an integer, got 'x'"):
        load_run_dir(run)
    eps[0]["seed"] = 0
    write_tables(run, eps, [{"episode_id": "a", "workload": "w1", "status": "passed"}])
    with pytest.raises(SpecError, match=r"workloads.csv: missing column\(s\) speedup_eager"):
        load_run_dir(run)
    with pytest.raises(UserError, match="not a directory"):
        load_run_dir(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no episodes.csv"):
        load_run_dir(tmp_path / "empty")


def test_propose_arm_and_partial_guidance(tmp_path):
    run = make_run(tmp_path / "r", models=("m1",), tasks=("ta", "tb", "tc"), arms=("unguided", "guided", "propose"),
                   seed=2)
    # a second guided arm with L1 guidance only
    import pandas as pd

    eps = pd.read_csv(run / "episodes.csv")
    extra = eps[eps["arm"] == "guided"].assign(guidance="L1", episode_id=lambda d: d["episode_id"] + "-L1")
    pd.concat([eps, extra]).to_csv(run / "episodes.csv", index=False)
    wl = pd.read_csv(run / "workloads.csv")
    wextra = wl[wl["episode_id"].isin(extra["episode_id"].str.removesuffix("-L1"))].assign(
        episode_id=lambda d: d["episode_id"] + "-L1")
    pd.concat([wl, wextra]).to_csv(run / "workloads.csv", index=False)
    res = score_runs([load_run_dir(run)], CFG)
    assert {a.arm for a in res.arms} == {"unguided", "guided-L1", "guided", "propose"}
    prop = _arm(res, "m1", "propose").metrics
    assert prop["correctness"].value is None and prop["perf_score"].value is None  # no kernel, not zero
    assert prop["proposed_L1"].value is not None and prop["implemented_L1"].value is None
    assert {c.treatment for c in res.comparisons} == {"guided-L1", "guided"}
    l1 = next(c for c in res.comparisons if c.treatment == "guided-L1").metrics["correctness"]
    full = next(c for c in res.comparisons if c.treatment == "guided").metrics["correctness"]
    assert l1.treatment == full.treatment  # the copied episodes are the same kernels


def test_reference_speed_from_another_run(tmp_path):
    eps = [episode("u", "ta", "unguided", True), episode("g", "ta", "guided", True)]
    run = write_tables(tmp_path / "run", eps, [*workloads("u", [1.5, 1.5]), *workloads("g", [3.0, 3.0])])
    no_ref = score_runs([load_run_dir(run)], CFG)
    assert _arm(no_ref, "m", "guided").metrics["perf_score"].value == 2.0  # level 3 needs a reference
    ref_eps = [episode("ref", "ta", "guided", True, model="expert", agent="reference"),
               episode("other", "ta", "guided", False, model="other-model")]
    ref = write_tables(tmp_path / "ref", ref_eps, [*workloads("ref", [3.2, 3.2]), *workloads("other", [1.0])])
    res = score_runs([load_run_dir(run)], CFG, [load_run_dir(ref)])
    assert _arm(res, "m", "guided").metrics["perf_score"].value == 3.0  # 3.0 / 3.2 = 0.94 >= 0.9
    assert _arm(res, "m", "unguided").metrics["perf_score"].value == 2.0  # 1.5 / 3.2 < 0.9, but > eager
    assert {a.model for a in res.arms} == {"m"}  # the reference run's agent episodes are not scored
    strict = score_runs([load_run_dir(run)], ScoreConfig(resamples=0, reference_fraction=0.95),
                        [load_run_dir(ref)])
    assert _arm(strict, "m", "guided").metrics["perf_score"].value == 2.0


def test_score_cli_tables_and_option_errors(tmp_path):
    from typer.testing import CliRunner

    from d2kgrade.cli import app

    run = _hand_run(tmp_path)
    res = CliRunner().invoke(app, ["score", str(run), "--resamples", "20", "--out", str(tmp_path / "s.json")],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "Guided minus unguided" in res.stdout and "+33.3 pp" in res.stdout  # correctness 2/3 -> 3/3
    import json

    saved = json.loads((tmp_path / "s.json").read_text())
    assert saved["config"]["resamples"] == 20 and saved["schema_version"] == 1
    bad = CliRunner().invoke(app, ["score", str(run), "--fast-p", "1,x"])
    assert isinstance(bad.exception, UserError) and "--fast-p" in str(bad.exception)
    bad = CliRunner().invoke(app, ["score", str(run), "--rater", "robot"])
    assert isinstance(bad.exception, UserError) and "--rater" in str(bad.exception)


def test_api_failures_are_left_out_and_counted_not_wrong(tmp_path):
    """Two tasks; task tb's guided episode failed on the API: it is neither a wrong kernel nor a pair."""
    eps = [episode("a-u", "ta", "unguided", False), episode("a-g", "ta", "guided", True),
           episode("b-u", "tb", "unguided", True), {**episode("b-g", "tb", "guided", False), "status": "api_failed"},
           {**episode("c-g", "tc", "guided", False), "status": "failed"}]
    for e in eps:
        e.setdefault("status", "finished")
    run = write_tables(tmp_path / "run", eps, [*workloads("a-g", [2.0]), *workloads("b-u", [1.0])])
    res = score_runs([load_run_dir(run)], ScoreConfig(resamples=0))
    guided = next(a for a in res.arms if a.arm == "guided")
    assert guided.metrics["correctness"].value == 1.0 and guided.n_episodes == 1  # not 1 of 3
    comp = res.comparisons[0]
    assert comp.n_pairs == 1 and comp.metrics["correctness"].delta == 1.0  # only task ta pairs
    counts = {(c.arm, c.status): (c.n, c.scored) for c in res.episode_statuses}
    assert counts == {("guided", "finished"): (1, True), ("guided", "api_failed"): (1, False),
                      ("guided", "failed"): (1, False), ("unguided", "finished"): (2, True)}
    assert any("1 episode(s) failed on the API (status api_failed)" in w and "not counted as wrong" in w
               for w in res.warnings)


def test_nothing_to_score_says_why(tmp_path):
    from d2kgrade.metrics import NothingToScore

    eps = [{**episode("a-u", "ta", "unguided", False), "status": "api_failed"},
           {**episode("a-g", "ta", "guided", False), "status": "api_failed"}]
    run = write_tables(tmp_path / "run", eps, [])
    with pytest.raises(NothingToScore, match="no agent episode has an outcome to score") as exc:
        score_runs([load_run_dir(run)], ScoreConfig(resamples=0))
    assert exc.value.result.arms == [] and sum(c.n for c in exc.value.result.episode_statuses) == 2
    ref_only = write_tables(tmp_path / "ref", [episode("r", "ta", "guided", True, agent="reference")],
                            workloads("r", [2.0]))
    with pytest.raises(NothingToScore, match="only expert reference episodes"):
        score_runs([load_run_dir(ref_only)], ScoreConfig(resamples=0))
