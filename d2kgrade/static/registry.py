"""The registry of named static checks that rubrics reference (``checks: [{check: NAME, args: {...}}]``).

Each check is one small function registered by name, the way inspect_ai registers scorers::

    @check("tl_dot_in_k_loop")
    def tl_dot_in_k_loop(facts: Facts, lang: str, *, acc_dtype: str = "fp32") -> CheckResult: ...

``lang`` is the rubric entry's ``language`` (``triton``, ``cuda`` or ``any``): the code the check should read.
A check returns a :class:`CheckResult`: passed (True/False, or None when it cannot tell), a confidence, the spans
that show it, and a reason in words. Check modules live in :mod:`d2kgrade.static.checks` (concept modules, by
what they detect) and :mod:`d2kgrade.static.checks.tasks` (one module per task id); :func:`load_all` imports them.
Arguments are keyword-only and validated against the signature before a check runs (:func:`check_args_problem`).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CheckFn = Callable[..., Any]
CHECKS: dict[str, CheckFn] = {}
_loaded = False


@dataclass(slots=True)
class Span:
    """A line span of the graded file that a check points at."""

    line: int
    """First line (1-based)."""
    end_line: int
    """Last line (inclusive)."""
    note: str = ""
    """What the span shows."""


@dataclass(slots=True)
class CheckResult:
    """What one check found."""

    passed: bool | None
    """True: the pattern is there; False: it is not; None: the check cannot tell."""
    reason: str
    """Why, in words (names the construct found or missing)."""
    evidence: list[Span] = field(default_factory=list)
    """Spans that show the construct (for a failed check: spans that contradict it, if any)."""
    confidence: float = 0.9
    """0-1: how reliably this pattern decides the question."""


def found(reason: str, spans: list[Span] | Span, confidence: float = 0.9) -> CheckResult:
    """A passing result."""
    return CheckResult(True, reason, spans if isinstance(spans, list) else [spans], confidence)


def missing(reason: str, spans: list[Span] | None = None, confidence: float = 0.85) -> CheckResult:
    """A failing result."""
    return CheckResult(False, reason, spans or [], confidence)


def check(name: str) -> Callable[[CheckFn], CheckFn]:
    """Register ``fn`` as the static check ``name``."""

    def register(fn: CheckFn) -> CheckFn:
        if name in CHECKS and CHECKS[name] is not fn:
            raise RuntimeError(f"static check {name!r} is registered twice")
        CHECKS[name] = fn
        return fn

    return register


def load_all() -> dict[str, CheckFn]:
    """Import every module of :mod:`d2kgrade.static.checks` (registering its checks) and return the registry."""
    global _loaded
    if not _loaded:
        from d2kgrade.static import checks

        for mod in pkgutil.walk_packages(checks.__path__, prefix=f"{checks.__name__}."):
            importlib.import_module(mod.name)  # concept modules, then checks.tasks.<task id>
        _loaded = True
    return CHECKS


def known_checks() -> set[str]:
    """Names of all registered checks."""
    return set(load_all())


def check_params(name: str) -> dict[str, inspect.Parameter]:
    """The keyword arguments a check accepts."""
    return _signature(name)[0]


def check_hints(name: str) -> dict[str, Any]:
    """The annotated type of each keyword argument of a check (``str | list[str]``, ``int | None``...)."""
    return _signature(name)[1]


def _signature(name: str) -> tuple[dict[str, inspect.Parameter], dict[str, Any]]:
    fn = load_all()[name]
    cached = _PARAMS.get(name)
    if cached is None or cached[0] is not fn:
        params = {p.name: p for p in inspect.signature(fn).parameters.values() if p.kind == p.KEYWORD_ONLY}
        try:
            hints = typing.get_type_hints(fn)
        except Exception:  # an annotation that does not resolve: no type checks for this check
            hints = {}
        cached = _PARAMS[name] = (fn, params, {p: hints[p] for p in params if p in hints})
    return cached[1], cached[2]


_PARAMS: dict[str, tuple[CheckFn, dict[str, inspect.Parameter], dict[str, Any]]] = {}


def _fits(value: Any, hint: Any) -> bool:
    """Does a YAML value fit a check argument's annotation (str, int, float, bool, None, list[...], dict[...],
    unions)? An ``int`` fits ``float``; a ``bool`` fits only ``bool``."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin is list or hint is list:
        if not isinstance(value, list):
            return False
        (item,) = typing.get_args(hint) or (Any,)
        return all(_fits(v, item) for v in value)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            return False
        key, val = typing.get_args(hint) or (Any, Any)
        return all(_fits(k, key) and _fits(v, val) for k, v in value.items())
    return isinstance(value, hint) if isinstance(hint, type) else True


def _type_name(hint: Any) -> str:
    name = str(hint) if typing.get_origin(hint) or isinstance(hint, types.UnionType) else hint.__name__
    return name.replace("typing.", "").replace("NoneType", "None")


def check_args_problem(name: str, args: dict[str, Any]) -> str | None:
    """Why ``args`` do not fit check ``name`` (unknown check, unknown or missing arguments, a value of the wrong
    type), or None when they do. Results are cached: grading asks once per file."""
    # sorted by key (the names are distinct, so comparing the (name, value) pairs never reaches the values)
    key = (name, repr(sorted(args.items())) if isinstance(args, dict) else repr(args))
    problem = _PROBLEMS.get(key, _MISSING)
    if problem is _MISSING:
        problem = _PROBLEMS[key] = _args_problem(name, args)
    return problem  # type: ignore[return-value]


_PROBLEMS: dict[tuple[str, str], str | None] = {}
_MISSING = object()


def _args_problem(name: str, args: dict[str, Any]) -> str | None:
    if name not in load_all():
        return f"unknown static check {name!r}; known: {', '.join(sorted(CHECKS))}"
    if not isinstance(args, dict):
        return f"check {name!r}: args must be a mapping of argument names to values, got {type(args).__name__}"
    params, hints = _signature(name)
    unknown = sorted(set(args) - set(params))
    if unknown:
        return f"check {name!r} has no argument(s) {unknown}; it takes {sorted(params) or 'none'}"
    required = sorted(p for p, spec in params.items() if spec.default is inspect.Parameter.empty and p not in args)
    if required:
        return f"check {name!r} needs argument(s) {required}"
    for arg, value in args.items():
        hint = hints.get(arg)
        if hint is not None and not _fits(value, hint):
            return (f"check {name!r}: argument {arg!r} is {value!r} ({type(value).__name__}), "
                    f"expected {_type_name(hint)}")
    return None


def describe() -> list[dict[str, Any]]:
    """Every check with its arguments, defaults and first docstring line (for ``docs`` and ``--list-checks``)."""
    out = []
    for name in sorted(load_all()):
        fn = CHECKS[name]
        params = check_params(name)
        out.append({"check": name, "module": fn.__module__.rsplit(".", 1)[-1],
                    "args": {p: {"required": spec.default is inspect.Parameter.empty,
                                 "default": None if spec.default is inspect.Parameter.empty else spec.default}
                             for p, spec in params.items()},
                    "doc": (inspect.getdoc(fn) or "").strip()})
    return out


def reference_markdown() -> str:
    """The checks' reference for ``docs/static-checks.md``: concept modules first (their docstring's first
    sentence as the heading text), then one section per task module; one bullet per check (name, arguments with
    defaults, docstring). ``tests/static/test_checks.py`` keeps the document equal to it."""
    import sys

    by_mod: dict[str, list[dict[str, Any]]] = {}
    for entry in describe():
        by_mod.setdefault(CHECKS[entry["check"]].__module__, []).append(entry)

    def title(mod: str) -> str:
        doc = (sys.modules[mod].__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        return doc.split(":")[0].rstrip(".") if doc else mod.rsplit(".", 1)[-1]

    def bullet(e: dict[str, Any]) -> str:
        args = ", ".join(f"`{a}` (required)" if spec["required"] else f"`{a}={spec['default']!r}`"
                         for a, spec in e["args"].items())
        doc = " ".join(e["doc"].split()).replace("``", "`")
        return f"- **`{e['check']}`**" + (f" ({args})" if args else "") + f". {doc}"

    concept = sorted(m for m in by_mod if ".tasks." not in m)
    tasks = sorted(m for m in by_mod if ".tasks." in m)
    out = ["## The checks", "",
           "Concept modules (`d2kgrade/static/checks/<concept>.py`) hold the checks that several rubrics use; a check",
           "that one task's rubric alone uses lives in `d2kgrade/static/checks/tasks/<task id>.py`. Both are built on the",
           "pattern layer `d2kgrade/static/patterns/` (named, tested queries: pointer roles, addresses, reductions and",
           "online normalisers, atomics, sorts, host values, launch configurations). This section is generated from the",
           "checks' docstrings (`d2kgrade.static.registry.reference_markdown`).", ""]
    for mod in concept:
        out += [f"### {title(mod)} (`{mod.replace('.', '/')}.py`)", ""]
        out += [bullet(e) for e in sorted(by_mod[mod], key=lambda e: e["check"])] + [""]
    out += ["## Task-specific checks", ""]
    for mod in tasks:
        out += [f"### `{mod.rsplit('.', 1)[-1]}` (`{mod.replace('.', '/')}.py`)", ""]
        out += [bullet(e) for e in sorted(by_mod[mod], key=lambda e: e["check"])] + [""]
    return "\n".join(out).rstrip() + "\n"
