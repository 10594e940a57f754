"""Apply a rubric property's ablation (its :class:`~d2kgrade.schema.AblationSpec`) to a kernel's source."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from d2kgrade.ablate.registry import load_all, transform_args_problem
from d2kgrade.ablate.transforms._base import Change, NotApplicable, run_transform
from d2kgrade.errors import UserError
from d2kgrade.schema import AblationSpec, Property


@dataclass(frozen=True)
class Variant:
    """One property removed from one source."""

    property: str
    """Guidance id."""
    source: str
    """The ablated source."""
    transforms: tuple[str, ...]
    """Names of the transforms that applied, in order."""
    changes: tuple[Change, ...]
    """Every rewrite; each span is in the source its transform received (the previous step's output)."""
    skipped: tuple[str, ...] = ()
    """Why the transforms that did not apply did not (``require: any``)."""

    @property
    def transform(self) -> str:
        """The applied transforms joined with ``+`` (the record's ``transform`` field)."""
        return "+".join(self.transforms)

    def summary(self, limit: int = 4) -> str:
        """What changed, in words (the first ``limit`` changes)."""
        whats = [c.what for c in self.changes]
        more = f" (+{len(whats) - limit} more)" if len(whats) > limit else ""
        return "; ".join(whats[:limit]) + more


def check_spec(spec: AblationSpec, where: str = "") -> None:
    """Raise :class:`UserError` when a transform's arguments do not fit it."""
    for i, t in enumerate(spec.transforms):
        problem = transform_args_problem(t.transform, t.args)
        if problem:
            raise UserError(f"{where}ablation.transforms.{i}: {problem}")


def ablate_source(source: str, prop: Property) -> Variant:
    """The property's ablated variant of ``source``.

    Raises:
        NotApplicable: the property has no transform (``none``), or its transforms found nothing to change
            (``require: all``: one of them; ``any``: all of them).
        UserError: the rubric's transform arguments are wrong, or the source does not parse.
    """
    spec = prop.ablation
    if spec is None:
        raise NotApplicable("the rubric gives this property no ablation")
    if spec.none is not None:
        raise NotApplicable(f"no transform: {spec.none}")
    check_spec(spec, f"{prop.id}: ")
    registry = load_all()
    text = source
    applied: list[str] = []
    changes: list[Change] = []
    skipped: list[str] = []
    for t in spec.transforms:
        try:
            out = run_transform(registry[t.transform], text, dict(t.args))
        except NotApplicable as exc:
            if spec.require == "all":
                raise
            skipped.append(str(exc))
            continue
        text = out.source
        applied.append(t.transform)
        changes.extend(out.changes)
    if not applied:
        raise NotApplicable("; ".join(skipped))
    return Variant(prop.id, text, tuple(applied), tuple(changes), tuple(skipped))


def changed_lines(before: str, after: str) -> set[int]:
    """Lines (1-based) of ``before`` that the diff to ``after`` removes or replaces; an insertion counts as the
    line it follows."""
    out: set[int] = set()
    sm = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, i1, i2, _j1, _j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        out.update(range(i1 + 1, i2 + 1) if i2 > i1 else [max(i1, 1)])
    return out
