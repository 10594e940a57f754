"""``grade_file``: run a rubric's static checks over a file's facts and produce a :class:`FileGrade`.

Per property: no checks -> ``unknown`` ("no static checks"); checks whose ``language`` the file does not contain
are skipped, and if none is left -> ``unknown``; otherwise each check passes, fails or cannot tell, ``negate``
flips it, and ``combine: all`` (every check passes) or ``any`` (one does) decides ``present``/``absent``. A check
that cannot tell makes the property ``unknown`` unless the others already decide it. A file with no reachable
Triton or CUDA code (pure PyTorch) has every property ``absent``; a file that cannot be analysed has every
property ``unknown`` and the reason in ``FileGrade.error``.

Given the task, each property is judged on the host paths that serve the workloads it concerns (its
``workloads``, else the whole catalog): a launch that no such workload reaches, and kernel code under a constexpr
mode none of them selects, is left out (:mod:`d2kgrade.static.workloads`), and the grade's reason and
``details["workloads"]`` say which workloads each launch serves and what was not counted.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from d2kgrade.errors import Problem, SpecError, UserError
from d2kgrade.grades import Evidence, FileGrade, PropertyGrade, file_grade
from d2kgrade.schema import CheckRef, Property, Rubric, Task
from d2kgrade.static.extract import extract_facts, gc_paused
from d2kgrade.static.facts import Facts
from d2kgrade.static.registry import CheckResult, check_args_problem, load_all
from d2kgrade.static.workloads import WorkloadPaths, workload_paths

log = logging.getLogger(__name__)

MAX_EVIDENCE = 4


def check_rubric_static(rubric: Rubric, where: str = "") -> None:
    """Raise :class:`SpecError` when a rubric names an unknown check or passes arguments it does not take."""
    problems = []
    for i, p in enumerate(rubric.properties):
        for j, ref in enumerate(p.static.checks):
            msg = check_args_problem(ref.check, ref.args)
            if msg:
                problems.append(Problem(where or f"rubric {rubric.task}", f"properties.{i}.static.checks.{j}", msg))
    if problems:
        raise SpecError(problems)


def _constructor(cls: Any, **sample: Any) -> Callable[..., Any]:
    """``cls.model_construct`` without its per-field alias lookups (a third of its 4-8 us), for a model with no
    aliases, no extra fields, no post-init and no private attributes: the same ``__dict__`` (fields in declared
    order, defaults for the ones not given), fields set, extra and private. Checked once against
    ``model_construct`` on ``sample``; any difference (another pydantic) falls back to ``model_construct``."""
    fields = cls.__pydantic_fields__
    if (any(f.alias is not None or f.validation_alias is not None for f in fields.values())
            or cls.model_config.get("extra") == "allow" or cls.__pydantic_post_init__
            or cls.__pydantic_root_model__ or cls.__private_attributes__):
        return cls.model_construct
    names = tuple(fields)
    optional = {n: f for n, f in fields.items() if not f.is_required()}
    setattr_ = object.__setattr__

    def build(**values: Any) -> Any:
        m = cls.__new__(cls)
        if tuple(values) == names:  # every field, in declared order: the keywords are the __dict__
            setattr_(m, "__dict__", values)
            setattr_(m, "__pydantic_fields_set__", set(names))
        else:
            d: dict[str, Any] = {}
            for n in names:
                if n in values:
                    d[n] = values[n]
                elif n in optional:
                    d[n] = optional[n].get_default(call_default_factory=True, validated_data=d)
            setattr_(m, "__dict__", d)
            setattr_(m, "__pydantic_fields_set__", {n for n in names if n in values})
        setattr_(m, "__pydantic_extra__", None)
        setattr_(m, "__pydantic_private__", None)
        return m

    a, b = build(**sample), cls.model_construct(**sample)
    same = all(type(getattr(a, k, None)) is type(getattr(b, k, None)) and getattr(a, k, None) == getattr(b, k, None)
               and list(getattr(a, k, None) or ()) == list(getattr(b, k, None) or ())
               for k in ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"))
    return build if same and a == b else cls.model_construct


_new_evidence = _constructor(Evidence, file="f", start_line=1, end_line=1, code="", note="")
_new_grade = _constructor(PropertyGrade, property_id="p", level="L1", rater="static", verdict="unknown",
                          confidence=0.0, reason="r")


def _evidence(facts: Facts, res: CheckResult) -> list[Evidence]:
    # constructed, not validated: the fields are built here from ints and strs of the right types, so pydantic's
    # validation (a third of grade_property's own time) would only copy them
    out = []
    for s in res.evidence[:MAX_EVIDENCE]:
        path, line = facts.locate(s.line) if facts.segments else (facts.path, s.line)
        out.append(_new_evidence(file=path, start_line=line, end_line=line + max(s.end_line - s.line, 0),
                                 code=facts.snippet(s.line, s.end_line), note=s.note))
    return out


def _grade(**fields: object) -> PropertyGrade:
    """A PropertyGrade built without validation: every caller below passes fields of the declared types
    (verdict and level literals, float confidence, Evidence records, a str reason, a details dict)."""
    return _new_grade(**fields)


def run_check(facts: Facts, ref: CheckRef) -> CheckResult:
    """Run one check; a fault inside a check becomes a result that cannot tell (logged), never an exception."""
    fn = load_all()[ref.check]
    try:
        res = fn(facts, ref.language, **ref.args)
    except RecursionError:
        return CheckResult(None, f"{ref.check}: code nested too deeply to analyse", confidence=0.0)
    except Exception as exc:
        log.exception("static check %s failed on %s", ref.check, facts.path)
        return CheckResult(None, f"{ref.check} raised {type(exc).__name__}: {exc}", confidence=0.0)
    if ref.negate and res.passed is not None:
        res = CheckResult(not res.passed, ("not: " + res.reason), res.evidence, res.confidence)
    return res


def grade_property(prop: Property, facts: Facts, paths: WorkloadPaths | None = None) -> PropertyGrade:
    """One property's static verdict on one file; with ``paths`` (the task's workloads), judged on the host paths
    that serve the workloads the property concerns (:mod:`d2kgrade.static.workloads`)."""
    if paths is None or not paths.envs:
        return _grade_property(prop, facts)
    names = paths.select(prop.workloads)
    return _with_paths(_grade_property(prop, paths.view(names)), paths, names)


def _with_paths(g: PropertyGrade, paths: WorkloadPaths, names: tuple[str, ...]) -> PropertyGrade:
    """``g`` saying which workloads were judged, which workloads each launch serves, and what was not counted."""
    dropped = paths.dropped(names)
    rows = [{"kernel": p.launch.kernel, "line": paths.facts.locate(p.launch.line)[1],
             "serves": [n for n, t in p.serves.items() if t is True],
             "undecided": [n for n, t in p.serves.items() if t is None],
             "counted": p.live(names)} for p in paths.paths]
    g.details = {**g.details, "workloads": {"judged": list(names), "paths": rows, "not_counted": dropped}}
    if dropped:
        scope = "" if names == paths.names else "judged on the paths serving " + ", ".join(names) + "; "
        g.reason = (g.reason + "; " if g.reason else "") + scope + "not counted: " + "; ".join(dropped)
    return g


def _grade_property(prop: Property, facts: Facts) -> PropertyGrade:
    base = {"property_id": prop.id, "level": prop.level, "rater": "static"}
    spec = prop.static
    if not facts.ok:
        return _grade(**base, verdict="unknown", confidence=0.0, reason="file not analysed: "
                             + "; ".join(facts.errors))
    if not spec.checks:
        return _grade(**base, verdict="unknown", confidence=0.0, reason="no static checks")
    langs = facts.languages
    if not langs:
        if facts.foreign_dsl:
            return _grade(**base, verdict="unknown", confidence=0.0,
                                 reason=f"kernel written with {facts.foreign_dsl}, which static analysis does not read")
        return _grade(**base, verdict="absent", confidence=0.9,
                             reason="no Triton or CUDA kernel code is reachable from kernel(...)")
    applicable = [c for c in spec.checks if c.language == "any" or c.language in langs]
    skipped = [c.check for c in spec.checks if not (c.language == "any" or c.language in langs)]  # (no __eq__)
    if not applicable:
        return _grade(**base, verdict="unknown", confidence=0.0,
                             reason=f"no static checks for {'/'.join(sorted(langs))} code",
                             details={"skipped": skipped})
    results = [(c, run_check(facts, c)) for c in applicable]
    details = {"combine": spec.combine, "skipped": skipped, "checks": [
        {"check": c.check, "args": c.args, "language": c.language, "negate": c.negate, "passed": r.passed,
         "confidence": r.confidence, "reason": r.reason,
         "lines": [[s.line, s.end_line] for s in r.evidence]} for c, r in results]}
    passed = [r for _, r in results if r.passed is True]
    failed = [r for _, r in results if r.passed is False]
    undecided = [r for _, r in results if r.passed is None]
    if spec.combine == "all":
        if failed:
            verdict, deciding = "absent", failed
        elif undecided:
            verdict, deciding = "unknown", undecided
        else:
            verdict, deciding = "present", passed
    else:
        if passed:
            verdict, deciding = "present", passed
        elif undecided:
            verdict, deciding = "unknown", undecided
        else:
            verdict, deciding = "absent", failed
    if verdict == "unknown":
        confidence = 0.0
    elif verdict == "present":
        confidence = min(r.confidence for r in deciding) if spec.combine == "all" else max(
            r.confidence for r in deciding)
    else:
        confidence = max(r.confidence for r in deciding) if spec.combine == "all" else min(
            r.confidence for r in deciding)
    evidence: list[Evidence] = []
    for r in deciding:
        if len(evidence) >= MAX_EVIDENCE * 2:  # the rest would be cut below
            break
        evidence.extend(_evidence(facts, r))
    reason = "; ".join(r.reason for r in deciding)
    return _grade(**base, verdict=verdict, confidence=round(confidence, 3), evidence=evidence[:MAX_EVIDENCE * 2],
                         reason=reason, details=details)


def grade_facts(rubric: Rubric, facts: Facts, *, task: Task | None = None, gating: bool = False,
                item: str = "") -> FileGrade:
    """Grade already-extracted facts against ``rubric``; with ``task``, each property on the host paths that
    serve its workloads.

    Raises:
        SpecError: the rubric's checks are malformed, or a property names a workload ``task`` does not have.
    """
    check_rubric_static(rubric)
    paths = None
    if task is not None:
        from d2kgrade.validate import workload_problems

        problems = [pr for i, p in enumerate(rubric.properties) for pr in workload_problems(
            task, p, i, f"rubric {rubric.task}")]
        if problems:
            raise SpecError(problems)
        if facts.ok:
            paths = workload_paths(facts, task)
    with gc_paused():  # checks allocate many short-lived containers too (see gc_paused)
        grades = [grade_property(p, facts, paths) for p in rubric.properties if not p.deprecated]
    return file_grade(rubric, facts.path, "static", grades, task=task, gating=gating,
                      error="; ".join(facts.errors), item=item)


def grade_file(rubric: Rubric, path: str | Path, task: Task | None = None, gating: bool = False, *,
               item: str = "") -> FileGrade:
    """The static rater's grade of one kernel file under ``rubric``.

    Args:
        rubric: the task's rubric (its ``static`` blocks decide).
        path: a ``.py`` submission (Triton and/or ``load_inline`` CUDA) or a ``.cu``/``.cuh`` file.
        task: the task: its workloads decide which host paths each property is judged on, and ``gating`` needs
            its dependencies. Without it every live path counts.
        gating: count a property in the score only when what it depends on is present.
        item: id of the graded item (an episode id), copied into the grade.

    Raises:
        UserError: the path does not exist or is a directory; SpecError: the rubric's checks are malformed or
            name a workload the task does not have.
    """
    p = Path(path)
    if not p.exists():
        raise UserError(f"{p}: no such file")
    if p.is_dir():
        raise UserError(f"{p}: is a directory; pass a kernel file")
    return grade_facts(rubric, extract_facts(p), task=task, gating=gating, item=item)


KERNEL_SUFFIXES = (".py", ".cu", ".cuh")


def collect_files(paths: list[Path]) -> list[Path]:
    """Files to grade: each file as given, and every ``*.py``/``*.cu``/``*.cuh`` under each directory (sorted).

    Raises:
        UserError: a path does not exist, or nothing is left to grade.
    """
    out: list[Path] = []
    for p in paths:
        if not p.exists():
            raise UserError(f"{p}: no such file or directory")
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in KERNEL_SUFFIXES)
            out.extend(f for f in found if not _helper_module(f, found))
        else:
            out.append(p)
    if not out:
        raise UserError("no kernel files (*.py, *.cu, *.cuh) to grade in " + ", ".join(str(p) for p in paths))
    return out


def _helper_module(f: Path, files: list[Path]) -> bool:
    """Is ``f`` a module that another file of its folder imports and that binds no ``kernel`` itself (a helper
    of a multi-file submission, graded through the file that imports it)?"""
    if f.suffix != ".py":
        return False
    from d2kgrade.static.entry import live_binding
    from d2kgrade.static.extract import MAX_BYTES, read_source
    from d2kgrade.static.siblings import imported_modules

    def tree(path: Path):
        data, _ = read_source(path, MAX_BYTES)
        try:
            return ast.parse(data or b"")
        except (SyntaxError, ValueError):
            return None

    own = tree(f)
    if own is None or live_binding(own) is not None:
        return False
    for other in files:
        if other is not f and other.parent == f.parent and other.suffix == ".py":
            t = tree(other)
            if t is not None and f.stem in imported_modules(t):
                return True
    return False


def grade_files(rubric: Rubric, paths: list[Path], *, task: Task | None = None, gating: bool = False) -> list[FileGrade]:
    """:func:`grade_file` over several files (directories expanded by :func:`collect_files`)."""
    check_rubric_static(rubric)
    return [grade_file(rubric, p, task=task, gating=gating) for p in collect_files(paths)]
