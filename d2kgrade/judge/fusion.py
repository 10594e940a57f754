"""The fusion rule: one combined verdict per property from the static and the LLM judge's verdicts.

Rule version :data:`FUSION_RULE_VERSION` (``docs/scoring.md`` is the reference; change both together and bump the
version when any combined verdict could change):

1. Both ``unknown``: ``unknown`` (confidence 0, ``agreement: neither``).
2. Otherwise each side's verdict is weighed by how reliable that side has been *on this property*
   (:mod:`d2kgrade.judge.calibration`: sensitivity and specificity measured against hand labels, smoothed and
   bounded): its likelihood ratio ``P(verdict | present) / P(verdict | absent)``. An ``unknown`` side weighs 1.
   The judge's ratio is tempered by its vote: raised to ``2c - 1`` for a vote share ``c`` (full weight when the
   samples are unanimous, a third for a 2-1 split).
3. From even prior odds, ``P(present) = 1 / (1 + exp(-(w_s log LR_s + w_l log LR_l)))`` with ``w_s = 2 *
   static_weight`` and ``w_l = 2 * (1 - static_weight)`` (1 each by default); ``present`` above 0.5, ``absent`` at
   or below it (a tie goes to ``absent``); confidence ``max(p, 1 - p)``.

So a side that has been right more often on a property wins its disagreements, whatever it claims about its own
certainty: a unanimous judge does not beat a static check that its property's labels show to be more reliable,
and a static check that the labels show to be weak gives way to the judge. With one side unknown, the other side's
verdict stands (every reliability is above 0.5). Both raw verdicts, the two likelihood ratios, the reliabilities
used and the pooled probability are kept in ``details``.
"""

from __future__ import annotations

from typing import Any, Literal

from d2kgrade.grades import FileGrade, PropertyGrade, file_grade
from d2kgrade.judge.calibration import Calibration, load_calibration, posterior
from d2kgrade.schema import Property, Rubric, Task

FUSION_RULE_VERSION = 2
Agreement = Literal["agree", "disagree", "static_only", "llm_only", "neither"]


def _side(g: PropertyGrade | None) -> dict[str, Any] | None:
    if g is None:
        return None
    out: dict[str, Any] = {"verdict": g.verdict, "confidence": g.confidence, "reason": g.reason[:400]}
    if "unstable" in g.details:
        out["unstable"] = g.details["unstable"]
    return out


def judge_strength(llm: PropertyGrade) -> float:
    """How much of the judge's measured reliability one verdict carries: 1 for a unanimous vote, ``2c - 1`` for a
    vote share ``c`` (a single sample counts as unanimous)."""
    c = llm.confidence if llm.confidence > 0 else 1.0
    return max(0.0, min(1.0, 2.0 * c - 1.0))


def fuse_property(prop: Property, static: PropertyGrade | None, llm: PropertyGrade | None, *,
                  static_weight: float = 0.5, calibration: Calibration | None = None) -> PropertyGrade:
    """The combined grade of one property (module docstring). ``None`` on a side counts as ``unknown``."""
    if not 0.0 <= static_weight <= 1.0:
        raise ValueError(f"static_weight must be in [0, 1], got {static_weight}")
    cal = calibration or load_calibration()
    s_v = static.verdict if static else "unknown"
    l_v = llm.verdict if llm else "unknown"
    details: dict[str, Any] = {"fusion_rule_version": FUSION_RULE_VERSION, "static": _side(static),
                               "llm": _side(llm)}
    if s_v == "unknown" and l_v == "unknown":
        details.update(agreement="neither", winner=None)
        return PropertyGrade(property_id=prop.id, level=prop.level, verdict="unknown", confidence=0.0,
                             rater="combined", reason="neither static analysis nor the judge could tell",
                             details=details)
    rs, rl = cal.static_of(prop.id), cal.judge_of(prop.id)
    lr_s = rs.likelihood_ratio(s_v)
    strength = judge_strength(llm) if llm is not None and l_v != "unknown" else 0.0
    lr_l = rl.likelihood_ratio(l_v) ** strength
    p = posterior((lr_s, 2.0 * static_weight), (lr_l, 2.0 * (1.0 - static_weight)))
    verdict = "present" if p > 0.5 + 1e-12 else "absent"
    conf = max(p, 1.0 - p)
    details.update(p_present=round(p, 6), lr_static=round(lr_s, 4), lr_llm=round(lr_l, 4),
                   reliability={"static": [round(rs.sensitivity, 3), round(rs.specificity, 3), rs.source],
                                "llm": [round(rl.sensitivity, 3), round(rl.specificity, 3), rl.source]})
    agreement: Agreement
    if l_v == "unknown":
        agreement, winner = "static_only", "static"
        evidence = static.evidence if static else []
        reason = f"static only (judge unknown): {static.reason if static else ''}"
    elif s_v == "unknown":
        agreement, winner = "llm_only", "llm"
        evidence = llm.evidence if llm else []
        reason = f"judge only (static unknown): {llm.reason if llm else ''}"
    elif s_v == l_v:
        agreement, winner = "agree", "both"
        evidence = (static.evidence if static else []) + (llm.evidence if llm else [])
        reason = f"static and judge agree: {s_v}"
    else:
        assert static is not None and llm is not None
        agreement = "disagree"
        winner = "static" if verdict == s_v else "llm"
        evidence = static.evidence if winner == "static" else llm.evidence
        tie = " (a tie goes to absent)" if abs(p - 0.5) <= 1e-12 else ""
        reason = (f"disagreement: static {s_v} (reliability {rs.sensitivity:.2f}/{rs.specificity:.2f}) vs judge "
                  f"{l_v} ({llm.confidence:.2f} of the votes, reliability {rl.sensitivity:.2f}/"
                  f"{rl.specificity:.2f}); {winner} wins{tie}")
    details.update(agreement=agreement, winner=winner)
    return PropertyGrade(property_id=prop.id, level=prop.level, verdict=verdict, confidence=round(conf, 4),
                         rater="combined", evidence=list(evidence), reason=reason, details=details)


def fuse_file(rubric: Rubric, static: FileGrade | None, llm: FileGrade, *, task: Task | None = None,
              gating: bool = False, static_weight: float = 0.5,
              calibration: Calibration | None = None) -> FileGrade:
    """The combined :class:`FileGrade` of one file: :func:`fuse_property` per property, then the 0-100 score of
    :func:`d2kgrade.grades.implementation_score` (rubric weights per level, optional dependency gating)."""
    cal = calibration or load_calibration()
    s_by = {g.property_id: g for g in static.properties} if static else {}
    l_by = {g.property_id: g for g in llm.properties}
    grades = [fuse_property(p, s_by.get(p.id), l_by.get(p.id), static_weight=static_weight, calibration=cal)
              for p in rubric.properties if not p.deprecated]
    errors = [e for e in ((static.error if static else ""), llm.error) if e]
    fg = file_grade(rubric, llm.file, "combined", grades, kind=llm.kind, task=task, gating=gating,
                    error="; ".join(errors), item=llm.item)
    return fg.model_copy(update={"fusion_rule_version": FUSION_RULE_VERSION,
                                 "rater_info": {"static_weight": static_weight,
                                                "static_available": static is not None,
                                                "calibration_version": cal.version,
                                                "calibration_sources": dict(cal.sources),
                                                "llm": llm.rater_info}})


def agreement_counts(combined: FileGrade) -> dict[str, int]:
    """How many properties fell in each agreement class (``agree``, ``disagree``, ...)."""
    out: dict[str, int] = {}
    for g in combined.properties:
        a = str(g.details.get("agreement", "neither"))
        out[a] = out.get(a, 0) + 1
    return out
