"""The registry of named static checks that rubrics reference (``checks: [{check: NAME, args: {...}}]``).

Each check is one small function registered by name, the way inspect_ai registers scorers::

    @check("tl_dot_in_k_loop")
    def tl_dot_in_k_loop(facts: Facts, lang: str, *, acc_dtype: str = "fp32") -> CheckResult: ...

``lang`` is the rubric entry's ``language`` (``triton``, ``cuda`` or ``any``): the code the check should read.
A check returns a :class:`CheckResult`: passed (True/False, or None when it cannot tell), a confidence, the spans
that show it, and a reason in words. Check modules live in :mod:`d2kgrade.static.checks`; importing that package
registers them all. Arguments are keyword-only and validated against the signature before a check runs
(:func:`check_args_problem`).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
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

        for mod in pkgutil.iter_modules(checks.__path__):
            importlib.import_module(f"{checks.__name__}.{mod.name}")
        _loaded = True
    return CHECKS


def known_checks() -> set[str]:
    """Names of all registered checks."""
    return set(load_all())


def check_params(name: str) -> dict[str, inspect.Parameter]:
    """The keyword arguments a check accepts."""
    fn = load_all()[name]
    cached = _PARAMS.get(name)
    if cached is None or cached[0] is not fn:
        cached = _PARAMS[name] = (fn, {p.name: p for p in inspect.signature(fn).parameters.values()
                                      if p.kind == p.KEYWORD_ONLY})
    return cached[1]


_PARAMS: dict[str, tuple[CheckFn, dict[str, inspect.Parameter]]] = {}


def check_args_problem(name: str, args: dict[str, Any]) -> str | None:
    """Why ``args`` do not fit check ``name`` (unknown or missing arguments), or None when they do."""
    if name not in load_all():
        return f"unknown static check {name!r}; known: {', '.join(sorted(CHECKS))}"
    params = check_params(name)
    unknown = sorted(set(args) - set(params))
    if unknown:
        return f"check {name!r} has no argument(s) {unknown}; it takes {sorted(params) or 'none'}"
    required = sorted(p for p, spec in params.items() if spec.default is inspect.Parameter.empty and p not in args)
    if required:
        return f"check {name!r} needs argument(s) {required}"
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
