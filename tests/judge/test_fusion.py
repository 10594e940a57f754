"""The fusion rule, the calibration it reads and the vote: hand-computed cases, then simulated raters of known error
rates (docs/scoring.md)."""

from __future__ import annotations

import math
import random

import pytest

from d2kgrade.grades import Evidence, PropertyGrade, file_grade
from d2kgrade.judge.calibration import (
    CEILING,
    FLOOR,
    Calibration,
    Counts,
    Reliability,
    calibrate_rater,
    counts_from_accuracy,
    estimate,
    load_calibration,
    posterior,
)
from d2kgrade.judge.fusion import FUSION_RULE_VERSION, agreement_counts, fuse_file, fuse_property, judge_strength
from d2kgrade.judge.vote import SampleVerdict, llm_property_grade, vote


def g(pid: str, level: str, verdict: str, conf: float, rater: str, line: int = 1) -> PropertyGrade:
    ev = [Evidence(file="k.py", start_line=line, end_line=line, code=f"{rater} line")] if verdict != "unknown" else []
    return PropertyGrade(property_id=pid, level=level, verdict=verdict, confidence=conf, rater=rater, evidence=ev,
                         reason=f"{rater} says {verdict}")


def cal_for(pid: str, static: tuple[float, float], judge: tuple[float, float]) -> Calibration:
    return Calibration(static={pid: Reliability(*static, 10, "test")}, judge={pid: Reliability(*judge, 10, "test")})


# -------------------------------------------------------------------------------------------- hand-computed cases

STRONG, WEAK, JUDGE = (0.95, 0.95), (0.6, 0.6), (0.85, 0.85)


@pytest.mark.parametrize("static_rel,s,l,expect,p_present,agreement,winner", [
    # LR_static(present) = 0.95/0.05 = 19; LR_judge(absent) = 0.15/0.85 = 0.17647 (unanimous): p = 19*0.17647/(1+.)
    (STRONG, ("present", 0.9), ("absent", 1.0), "present", 19 * 0.15 / 0.85 / (1 + 19 * 0.15 / 0.85), "disagree",
     "static"),
    # a weak static check gives way to the same judge: LR 1.5 vs 0.17647
    (WEAK, ("present", 0.9), ("absent", 1.0), "absent", 1.5 * 0.15 / 0.85 / (1 + 1.5 * 0.15 / 0.85), "disagree",
     "llm"),
    # a 2-1 vote carries a third of the judge's weight: LR_judge = 0.17647 ** (1/3) = 0.561, which a moderate
    # static check (LR 3) outweighs and the weak one (LR 1.5) does not
    ((0.75, 0.75), ("present", 0.9), ("absent", 2 / 3), "present",
     3 * (0.15 / 0.85) ** (1 / 3) / (1 + 3 * (0.15 / 0.85) ** (1 / 3)), "disagree", "static"),
    (WEAK, ("present", 0.9), ("absent", 2 / 3), "absent",
     1.5 * (0.15 / 0.85) ** (1 / 3) / (1 + 1.5 * (0.15 / 0.85) ** (1 / 3)), "disagree", "llm"),
    # agreement stands, with the pooled probability as confidence
    (STRONG, ("absent", 0.9), ("absent", 1.0), "absent", 1 / (1 + 19 * 0.85 / 0.15), "agree", "both"),
    # one side unknown: the other side's verdict, at its own reliability
    (STRONG, ("unknown", 0.0), ("present", 1.0), "present", (0.85 / 0.15) / (1 + 0.85 / 0.15), "llm_only", "llm"),
    (WEAK, ("absent", 0.8), ("unknown", 0.0), "absent", (0.4 / 0.6) / (1 + 0.4 / 0.6), "static_only", "static"),
    # equally reliable sides that disagree: a tie goes to absent, whoever said it
    ((0.85, 0.85), ("present", 1.0), ("absent", 1.0), "absent", 0.5, "disagree", "llm"),
    ((0.85, 0.85), ("absent", 1.0), ("present", 1.0), "absent", 0.5, "disagree", "static"),
])
def test_fusion_cases(rubric, static_rel, s, l, expect, p_present, agreement, winner):
    prop = rubric.properties[0]
    cal = cal_for(prop.id, static_rel, JUDGE)
    out = fuse_property(prop, g(prop.id, prop.level, *s, "static", 3), g(prop.id, prop.level, *l, "llm", 7),
                        calibration=cal)
    assert out.rater == "combined" and out.verdict == expect
    assert out.details["p_present"] == pytest.approx(p_present, abs=1e-5)
    assert out.confidence == pytest.approx(max(p_present, 1 - p_present), abs=1e-4)
    assert out.details["agreement"] == agreement and out.details["winner"] == winner
    assert out.details["static"]["verdict"] == s[0] and out.details["llm"]["verdict"] == l[0]
    assert out.details["fusion_rule_version"] == FUSION_RULE_VERSION == 2
    lines = {e.start_line for e in out.evidence}
    assert lines == {"both": {3, 7}, "static": {3}, "llm": {7}}[winner]


def test_neither_side_knows(rubric):
    prop = rubric.properties[0]
    out = fuse_property(prop, g(prop.id, "L1", "unknown", 0, "static"), None)
    assert out.verdict == "unknown" and out.confidence == 0 and out.details["agreement"] == "neither"


def test_a_unanimous_judge_does_not_automatically_beat_static(rubric):
    """Rule 1 let any unanimous judge (confidence 1.0) beat static analysis (at most 0.9). Now the measured
    reliability decides: the same unanimous judge loses to a strong static check and wins against a weak one."""
    prop = rubric.properties[0]
    s, l = g(prop.id, "L1", "present", 0.9, "static"), g(prop.id, "L1", "absent", 1.0, "llm")
    assert fuse_property(prop, s, l, calibration=cal_for(prop.id, STRONG, JUDGE)).verdict == "present"
    assert fuse_property(prop, s, l, calibration=cal_for(prop.id, WEAK, JUDGE)).verdict == "absent"
    shipped = load_calibration()  # the calibration in the package: some property lets static win
    wins = [p.id for p in rubric.properties if fuse_property(
        p, g(p.id, p.level, "present", 0.9, "static"), g(p.id, p.level, "absent", 1.0, "llm"),
        calibration=shipped).verdict == "present"]
    assert shipped.sources and wins


def test_static_weight_shifts_a_disagreement(rubric):
    prop = rubric.properties[0]
    cal = cal_for(prop.id, (0.8, 0.8), JUDGE)
    s, l = g(prop.id, "L1", "present", 0.8, "static"), g(prop.id, "L1", "absent", 1.0, "llm")
    assert fuse_property(prop, s, l, calibration=cal).verdict == "absent"  # 4 x 0.176 < 1
    heavy = fuse_property(prop, s, l, static_weight=0.8, calibration=cal)
    assert heavy.verdict == "present"  # 4^1.6 x 0.176^0.4 > 1
    assert heavy.details["p_present"] == pytest.approx(posterior((4.0, 1.6), (0.15 / 0.85, 0.4)))
    with pytest.raises(ValueError):
        fuse_property(prop, s, l, static_weight=1.5)


def test_fused_file_score_and_versions(rubric, task):
    ids = [(p.id, p.level) for p in rubric.properties]
    cal = Calibration(static_default=Reliability(0.85, 0.85), judge_default=Reliability(0.85, 0.85))
    static = file_grade(rubric, "k.py", "static", [g(i, lv, "present", 1.0, "static") for i, lv in ids])
    llm_v = ["present", "absent", "unknown"]
    llm = file_grade(rubric, "k.py", "llm", [g(i, lv, llm_v[n % 3], 1.0, "llm") for n, (i, lv) in enumerate(ids)])
    comb = fuse_file(rubric, static, llm, calibration=cal)
    assert comb.rater == "combined" and comb.fusion_rule_version == FUSION_RULE_VERSION
    # present+present and present+unknown stand; present+absent at equal reliability is absent
    expect = {i: ("absent" if llm_v[n % 3] == "absent" else "present") for n, (i, _) in enumerate(ids)}
    assert {p.property_id: p.verdict for p in comb.properties} == expect
    assert agreement_counts(comb) == {"agree": 3, "disagree": 3, "static_only": 3}
    per_level = {lv.level: lv.points for lv in comb.levels}
    assert per_level["L1"] == pytest.approx(40 * 1 / 2)
    assert per_level["L2"] == pytest.approx(35 * 3 / 4)
    assert per_level["L3"] == pytest.approx(25 * 2 / 3)
    assert comb.rater_info["calibration_version"] == cal.version
    gated = fuse_file(rubric, static, llm, task=task, gating=True, calibration=cal)
    assert gated.gating and gated.score <= comb.score


# -------------------------------------------------------------------------------------------- calibration


def test_estimates_are_smoothed_toward_the_pool_and_bounded():
    r = estimate(Counts(tp=5, fn=0, tn=5, fp=0), (0.7, 0.8), "x")
    assert r.sensitivity == pytest.approx((5 + 4 * 0.7) / 9) and r.specificity == pytest.approx((5 + 4 * 0.8) / 9)
    assert estimate(Counts(tp=1000, tn=1000), (0.9, 0.9), "x").sensitivity == CEILING
    assert estimate(Counts(fn=1000, fp=1000), (0.9, 0.9), "x").specificity == FLOOR
    table, overall = calibrate_rater({"t.L1.a": Counts(tp=3, fn=1), "t.L2.b": Counts(tn=4, fp=4)}, (0.85, 0.85), "x")
    assert set(table) == {"t.L1.a", "t.L2.b", "*.L1", "*.L2"} and overall.n == 12
    assert Calibration(static=table).static_of("other.L2.c") is table["*.L2"]  # pooled level for other tasks


def test_counts_from_accuracy_drop_unknowns():
    acc = {"tasks": {"t": {"properties": {"t.L1.a": {"n": 5, "tp": 2, "fn": 2, "tn": 1, "fp": 0, "unknown": 0,
                                                      "errors": ["t/x t.L1.a: labelled present, graded unknown"]}}}}}
    assert counts_from_accuracy(acc)["t.L1.a"] == Counts(tp=2, fn=1, tn=1, fp=0)


# -------------------------------------------------------------------------------------------- simulated raters

def _simulate(rng: random.Random, n_files: int, props: dict[str, float], judge_err: float, k: int = 3):
    """Ground truth and both raters' verdicts: static errs at the property's rate (and is unknown 10% of the
    time), the judge's K samples each err at ``judge_err`` and are majority-voted."""
    rows = []
    for _ in range(n_files):
        for pid, s_err in props.items():
            truth = rng.random() < 0.45
            if rng.random() < 0.1:
                s = "unknown"
            else:
                s = ("present" if truth else "absent") if rng.random() >= s_err else ("absent" if truth else "present")
            samples = [truth if rng.random() >= judge_err else not truth for _ in range(k)]
            yes = sum(samples)
            j = "present" if yes * 2 > k else "absent"
            conf = max(yes, k - yes) / k
            rows.append((pid, truth, s, j, conf))
    return rows


def _counts(rows, side: int) -> dict[str, Counts]:
    out: dict[str, Counts] = {}
    for r in rows:
        out.setdefault(r[0], Counts()).tally(r[1], r[side])
    return out


def test_combined_beats_either_side_with_simulated_raters(rubric):
    """Properties where static analysis errs 3% and properties where it errs 35%; a judge whose samples err 20%
    (a 3-vote judge errs ~10%). Calibrated on one simulated corpus, scored on another: the fused verdict is right
    more often than static analysis alone, than the judge alone, and than rule 1 (the more confident side wins)."""
    rng = random.Random(1234)
    props = {f"sim.L{1 + i % 3}.p{i}": (0.03 if i % 2 else 0.35) for i in range(12)}
    train = _simulate(rng, 400, props, judge_err=0.2)
    static_rel, s_pool = calibrate_rater(_counts(train, 2), (0.85, 0.85), "simulated")
    judge_rel, j_pool = calibrate_rater(_counts(train, 3), (0.85, 0.85), "simulated")
    cal = Calibration(static=static_rel, judge=judge_rel, static_default=s_pool, judge_default=j_pool)
    prop = rubric.properties[0]
    test = _simulate(rng, 400, props, judge_err=0.2)
    right = {"static": 0, "judge": 0, "combined": 0, "rule1": 0}
    for pid, truth, s, j, conf in test:
        p = prop.model_copy(update={"id": pid, "level": pid.split(".")[1]})
        sg, jg = g(pid, p.level, s, 0.9 if s != "unknown" else 0.0, "static"), g(pid, p.level, j, conf, "llm")
        want = "present" if truth else "absent"
        right["static"] += s == want
        right["judge"] += j == want
        right["combined"] += fuse_property(p, sg, jg, calibration=cal).verdict == want
        rule1 = j if s == "unknown" else s if s == j else ("present" if (0.9 if s == "present" else 0.1) * 0.5 + (
            conf if j == "present" else 1 - conf) * 0.5 > 0.5 else "absent")
        right["rule1"] += rule1 == want
    n = len(test)
    acc = {k: v / n for k, v in right.items()}
    assert acc["combined"] > acc["static"] + 0.02 and acc["combined"] > acc["judge"] + 0.02, acc
    assert acc["combined"] > acc["rule1"], acc
    # where static is strong the fusion follows it; where it is weak, the judge
    strong = [r for r in test if props[r[0]] == 0.03 and r[2] != "unknown" and r[2] != r[3]]
    followed = sum(fuse_property(prop.model_copy(update={"id": r[0], "level": r[0].split(".")[1]}),
                                 g(r[0], "L1", r[2], 0.9, "static"), g(r[0], "L1", r[3], r[4], "llm"),
                                 calibration=cal).verdict == r[2] for r in strong)
    assert followed / len(strong) > 0.9


def test_judge_strength_and_likelihood_ratios():
    assert judge_strength(g("p", "L1", "present", 1.0, "llm")) == 1.0
    assert judge_strength(g("p", "L1", "present", 2 / 3, "llm")) == pytest.approx(1 / 3)
    r = Reliability(0.9, 0.8)
    assert r.likelihood_ratio("present") == pytest.approx(4.5) and r.likelihood_ratio("absent") == pytest.approx(0.125)
    assert r.likelihood_ratio("unknown") == 1.0
    assert posterior((4.5, 1.0)) == pytest.approx(4.5 / 5.5)
    assert posterior((4.5, 1.0), (1 / 4.5, 1.0)) == pytest.approx(0.5) and math.isclose(posterior(), 0.5)


# -------------------------------------------------------------------------------------------- the vote


def sv(verdict: str) -> SampleVerdict:
    return SampleVerdict(raw={"present": "met", "absent": "not_met", "unknown": "unparseable"}[verdict],
                         verdict=verdict)


@pytest.mark.parametrize("votes,expect,conf,unstable", [
    (["present"] * 3, "present", 1.0, False),
    (["present", "present", "absent"], "present", 2 / 3, True),
    (["absent", "unknown", "absent"], "absent", 2 / 3, False),
    (["present", "absent", "unknown"], "unknown", 0.0, True),
    (["present", "absent"], "unknown", 0.0, True),
    (["unknown", "unknown", "present"], "unknown", 0.0, False),
])
def test_vote(votes, expect, conf, unstable):
    v, c, u, counts = vote([sv(x) for x in votes])
    assert (v, u) == (expect, unstable) and c == pytest.approx(conf)
    assert sum(counts.values()) == len(votes)


def test_split_vote_grade_is_marked_unstable(rubric):
    grade = llm_property_grade(rubric.properties[0], [sv("present"), sv("absent"), sv("present")])
    assert grade.verdict == "present" and grade.details["unstable"] is True
    assert grade.reason.startswith("[split vote 2 present / 1 absent]")
    assert len(grade.details["samples"]) == 3
