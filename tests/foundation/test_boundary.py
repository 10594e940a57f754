"""The runner/grader boundary (d2kgrade/boundary.py), enforced by walking every module's imports."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from d2kgrade.boundary import FORMAT_DEPENDENCIES, FORMAT_MODULES, NEVER_AT_MODULE_LEVEL, RUNNER_IMPORTERS

ROOT = Path(__file__).resolve().parents[2]


def modules(package: str) -> list[tuple[str, Path]]:
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if "_suite" in path.parts:
            continue
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out.append((name, path))
    return out


def imports(path: Path) -> list[tuple[str, bool]]:
    """(imported module, at module level) for every import statement of a file."""
    tree = ast.parse(path.read_text())
    found: list[tuple[str, bool]] = []
    top = set(map(id, tree.body))

    def visit(node: ast.AST, module_level: bool) -> None:
        for child in ast.iter_child_nodes(node):
            level = module_level and (id(child) in top or isinstance(node, (ast.If, ast.Try)))
            if isinstance(child, ast.Import):
                found.extend((a.name, level) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                found.append((child.module, level))
                found.extend((f"{child.module}.{a.name}", level) for a in child.names)
            visit(child, level if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                  else False)

    visit(tree, True)
    return found


def _d2k_module(name: str) -> str | None:
    """The d2kgrade module an import names (``d2kgrade.schema.Task`` -> ``d2kgrade.schema``), or None."""
    parts = name.split(".")
    if parts[0] != "d2kgrade":
        return None
    for n in range(len(parts), 0, -1):
        cand = ".".join(parts[:n])
        if (ROOT / Path(*parts[:n])).with_suffix(".py").is_file() or (ROOT / Path(*parts[:n]) / "__init__.py").is_file():
            return cand
    return "d2kgrade"


@pytest.mark.parametrize(("name", "path"), modules("runner"), ids=lambda v: str(v))
def test_runner_imports_only_format_modules(name: str, path: Path) -> None:
    bad = sorted({m for imp, _ in imports(path) if (m := _d2k_module(imp)) and m != "d2kgrade"
                  and m not in FORMAT_MODULES})
    assert not bad, f"{name} imports {bad}; runner may import only {sorted(FORMAT_MODULES)} (d2kgrade/boundary.py)"


@pytest.mark.parametrize(("name", "path"), modules("d2kgrade"), ids=lambda v: str(v))
def test_grader_never_imports_the_runner_or_torch_at_module_level(name: str, path: Path) -> None:
    for imp, module_level in imports(path):
        root = imp.split(".")[0]
        if root not in NEVER_AT_MODULE_LEVEL:
            continue
        assert not module_level, f"{name} imports {imp} at module level"
        if root == "runner":
            assert any(name == p or name.startswith(p + ".") for p in RUNNER_IMPORTERS), \
                f"{name} imports {imp}; only {sorted(RUNNER_IMPORTERS)} may (inside a command)"


def test_format_modules_form_a_closed_set() -> None:
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    for name in sorted(FORMAT_MODULES):
        path = ROOT / Path(*name.split(".")).with_suffix(".py")
        assert path.is_file(), f"{name} is listed as a format module but does not exist"
        for imp, module_level in imports(path):
            if not module_level:
                continue
            root = imp.split(".")[0]
            if root == "d2kgrade":
                m = _d2k_module(imp)
                assert m in FORMAT_MODULES or m == "d2kgrade", f"format module {name} imports {imp}"
            else:
                assert root in stdlib or root in FORMAT_DEPENDENCIES, f"format module {name} imports {imp}"


def test_the_walk_sees_a_crossing(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("import os\nfrom d2kgrade.static import grade_file\n\ndef g():\n    import runner.evaluate\n")
    got = imports(f)
    assert ("d2kgrade.static", True) in got and ("runner.evaluate", False) in got
    assert _d2k_module("d2kgrade.static.grade_file") == "d2kgrade.static"
