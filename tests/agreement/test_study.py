"""The agreement study end to end: long tables and judge outputs in, every statistic out, through the CLI too."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import krippendorff
import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss
from typer.testing import CliRunner

from d2kgrade.agreement import interval
from d2kgrade.agreement.ratings import add_derived_scores, read_ratings
from d2kgrade.agreement.results import AgreementConfig
from d2kgrade.agreement.study import agreement_study, run_agreement
from d2kgrade.cli import app
from d2kgrade.errors import SpecError, UserError
from d2kgrade.grades import PropertyGrade, file_grade
from tests.metrics.synthetic import rubric_for

CFG = AgreementConfig(resamples=200, seed=3)


def _rows(values: dict[str, list[float]], *, n_tasks: int = 20, prop: str = "p0") -> list[dict]:
    """Long rows: unit i belongs to task i % n_tasks; one property per task."""
    rows = []
    for rater, vals in values.items():
        for i, v in enumerate(vals):
            task = f"t{i % n_tasks}"
            rows.append({"item_id": f"e{i}", "property_id": f"{task}.L1.{prop}", "rater_id": rater,
                         "rater_kind": "human", "value": "" if v is None or math.isnan(v) else int(v),
                         "evidence": ""})
    return rows


def _csv(tmp_path, name, rows) -> object:
    p = tmp_path / name
    pd.DataFrame(rows).to_csv(p, index=False)
    return p


def test_kappa_paradox_through_the_study(tmp_path):
    a = [1.0] * 95 + [0.0] * 5
    b = [1.0] * 90 + [0.0] * 5 + [1.0] * 5
    res = run_agreement([_csv(tmp_path, "r.csv", _rows({"ann1": a, "ann2": b}))], CFG)
    pooled = next(x for x in res.binary if x.scope == "all")
    pair = pooled.pairs[0]
    assert pair.n == 100 and pair.percent_agreement == pytest.approx(0.9)
    assert pooled.prevalence == pytest.approx(0.95)
    assert pair.kappa.value == pytest.approx(-0.0526, abs=1e-4) and pair.kappa.label == "poor"
    assert pair.ac1.value == pytest.approx(0.8895, abs=1e-4) and pair.ac1.label == "almost perfect"
    # 20 tasks: the pooled scope resamples tasks; a single property (one task) resamples items
    assert pair.kappa.ci_method == "bootstrap over tasks"
    assert pair.ac1.ci_low <= pair.ac1.value <= pair.ac1.ci_high
    one = next(x for x in res.binary if x.scope_id == "t15.L1.p0")  # units 15, 35, ..., 95: 1 1 1 1 0 vs 1 1 1 1 1
    assert one.pairs[0].kappa.value == pytest.approx(0.0)
    assert one.pairs[0].ac1.value == pytest.approx((0.8 - 0.18) / 0.82)  # pi = .9, p_e = .18
    assert one.pairs[0].kappa.ci_method == "bootstrap over items"
    assert "Landis & Koch (1977)" in res.scales["kappa"] and "Krippendorff (2004)" in res.scales["alpha"]
    again = run_agreement([tmp_path / "r.csv"], CFG)
    assert next(x for x in again.binary if x.scope == "all").pairs[0].ac1.ci_low == pair.ac1.ci_low


def test_three_raters_with_missing_ratings_match_the_libraries(tmp_path):
    rng = np.random.default_rng(8)
    truth = rng.random(80) < 0.6
    x = np.where(rng.random((80, 3)) < 0.85, truth[:, None], ~truth[:, None]).astype(float)
    x[rng.random((80, 3)) < 0.25] = np.nan
    rows = _rows({f"r{j}": list(x[:, j]) for j in range(3)})
    res = run_agreement([_csv(tmp_path, "r.csv", rows)], CFG)
    pooled = next(b for b in res.binary if b.scope == "all")
    assert pooled.raters == ["r0", "r1", "r2"]
    assert pooled.n_units == int((np.isfinite(x).sum(axis=1) >= 2).sum())
    assert pooled.krippendorff_alpha.value == pytest.approx(
        krippendorff.alpha(reliability_data=x.T, level_of_measurement="nominal"))
    complete = x[np.isfinite(x).all(axis=1)].astype(int)
    assert pooled.fleiss_kappa.value == pytest.approx(sm_fleiss(aggregate_raters(complete)[0]))
    assert len(pooled.pairs) == 3
    r01 = next(p for p in pooled.pairs if (p.rater_a, p.rater_b) == ("r0", "r1"))
    both = np.isfinite(x[:, 0]) & np.isfinite(x[:, 1])
    assert r01.n == int(both.sum())


def test_gold_precision_recall_f1_by_hand(tmp_path):
    # units: rater 1 1 1 0 0 0 / gold 1 1 0 1 0 0 -> tp 2, fp 1, fn 1, tn 2
    rater = _rows({"judge": [1, 1, 1, 0, 0, 0]}, n_tasks=1)
    gold = _rows({"g1": [1, 1, 0, 1, 0, 0, 1], "g2": [1, 1, 0, 1, 0, 0, 0]}, n_tasks=1)  # unit 7 ties: dropped
    res = run_agreement([_csv(tmp_path, "r.csv", rater)], CFG, gold=_csv(tmp_path, "g.csv", gold))
    g = next(s for s in res.gold if s.rater_id == "judge" and s.scope == "all")
    assert (g.tp, g.fp, g.fn, g.tn, g.n) == (2, 1, 1, 2, 6)
    assert g.precision.value == pytest.approx(2 / 3) and g.recall.value == pytest.approx(2 / 3)
    assert g.f1.value == pytest.approx(2 / 3)
    assert any(s.scope == "level" and s.scope_id == "L1" for s in res.gold)
    assert any("split evenly" in w for w in res.warnings)


def test_scores_icc_pairs_and_derived_scores(tmp_path):
    rng = np.random.default_rng(1)
    true = rng.uniform(10, 90, 30)
    rows = []
    for j, bias in enumerate((0.0, 5.0, -3.0)):
        for i, t in enumerate(true):
            rows.append({"item_id": f"e{i}", "property_id": "score", "rater_id": f"r{j}",
                         "value": round(float(t + bias + rng.normal(0, 6)), 3), "task": f"t{i % 6}"})
    res = run_agreement([_csv(tmp_path, "s.csv", rows)], CFG)
    s = res.scores
    x = pd.DataFrame(rows).pivot(index="item_id", columns="rater_id", values="value").to_numpy(float)
    ref = interval.icc(x)
    assert s.n_items == 30
    assert s.icc2.value == pytest.approx(ref["icc2"]) and s.icc3.value == pytest.approx(ref["icc3"])
    assert s.icc2.ci_low == pytest.approx(ref["icc2_low"]) and s.icc2.ci_method.startswith("F")
    assert s.icc2_boot.ci_method == "bootstrap over tasks" and s.icc2_boot.ci_low < s.icc2_boot.ci_high
    assert s.krippendorff_alpha.value == pytest.approx(
        krippendorff.alpha(reliability_data=x.T, level_of_measurement="interval"))
    p01 = next(p for p in s.pairs if (p.rater_a, p.rater_b) == ("r0", "r1"))
    assert p01.mean_diff == pytest.approx(float(np.mean(x[:, 0] - x[:, 1])))
    assert p01.loa_high - p01.loa_low == pytest.approx(2 * 1.96 * float(np.std(x[:, 0] - x[:, 1], ddof=1)))
    # people rate properties; the score follows from the rubric
    rub = rubric_for("ta", {"L1": 1, "L2": 1})
    df = read_ratings([_csv(tmp_path, "p.csv", [
        {"item_id": "e1", "property_id": "ta.L1.p0", "rater_id": "h", "value": "present"},
        {"item_id": "e1", "property_id": "ta.L2.p0", "rater_id": "h", "value": "absent"}])])
    out = add_derived_scores(df, {"ta": rub})
    assert out.loc[out["property_id"] == "score", "value"].tolist() == [pytest.approx(100 * 40 / 75)]


def _llm_grade(item: str, votes: list[list[str]], model: str = "judge-x") -> str:
    rub = rubric_for("ta", {"L1": len(votes)})
    grades = []
    for p, vs in zip(rub.properties, votes):
        maj = max(set(vs), key=vs.count)
        grades.append(PropertyGrade(property_id=p.id, level=p.level, verdict=maj, rater="llm",
                                    details={"samples": [{"verdict": v} for v in vs]}))
    fg = file_grade(rub, f"{item}.py", "llm", grades, item=item)
    return fg.model_copy(update={"rater_info": {"model": model}}).model_dump_json()


def test_self_consistency_from_judge_votes(tmp_path):
    p, a = "present", "absent"
    path = tmp_path / "llm.jsonl"
    path.write_text(_llm_grade("e1", [[p, p, p], [p, p, a]]) + "\n" + _llm_grade("e2", [[a, a, a], [p, a, a]]) + "\n")
    res = run_agreement([path], CFG)
    c = next(x for x in res.consistency if x.scope == "all")
    assert c.rater_id == "llm:judge-x" and c.n_units == 4
    assert c.unanimous == pytest.approx(0.5)
    assert c.majority_share == pytest.approx((1 + 2 / 3 + 1 + 2 / 3) / 4)
    # Fleiss over samples: P_i = 1, 1/3, 1, 1/3 -> 2/3; p = 1/2 -> P_e = 1/2; kappa = 1/3
    assert c.fleiss_kappa.value == pytest.approx(1 / 3)


def test_judge_outputs_become_raters_and_same_kind_files_stay_apart(tmp_path):
    p, a = "present", "absent"
    one, two = tmp_path / "gpt.jsonl", tmp_path / "other.jsonl"
    one.write_text(_llm_grade("e1", [[p], [a]], model="m") + "\n")
    two.write_text(_llm_grade("e1", [[p], [p]], model="m") + "\n")
    df = read_ratings([one, two])
    assert sorted(set(df["rater_id"])) == ["llm:m@gpt", "llm:m@other"]
    assert set(df.loc[df["property_id"] == "score", "item_id"]) == {"e1"}
    res = agreement_study(df, CFG)
    pooled = next(b for b in res.binary if b.scope == "all")
    assert pooled.pairs[0].percent_agreement == 0.5


def test_bad_ratings_name_file_row_and_column(tmp_path):
    bad = _csv(tmp_path, "bad.csv", [{"item_id": "e1", "property_id": "ta.L1.p0", "rater_id": "h", "value": "yes"},
                                     {"item_id": "e2", "property_id": "ta.L1.p0", "rater_id": "h", "value": "maybe"}])
    with pytest.raises(SpecError, match=r"bad.csv: row 2, column value: expected present/absent/unknown"):
        read_ratings([bad])
    with pytest.raises(SpecError, match=r"missing column\(s\) rater_id"):
        read_ratings([_csv(tmp_path, "m.csv", [{"item_id": "e", "property_id": "x", "value": 1}])])
    dup = _csv(tmp_path, "d.csv", [{"item_id": "e", "property_id": "ta.L1.p0", "rater_id": "h", "value": 1}] * 2)
    with pytest.raises(UserError, match="rated property 'ta.L1.p0' of item 'e' more than once"):
        read_ratings([dup])
    with pytest.raises(SpecError, match="a score is a number from 0 to 100"):
        read_ratings([_csv(tmp_path, "s.csv", [{"item_id": "e", "property_id": "score", "rater_id": "h",
                                                "value": 140}])])
    proc = subprocess.run([sys.executable, "-m", "d2kgrade", "agree", str(bad)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "bad.csv: row 2, column value" in proc.stderr


def test_agree_cli_json(tmp_path):
    a = [1.0] * 40 + [0.0] * 20
    b = [1.0] * 35 + [0.0] * 25
    ratings = _csv(tmp_path, "r.csv", _rows({"x": a, "y": b}))
    result = CliRunner().invoke(app, ["agree", str(ratings), "--resamples", "50", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    pair = next(x for x in data["binary"] if x["scope"] == "all")["pairs"][0]
    # 55 of 60 agree; kappa = (55/60 - pe) / (1 - pe), pe = (40*35 + 20*25) / 60^2
    pe = (40 * 35 + 20 * 25) / 3600
    assert pair["kappa"]["value"] == pytest.approx((55 / 60 - pe) / (1 - pe))
    text = CliRunner().invoke(app, ["agree", str(ratings), "--resamples", "0"], catch_exceptions=False)
    assert text.exit_code == 0 and "Landis & Koch" in text.stdout and "x vs y" in text.stdout


def test_disjoint_files_share_a_rater_and_ungradable_files_are_left_out(tmp_path):
    p, a = "present", "absent"
    one, two = tmp_path / "run1.jsonl", tmp_path / "run2.jsonl"
    one.write_text(_llm_grade("e1", [[p], [a]], model="m") + "\n")
    rub = rubric_for("ta", {"L1": 2})
    missing = file_grade(rub, "", "llm", [PropertyGrade(property_id=q.id, level=q.level, verdict="absent",
                                                        rater="llm") for q in rub.properties],
                         item="e3", error="the episode has no kernel")
    two.write_text(_llm_grade("e2", [[a], [a]], model="m") + "\n" + missing.model_copy(
        update={"rater_info": {"model": "m"}}).model_dump_json() + "\n")
    notes: list[str] = []
    df = read_ratings([one, two], notes)
    assert set(df["rater_id"]) == {"llm:m"}  # the same judge on different items is one rater
    assert set(df["item_id"]) == {"e1", "e2"}  # e3 had no kernel: its default verdicts are not ratings
    assert len(notes) == 1 and "could not be graded" in notes[0] and "run2.jsonl: line 2" in notes[0]
