"""Multi-file submissions: the sibling modules a kernel file imports (``from softmax_kernels import fwd``).

An agent's workspace often splits a submission: ``kernel.py`` holds the entry point and imports the kernels from a
module next to it. When the graded file is on disk, every module it imports by a plain name (``import m``,
``from m import f``, ``from .m import f``) that is a ``m.py`` in the same folder is read (a regular file under the
size cap, like the graded file), parsed, and its functions are added under the key ``m.<name>``, so the entry's
calls resolve to them and their own bare-name calls resolve inside ``m``. Their lines are appended after the graded
file's in one virtual line space (:attr:`Facts.segments` maps them back to the file and its own line numbers, for
evidence). Siblings import siblings up to :data:`MAX_FILES` files.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING

from d2kgrade.static.ir import Function

if TYPE_CHECKING:
    from d2kgrade.static.pyfacts import PyExtractor

MAX_FILES = 8


def imported_modules(tree: ast.Module) -> list[str]:
    """Plain module names the module imports at any depth of its statements (``import m``, ``from m import f``,
    ``from .m import f``), in order, without repeats."""
    out: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if "." not in a.name]
        elif isinstance(node, ast.ImportFrom) and node.module and "." not in node.module and node.level <= 1:
            names = [node.module]
        for n in names:
            if n not in out:
                out.append(n)
    return out


def add_siblings(ex: PyExtractor, tree: ast.Module) -> None:
    """Read and extract the sibling modules ``tree`` imports (module docstring)."""
    from d2kgrade.static.extract import MAX_BYTES, read_source

    facts = ex.facts
    if facts.path.startswith("<"):
        return
    folder = Path(facts.path).parent
    todo = [(m, tree) for m in imported_modules(tree)]
    done: set[str] = {Path(facts.path).stem}
    while todo and len(facts.segments) < MAX_FILES:
        name, _ = todo.pop(0)
        if name in done:
            continue
        done.add(name)
        path = folder / f"{name}.py"
        if not path.is_file():
            continue
        data, _why = read_source(path, MAX_BYTES)
        if data is None:
            continue
        try:
            text = data.decode("utf-8")
            sub = ast.parse(text, filename=str(path))
        except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
            facts.notes.append(f"imported module {path.name} could not be read")
            continue
        offset = len(facts.lines) + 1  # its line k is virtual line offset + k, after one blank separator line
        facts.extend_lines(str(path), text.splitlines(), offset + 1)
        _extract(ex, name, sub, offset)
        todo.extend((m, sub) for m in imported_modules(sub) if m not in done)


def _extract(ex: PyExtractor, module: str, tree: ast.Module, offset: int) -> None:
    """The functions, classes, constants and module code of sibling ``module``, keyed ``module.<name>``."""
    from d2kgrade.static.lower import Lowerer
    from d2kgrade.static.pyfacts import _is_main_guard

    facts = ex.facts
    _shift(tree, offset)
    saved_imports = dict(facts.imports)
    ex._imports(tree)  # its own aliases (tl, triton) join the file's; the graded file's win on a clash
    for k, v in saved_imports.items():
        facts.imports[k] = v
    consts_before = dict(facts.consts)
    ex._consts(tree)
    for k, v in list(facts.consts.items()):
        if k not in consts_before:
            facts.consts[f"{module}.{k}"] = v
    facts.consts.update(consts_before)
    key = f"{module}.<module>"
    body_fn = Function(key, key, "py", "host", [], offset, offset + 1)
    facts.functions[key] = body_fn
    body = [st for st in tree.body if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                          ast.Import, ast.ImportFrom)) and not _is_main_guard(st)]
    Lowerer(body_fn, facts.imports, facts.consts, ex.loop_ids).body(body)  # first: autotune lists live here
    ex.sibling_modules.append(key)
    for st in tree.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            ex._function(st, module + ".")
        elif isinstance(st, ast.ClassDef):
            st.name = f"{module}.{st.name}"
            ex._class(st)


def _shift(tree: ast.Module, offset: int) -> None:
    for node in ast.walk(tree):
        if hasattr(node, "lineno"):
            node.lineno += offset  # type: ignore[attr-defined]
            if getattr(node, "end_lineno", None) is not None:
                node.end_lineno += offset  # type: ignore[attr-defined]
