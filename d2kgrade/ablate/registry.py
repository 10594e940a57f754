"""The registry of ablation transforms that rubrics name (``ablation: {transforms: [{transform: NAME, args}]}``).

A transform is a libcst codemod (:class:`d2kgrade.ablate.transforms._base.Ablation`) that undoes one design
property of a kernel file and leaves every other byte as it was. Each lives in one module of
:mod:`d2kgrade.ablate.transforms` per family (memory hints, pipelining, tile schedule, numerics, regimes) and is
registered by name with :func:`transform`.

The names and their families are declared here, in :data:`TRANSFORM_FAMILIES`, so that validating a rubric
(:mod:`d2kgrade.schema`) knows every name without importing libcst; registering a name that is not declared, or
declaring one that no module registers, is an error (checked at :func:`load_all` and by a test).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

TRANSFORM_FAMILIES: dict[str, tuple[str, ...]] = {
    "hints": ("strip_eviction_hints", "strip_cache_modifiers", "strip_alignment_hints"),
    "pipeline": ("set_num_stages", "one_autotune_config", "drop_call_kwarg", "set_call_kwarg"),
    "schedule": ("row_major_tiles", "one_program_per_tile"),
    "numerics": ("exp2_to_exp", "reciprocal_to_division", "exact_division", "strip_upcasts"),
    "regime": ("remove_path", "replace_expr", "set_constant", "fix_constexpr"),
}
"""Family module (under :mod:`d2kgrade.ablate.transforms`) -> the transforms it registers."""

TRANSFORM_NAMES: frozenset[str] = frozenset(n for names in TRANSFORM_FAMILIES.values() for n in names)
"""Every transform name a rubric may use."""

TransformClass = Any  # an Ablation subclass; typed loosely so that this module never imports libcst
TRANSFORMS: dict[str, TransformClass] = {}
_loaded = False


def transform(name: str) -> Callable[[TransformClass], TransformClass]:
    """Register an :class:`~d2kgrade.ablate.transforms._base.Ablation` subclass as the transform ``name``."""

    def register(cls: TransformClass) -> TransformClass:
        if name not in TRANSFORM_NAMES:
            raise RuntimeError(f"transform {name!r} is not declared in d2kgrade.ablate.registry.TRANSFORM_FAMILIES")
        if name in TRANSFORMS and TRANSFORMS[name] is not cls:
            raise RuntimeError(f"transform {name!r} is registered twice")
        cls.NAME = name
        TRANSFORMS[name] = cls
        return cls

    return register


def load_all() -> dict[str, TransformClass]:
    """Import every family module (registering its transforms) and return the registry.

    Raises:
        RuntimeError: a declared transform that no module registers.
    """
    global _loaded
    if not _loaded:
        for family in TRANSFORM_FAMILIES:
            importlib.import_module(f"d2kgrade.ablate.transforms.{family}")
        missing = sorted(TRANSFORM_NAMES - set(TRANSFORMS))
        if missing:
            raise RuntimeError(f"declared transforms that no module registers: {missing}")
        _loaded = True
    return TRANSFORMS


def transform_params(name: str) -> dict[str, inspect.Parameter]:
    """The keyword arguments a transform takes (those of its ``__init__`` after the codemod context)."""
    cls = load_all()[name]
    return {p.name: p for p in inspect.signature(cls.__init__).parameters.values() if p.kind == p.KEYWORD_ONLY}


def transform_args_problem(name: str, args: dict[str, Any]) -> str | None:
    """Why ``args`` do not fit transform ``name`` (unknown transform, unknown or missing arguments), or None."""
    if name not in TRANSFORM_NAMES:
        return f"unknown ablation transform {name!r}; known: {', '.join(sorted(TRANSFORM_NAMES))}"
    if not isinstance(args, dict):
        return f"transform {name!r}: args must be a mapping, got {type(args).__name__}"
    params = transform_params(name)
    unknown = sorted(set(args) - set(params))
    if unknown:
        return f"transform {name!r} has no argument(s) {unknown}; it takes {sorted(params) or 'none'}"
    required = sorted(p for p, spec in params.items() if spec.default is inspect.Parameter.empty and p not in args)
    if required:
        return f"transform {name!r} needs argument(s) {required}"
    return None


def describe() -> list[dict[str, Any]]:
    """Every transform with its family, arguments and first docstring line (for docs and ``--list``)."""
    out = []
    for family, names in TRANSFORM_FAMILIES.items():
        for name in names:
            cls = load_all()[name]
            params = transform_params(name)
            out.append({"transform": name, "family": family,
                        "args": {p: None if s.default is inspect.Parameter.empty else s.default
                                 for p, s in params.items()},
                        "doc": (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")})
    return out
