"""The one place that says what crosses the line between the trusted grader and the runner.

``runner/`` (the evaluator, the kernel host, agent episodes) may import from ``d2kgrade`` only the modules in
:data:`FORMAT_MODULES` (and the package itself, for its version and location): the formats that both sides write
and read. Each of these imports, at module level, only other format modules, the standard library, pydantic and
yaml. ``d2kgrade/`` never imports ``runner``, ``torch`` or ``triton`` at module level; a CLI command that
evaluates imports the runner inside the command (:data:`RUNNER_IMPORTERS`), so ``pip install d2kgrade`` grades
kernels on a machine without torch. ``tests/foundation/test_boundary.py`` walks every module's imports and
fails on a crossing.
"""

from __future__ import annotations

FORMAT_MODULES: frozenset[str] = frozenset({
    "d2kgrade.schema", "d2kgrade.records", "d2kgrade.runstore", "d2kgrade.io", "d2kgrade.errors",
    "d2kgrade.dtypes", "d2kgrade.formulas", "d2kgrade.suite", "d2kgrade.validate", "d2kgrade.boundary",
})
"""What ``runner`` may import from ``d2kgrade``."""

FORMAT_DEPENDENCIES: frozenset[str] = frozenset({"pydantic", "yaml", "pandas"})
"""Third-party packages the format modules may import at module level (pandas: ``runstore.load_run`` only,
imported inside the function)."""

RUNNER_IMPORTERS: frozenset[str] = frozenset({"d2kgrade.cli", "d2kgrade.ablate"})
"""Packages of ``d2kgrade`` that may import ``runner`` inside a function (to evaluate), never at module level."""

NEVER_AT_MODULE_LEVEL: frozenset[str] = frozenset({"runner", "torch", "triton"})
"""Top-level packages no ``d2kgrade`` module imports at module level."""
