"""From the judge's answers to one :class:`~d2kgrade.grades.PropertyGrade` per property.

Per sample (see ``docs/scoring.md``, "The LLM judge's verdict"):

- ``met`` becomes ``present`` when it quotes at least one piece of evidence and every quote is verified against
  the file; otherwise it is downgraded to ``unknown`` and flagged (``no_evidence`` / ``unverified_evidence``):
  the judge's claim could not be checked, so it neither earns the point nor denies it.
- ``not_met`` becomes ``absent``. ``not_applicable`` becomes ``absent`` too, flagged ``not_applicable``: every
  rubric property applies to its task, so a judge that finds a property inapplicable is saying the document does
  not have it, and a score must not rise by the judge excusing it. Unverified quotes are flagged, not penalized
  (an absence needs no evidence).
- An answer that could not be parsed after the re-asks is ``unknown`` (``unparseable``), and a request that got no
  reply is ``unknown`` (``request_failed``); neither is ever read as ``absent``.

Then the vote: the verdict is the one more than half of the K samples gave, else ``unknown``; the confidence is
its share of the samples (0 for ``unknown``). A vote with both ``present`` and ``absent`` among its samples is
*unstable* (``details.unstable``): with K=3 a 2-1 split keeps the majority at confidence 0.67, which the fusion
rule weighs against static analysis.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from d2kgrade.grades import Evidence, PropertyGrade, Verdict
from d2kgrade.judge.answer import Answer
from d2kgrade.judge.evidence import Document
from d2kgrade.schema import Property

MAX_REASONING_CHARS = 800


@dataclass
class SampleVerdict:
    """One sample's verdict on one property, after evidence checking."""

    raw: str
    """The judge's verdict (``met``, ``not_met``, ``not_applicable``) or ``unparseable`` / ``request_failed``."""
    verdict: Verdict
    """What it counts as."""
    flags: list[str] = field(default_factory=list)
    """``unverified_evidence``, ``no_evidence``, ``not_applicable``, ``unparseable``, ``request_failed``."""
    evidence: list[Evidence] = field(default_factory=list)
    """Verified quotes."""
    quote_problems: list[str] = field(default_factory=list)
    """Why each unverified quote failed."""
    reasoning: str = ""
    """The judge's reasoning, or why there is none."""
    cached: bool = False
    """Answered from the cache."""

    def as_dict(self) -> dict[str, Any]:
        """For ``PropertyGrade.details``."""
        return {"raw_verdict": self.raw, "verdict": self.verdict, "flags": self.flags,
                "quote_problems": self.quote_problems, "reasoning": self.reasoning[:MAX_REASONING_CHARS],
                "cached": self.cached}


def sample_verdict(answer: Answer, doc: Document, sample: int) -> SampleVerdict:
    """Check one answer's quotes against ``doc`` and map its verdict (module docstring)."""
    evidence: list[Evidence] = []
    problems: list[str] = []
    for q in answer.evidence:
        check = doc.check(q)
        if check.ok:
            evidence.append(doc.evidence(check, note=f"judge quote (sample {sample})"))
        else:
            problems.append(f"lines {q.start_line}-{q.end_line}: {check.problem}")
    flags: list[str] = []
    if answer.verdict == "met":
        if not answer.evidence:
            return SampleVerdict("met", "unknown", ["no_evidence"], [], [], answer.reasoning)
        if problems:
            return SampleVerdict("met", "unknown", ["unverified_evidence"], evidence, problems, answer.reasoning)
        return SampleVerdict("met", "present", [], evidence, [], answer.reasoning)
    if answer.verdict == "not_applicable":
        flags.append("not_applicable")
    if problems:
        flags.append("unverified_evidence")
    return SampleVerdict(answer.verdict, "absent", flags, evidence, problems, answer.reasoning)


def failed_sample(kind: str, why: str, *, cached: bool = False) -> SampleVerdict:
    """A sample without a usable answer: ``kind`` is ``unparseable`` or ``request_failed``."""
    return SampleVerdict(kind, "unknown", [kind], reasoning=why, cached=cached)


def vote(samples: list[SampleVerdict]) -> tuple[Verdict, float, bool, dict[str, int]]:
    """Majority vote: (verdict, confidence, unstable, vote counts)."""
    counts = Counter(s.verdict for s in samples)
    votes = {v: counts.get(v, 0) for v in ("present", "absent", "unknown")}
    n = len(samples)
    unstable = votes["present"] > 0 and votes["absent"] > 0
    for v in ("present", "absent", "unknown"):
        if n and votes[v] * 2 > n:
            return v, (votes[v] / n if v != "unknown" else 0.0), unstable, votes  # type: ignore[return-value]
    return "unknown", 0.0, unstable, votes


def llm_property_grade(prop: Property, samples: list[SampleVerdict]) -> PropertyGrade:
    """The judge's :class:`PropertyGrade` on ``prop`` from its samples."""
    verdict, confidence, unstable, votes = vote(samples)
    winners = [s for s in samples if s.verdict == verdict]
    evidence: list[Evidence] = []
    seen: set[tuple[int, int]] = set()
    for s in winners if verdict != "unknown" else []:
        for e in s.evidence:
            if (e.start_line, e.end_line) not in seen:
                seen.add((e.start_line, e.end_line))
                evidence.append(e)
    flags = sorted({f for s in samples for f in s.flags})
    if verdict != "unknown":
        reason = winners[0].reasoning[:MAX_REASONING_CHARS]
        if unstable:
            reason = f"[split vote {votes['present']} present / {votes['absent']} absent] " + reason
    elif unstable or not votes["unknown"] * 2 > len(samples):
        reason = (f"no majority among {len(samples)} samples: {votes['present']} present, {votes['absent']} absent, "
                  f"{votes['unknown']} unknown")
    else:
        reason = "; ".join(sorted({f"{s.raw}: {s.reasoning[:200]}" for s in samples}))[:MAX_REASONING_CHARS]
    return PropertyGrade(
        property_id=prop.id, level=prop.level, verdict=verdict, confidence=round(confidence, 4), rater="llm",
        evidence=evidence, reason=reason,
        details={"votes": votes, "unstable": unstable, "flags": flags, "samples": [s.as_dict() for s in samples]})
