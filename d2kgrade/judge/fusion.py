"""The fusion rule: one combined verdict per property from the static and the LLM judge's verdicts.

Rule version :data:`FUSION_RULE_VERSION` (``docs/scoring.md`` is the reference; change both together and bump the
version when any combined verdict could change):

1. Both ``unknown``: ``unknown`` (confidence 0).
2. One side ``unknown``: the other side's verdict and confidence (``agreement`` = ``static_only`` / ``llm_only``).
3. Both give the same verdict: it stands; confidence is the weighted mean of the two (``agree``).
4. They disagree (``disagree``): each side's confidence becomes a probability that the property is present
   (``c`` for ``present``, ``1 - c`` for ``absent``); the weighted mean of the two (a linear opinion pool,
   weights ``static_weight`` and ``1 - static_weight``, 0.5 each by default) decides: ``present`` above 0.5,
   ``absent`` at or below it. With equal weights the more confident side wins and a tie goes to ``absent``: a
   point is not awarded on a property that one of two equally sure raters denies. The confidence is
   ``max(p, 1 - p)``.

Both raw verdicts, who won, and the pooled probability are kept in ``details`` of the combined grade, so
agreement between the raters can be studied later from the combined records alone.
"""

from __future__ import annotations

from typing import Any, Literal

from d2kgrade.grades import FileGrade, PropertyGrade, file_grade
from d2kgrade.schema import Property, Rubric, Task

FUSION_RULE_VERSION = 1
Agreement = Literal["agree", "disagree", "static_only", "llm_only", "neither"]


def _side(g: PropertyGrade | None) -> dict[str, Any] | None:
    if g is None:
        return None
    out: dict[str, Any] = {"verdict": g.verdict, "confidence": g.confidence, "reason": g.reason[:400]}
    if "unstable" in g.details:
        out["unstable"] = g.details["unstable"]
    return out


def fuse_property(prop: Property, static: PropertyGrade | None, llm: PropertyGrade | None, *,
                  static_weight: float = 0.5) -> PropertyGrade:
    """The combined grade of one property (module docstring). ``None`` on a side counts as ``unknown``."""
    if not 0.0 <= static_weight <= 1.0:
        raise ValueError(f"static_weight must be in [0, 1], got {static_weight}")
    s_v = static.verdict if static else "unknown"
    l_v = llm.verdict if llm else "unknown"
    details: dict[str, Any] = {"fusion_rule_version": FUSION_RULE_VERSION, "static": _side(static),
                               "llm": _side(llm)}
    agreement: Agreement
    if s_v == "unknown" and l_v == "unknown":
        agreement, verdict, conf, winner, evidence = "neither", "unknown", 0.0, None, []
        reason = "neither static analysis nor the judge could tell"
    elif l_v == "unknown":
        assert static is not None
        agreement, verdict, conf, winner, evidence = "static_only", s_v, static.confidence, "static", static.evidence
        reason = f"static only (judge unknown): {static.reason}"
    elif s_v == "unknown":
        assert llm is not None
        agreement, verdict, conf, winner, evidence = "llm_only", l_v, llm.confidence, "llm", llm.evidence
        reason = f"judge only (static unknown): {llm.reason}"
    else:
        assert static is not None and llm is not None
        w_s, w_l = static_weight, 1.0 - static_weight
        if s_v == l_v:
            agreement, verdict, winner = "agree", s_v, "both"
            conf = w_s * static.confidence + w_l * llm.confidence
            evidence = static.evidence + llm.evidence
            reason = f"static and judge agree: {s_v}"
        else:
            agreement = "disagree"
            p_s = static.confidence if s_v == "present" else 1.0 - static.confidence
            p_l = llm.confidence if l_v == "present" else 1.0 - llm.confidence
            p = w_s * p_s + w_l * p_l
            details["p_present"] = round(p, 6)
            verdict = "present" if p > 0.5 + 1e-12 else "absent"
            conf = max(p, 1.0 - p)
            winner = "static" if verdict == s_v else "llm"
            evidence = static.evidence if winner == "static" else llm.evidence
            tie = " (a tie goes to absent)" if abs(p - 0.5) <= 1e-12 else ""
            reason = (f"disagreement: static {s_v} ({static.confidence:.2f}) vs judge {l_v} ({llm.confidence:.2f}); "
                      f"{winner} wins{tie}")
    details.update(agreement=agreement, winner=winner)
    return PropertyGrade(property_id=prop.id, level=prop.level, verdict=verdict, confidence=round(conf, 4),
                         rater="combined", evidence=list(evidence), reason=reason, details=details)


def fuse_file(rubric: Rubric, static: FileGrade | None, llm: FileGrade, *, task: Task | None = None,
              gating: bool = False, static_weight: float = 0.5) -> FileGrade:
    """The combined :class:`FileGrade` of one file: :func:`fuse_property` per property, then the 0-100 score of
    :func:`d2kgrade.grades.implementation_score` (rubric weights per level, optional dependency gating)."""
    s_by = {g.property_id: g for g in static.properties} if static else {}
    l_by = {g.property_id: g for g in llm.properties}
    grades = [fuse_property(p, s_by.get(p.id), l_by.get(p.id), static_weight=static_weight)
              for p in rubric.properties if not p.deprecated]
    errors = [e for e in ((static.error if static else ""), llm.error) if e]
    fg = file_grade(rubric, llm.file, "combined", grades, kind=llm.kind, task=task, gating=gating,
                    error="; ".join(errors), item=llm.item)
    return fg.model_copy(update={"fusion_rule_version": FUSION_RULE_VERSION,
                                 "rater_info": {"static_weight": static_weight,
                                                "static_available": static is not None,
                                                "llm": llm.rater_info}})


def agreement_counts(combined: FileGrade) -> dict[str, int]:
    """How many properties fell in each agreement class (``agree``, ``disagree``, ...)."""
    out: dict[str, int] = {}
    for g in combined.properties:
        a = str(g.details.get("agreement", "neither"))
        out[a] = out.get(a, 0) + 1
    return out
