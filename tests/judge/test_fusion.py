"""The fusion rule and the vote, on hand-made cases (docs/scoring.md)."""

from __future__ import annotations

import pytest

from d2kgrade.grades import Evidence, PropertyGrade, file_grade
from d2kgrade.judge.fusion import FUSION_RULE_VERSION, agreement_counts, fuse_file, fuse_property
from d2kgrade.judge.vote import SampleVerdict, llm_property_grade, vote


def g(pid: str, level: str, verdict: str, conf: float, rater: str, line: int = 1) -> PropertyGrade:
    ev = [Evidence(file="k.py", start_line=line, end_line=line, code=f"{rater} line")] if verdict != "unknown" else []
    return PropertyGrade(property_id=pid, level=level, verdict=verdict, confidence=conf, rater=rater, evidence=ev,
                         reason=f"{rater} says {verdict}")


@pytest.mark.parametrize("s,l,expect,conf,agreement,winner", [
    (("present", 1.0), ("present", 0.6667), "present", 0.83335, "agree", "both"),
    (("absent", 0.9), ("absent", 1.0), "absent", 0.95, "agree", "both"),
    (("unknown", 0.0), ("present", 0.6667), "present", 0.6667, "llm_only", "llm"),
    (("absent", 0.8), ("unknown", 0.0), "absent", 0.8, "static_only", "static"),
    (("unknown", 0.0), ("unknown", 0.0), "unknown", 0.0, "neither", None),
    # disagreement: the more confident side wins; confidence is the pooled probability of its verdict
    (("present", 0.9), ("absent", 0.6667), "present", 0.61665, "disagree", "static"),
    (("present", 0.7), ("absent", 1.0), "absent", 0.65, "disagree", "llm"),
    (("absent", 0.6), ("present", 1.0), "present", 0.7, "disagree", "llm"),
    # a tie goes to absent, whoever said it
    (("present", 1.0), ("absent", 1.0), "absent", 0.5, "disagree", "llm"),
    (("absent", 1.0), ("present", 1.0), "absent", 0.5, "disagree", "static"),
])
def test_fusion_cases(rubric, s, l, expect, conf, agreement, winner):
    prop = rubric.properties[0]
    out = fuse_property(prop, g(prop.id, prop.level, *s, "static", 3), g(prop.id, prop.level, *l, "llm", 7))
    assert out.rater == "combined" and out.verdict == expect
    assert out.confidence == pytest.approx(conf, abs=1e-4)
    assert out.details["agreement"] == agreement and out.details["winner"] == winner
    assert out.details["static"]["verdict"] == s[0] and out.details["llm"]["verdict"] == l[0]
    assert out.details["fusion_rule_version"] == FUSION_RULE_VERSION
    lines = {e.start_line for e in out.evidence}
    assert lines == {"both": {3, 7}, "static": {3}, "llm": {7}, None: set()}[winner]


def test_static_weight_shifts_a_disagreement(rubric):
    prop = rubric.properties[0]
    s, l = g(prop.id, "L1", "present", 0.8, "static"), g(prop.id, "L1", "absent", 0.9, "llm")
    assert fuse_property(prop, s, l).verdict == "absent"
    heavy = fuse_property(prop, s, l, static_weight=0.8)
    assert heavy.verdict == "present" and heavy.details["p_present"] == pytest.approx(0.8 * 0.8 + 0.2 * 0.1)
    with pytest.raises(ValueError):
        fuse_property(prop, s, l, static_weight=1.5)


def test_fused_file_score_and_versions(rubric, task):
    ids = [(p.id, p.level) for p in rubric.properties]
    static = file_grade(rubric, "k.py", "static", [g(i, lv, "present", 1.0, "static") for i, lv in ids])
    llm_v = ["present", "absent", "unknown"]
    llm = file_grade(rubric, "k.py", "llm", [g(i, lv, llm_v[n % 3], 1.0, "llm") for n, (i, lv) in enumerate(ids)])
    comb = fuse_file(rubric, static, llm)
    assert comb.rater == "combined" and comb.fusion_rule_version == FUSION_RULE_VERSION
    # present+present and present+unknown stand; present+absent at equal confidence is absent
    expect = {i: ("absent" if llm_v[n % 3] == "absent" else "present") for n, (i, _) in enumerate(ids)}
    assert {p.property_id: p.verdict for p in comb.properties} == expect
    counts = agreement_counts(comb)
    assert counts == {"agree": 3, "disagree": 3, "static_only": 3}
    # the score is grades.implementation_score of the fused verdicts: L1 2 props, L2 4, L3 3 (40/35/25 points)
    per_level = {lv.level: lv.points for lv in comb.levels}
    assert per_level["L1"] == pytest.approx(40 * 1 / 2)   # ids 0 (present) 1 (absent)
    assert per_level["L2"] == pytest.approx(35 * 3 / 4)   # ids 2 (unknown->static present) 3 4 5
    assert per_level["L3"] == pytest.approx(25 * 2 / 3)   # ids 6 7 8
    gated = fuse_file(rubric, static, llm, task=task, gating=True)
    assert gated.gating and gated.score <= comb.score


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
