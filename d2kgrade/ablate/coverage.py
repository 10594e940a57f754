"""Which of the catalog's design properties have an ablation transform, and why the others have none.

Counted from the rubrics (one property per live guidance id): a property with ``ablation: {transforms: ...}`` is
covered; one with ``ablation: {none: REASON}`` falls in a category read from the opening of its reason. The
rubrics word their reasons from a few fixed openings (``needed for correct results: ...``, ``a fusion: ...``), so
the category is data, not a judgement made here; a reason with another opening is ``other``.

Two groups of categories answer the issue's question "how many of those with a code-level mechanism": a property
that is needed for correctness, decided by Triton's lowering, a performance model or target, or the absence of a
construct has no mechanism whose removal could be timed (``mechanism=False``); the rest have one, but no faithful
one-construct transform. ``d2kgrade ablate --coverage`` prints the list; ``docs/ablation.md`` carries it, and a
test keeps the two equal. No libcst, no torch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from d2kgrade.suite import Suite

NONE_CATEGORIES: tuple[tuple[str, str, bool], ...] = (
    ("correctness", "needed for correct results", False),
    ("lowering", "Triton's lowering decides it", False),
    ("performance model", "a performance ", False),
    ("absence", "the property is the absence of", False),
    ("algorithm", "the property is the kernel's algorithm", True),
    ("mapping", "the mapping of work to programs", True),
    ("fusion", "a fusion:", True),
)
"""(category, opening of the rubric's reason, whether the property has a code-level mechanism) in report order;
a reason with no listed opening is ``other`` (a mechanism without a faithful transform, explained one by one)."""

OTHER = "other"


@dataclass(frozen=True)
class CoverageRow:
    """One property's ablation decision."""

    property: str
    """Guidance id."""
    transforms: tuple[str, ...]
    """Transform names in the order applied; empty when none."""
    category: str
    """``transform``, or the category of the reason there is none (:data:`NONE_CATEGORIES`, ``other``)."""
    mechanism: bool
    """The property has a code-level mechanism (every property with a transform has one)."""
    reason: str
    """The rubric's reason for having no transform; empty when it has one."""


def categorize(reason: str) -> tuple[str, bool]:
    """(category, mechanism) of a rubric's reason for having no transform."""
    for name, opening, mechanism in NONE_CATEGORIES:
        if reason.startswith(opening):
            return name, mechanism
    return OTHER, True


def coverage(suite: Suite) -> list[CoverageRow]:
    """Every live property of every rubric, in task and rubric order."""
    rows = []
    for task in suite.task_ids:
        for p in suite.load_rubric(task).properties:
            if p.deprecated or p.ablation is None:
                continue
            if p.ablation.transforms:
                rows.append(CoverageRow(p.id, tuple(t.transform for t in p.ablation.transforms), "transform", True,
                                        ""))
            else:
                category, mechanism = categorize(p.ablation.none or "")
                rows.append(CoverageRow(p.id, (), category, mechanism, p.ablation.none or ""))
    return rows


def missing_decisions(suite: Suite) -> list[str]:
    """Live guidance ids of the tasks whose rubric property has no ``ablation`` decision (or no property)."""
    out = []
    for task in suite.task_ids:
        decided = {p.id for p in suite.load_rubric(task).properties if p.ablation is not None}
        out += [g.id for g in suite.load_task(task).guidance if not g.deprecated and g.id not in decided]
    return out


def counts(rows: list[CoverageRow]) -> dict[str, int]:
    """Totals: properties, with a transform, with a code-level mechanism, and per category."""
    by = Counter(r.category for r in rows)
    order = ["transform", *(n for n, _, _ in NONE_CATEGORIES), OTHER]
    return {"properties": len(rows), "with_transform": by["transform"],
            "with_mechanism": sum(r.mechanism for r in rows), **{n: by[n] for n in order if n != "transform"}}


def render_markdown(rows: list[CoverageRow]) -> str:
    """The list as it stands in ``docs/ablation.md``: totals, then one table row per property."""
    c = counts(rows)
    cats = ", ".join(f"{c[n]} {n}" for n, _, _ in NONE_CATEGORIES) + f", {c[OTHER]} {OTHER}"
    head = (f"{c['with_transform']} of {c['properties']} properties have a transform; "
            f"{c['properties'] - c['with_transform']} have none ({cats}). "
            f"{c['with_transform']} of the {c['with_mechanism']} with a code-level mechanism have one.")
    lines = [head, "", "| property | ablation | reason (none) |", "|---|---|---|"]
    for r in rows:
        what = " + ".join(f"`{t}`" for t in r.transforms) if r.transforms else f"none: {r.category}"
        lines.append(f"| `{r.property}` | {what} | {r.reason.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


__all__ = ["NONE_CATEGORIES", "OTHER", "CoverageRow", "categorize", "counts", "coverage", "missing_decisions",
           "render_markdown"]
