"""The registry of named static checks that rubrics reference (``checks: [{check: NAME, args: {...}}]``).

Each check is one small function registered by name, the way inspect_ai registers scorers::

    @check("tl_dot_in_k_loop")
    def tl_dot_in_k_loop(facts, **args) -> CheckResult: ...

Check modules live in :mod:`d2kgrade.static.checks`; importing that package registers them all.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

CheckFn = Callable[..., Any]
CHECKS: dict[str, CheckFn] = {}
_loaded = False


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
