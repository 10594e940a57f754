"""Suite validation: every problem in tasks, rubrics and references, one line each (file, field path, expectation).

Checks, per task: the task file against its schema; derived values, shapes and cost formulas evaluated on every
workload (smoke included); tensor dtypes that resolve; a tolerance for every floating output dtype;
``reference.py`` present, parseable, defining ``reference``, ``baseline`` and ``make_inputs``; the rubric
against its schema with exactly one property per active guidance id, matching levels and known static check
names; each reference kernel parseable and defining ``kernel``. Python files are parsed, never imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from d2kgrade import formulas
from d2kgrade.dtypes import FLOAT_DTYPES, tolerance_key
from d2kgrade.errors import Problem, SpecError
from d2kgrade.io import read_text, regular_file_problem
from d2kgrade.schema import Property, Rubric, Task
from d2kgrade.suite import Suite

REFERENCE_FUNCTIONS = ("reference", "baseline", "make_inputs")


def top_level_names(path: Path) -> tuple[set[str], list[Problem]]:
    """Names bound at module level of a Python file (defs, classes, assignments, imports), or problems."""
    try:
        source = read_text(path)
    except SpecError as exc:
        return set(), exc.problems
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        return set(), [Problem(str(path), f"line {exc.lineno}", f"Python syntax error: {exc.msg}")]
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names, []


def check_python_defines(path: Path, required: Iterable[str], what: str) -> list[Problem]:
    """Problems if ``path`` is missing, does not parse, or does not define every name in ``required``."""
    problem = regular_file_problem(path)
    if problem == "file not found":
        return [Problem(str(path), "", f"missing: every task needs its {what}")]
    if problem:
        return [Problem(str(path), "", problem)]
    names, problems = top_level_names(path)
    if problems:
        return problems
    return [Problem(str(path), name, f"not defined: the {what} must define '{name}'")
            for name in required if name not in names]


def check_task_formulas(task: Task, path: Path) -> list[Problem]:
    """Evaluate derived values, shapes, dtypes, cost and tolerances on every workload."""
    problems: list[Problem] = []
    workloads = [(f"workloads.{i}", w) for i, w in enumerate(task.workloads)] + [("smoke", task.smoke)]
    for where, w in workloads:
        try:
            env = task.env(w)
        except formulas.FormulaError as exc:
            problems.append(Problem(str(path), f"derived ({where} {w.name})", str(exc)))
            continue
        for t in task.inputs + task.outputs:
            try:
                formulas.eval_shape(t.shape, env)
            except formulas.FormulaError as exc:
                problems.append(Problem(str(path), f"{where}.params", f"shape of {t.name!r}: {exc}"))
        for key in ("flops", "bytes", "mufu"):
            text = getattr(task.cost, key)
            if text is None:
                continue
            try:
                value = formulas.evaluate(text, env)
                if value < 0:
                    problems.append(Problem(str(path), f"cost.{key}", f"is {value} on {w.name}, expected >= 0"))
            except formulas.FormulaError as exc:
                problems.append(Problem(str(path), f"cost.{key}", f"on workload {w.name!r}: {exc}"))
        try:
            dtypes = task.tensor_dtypes(w)
        except ValueError as exc:
            problems.append(Problem(str(path), f"{where}.dtype", str(exc)))
            continue
        for out in task.outputs:
            dt = dtypes[out.name]
            if dt in FLOAT_DTYPES and tolerance_key(dt, task.tolerance) is None:
                problems.append(Problem(str(path), "tolerance",
                                        f"no tolerance for output {out.name!r} stored as {dt} (workload {w.name})"))
    return problems


def check_rubric(task: Task, rubric: Rubric, path: Path, known_checks: set[str] | None) -> list[Problem]:
    """Rubric against its task: one property per active guidance id, no orphans, levels agree, checks known."""
    problems: list[Problem] = []
    guidance = {g.id: g for g in task.guidance}
    props = {p.id: (i, p) for i, p in enumerate(rubric.properties)}
    for g in task.active_guidance():
        if g.id not in props:
            problems.append(Problem(str(path), "properties", f"no property for guidance id {g.id!r}"))
    for pid, (i, p) in props.items():
        g = guidance.get(pid)
        if g is None:
            problems.append(Problem(str(path), f"properties.{i}.id",
                                    f"{pid!r} is not a guidance id of task {task.id!r} (orphan property)"))
        elif g.level != p.level:
            problems.append(Problem(str(path), f"properties.{i}.level",
                                    f"is {p.level} but guidance {pid!r} is {g.level}"))
        problems.extend(workload_problems(task, p, i, path))
        if known_checks is None:
            continue
        for j, ref in enumerate(p.static.checks):
            if ref.check not in known_checks:
                problems.append(Problem(str(path), f"properties.{i}.static.checks.{j}.check",
                                        f"unknown static check {ref.check!r}; known: {', '.join(sorted(known_checks))}"))
            else:  # known check: its arguments must be ones it takes, of the annotated types
                from d2kgrade.static.registry import check_args_problem

                msg = check_args_problem(ref.check, ref.args)
                if msg:
                    problems.append(Problem(str(path), f"properties.{i}.static.checks.{j}.args", msg))
    return problems


def workload_problems(task: Task, prop: Property, index: int, path: Path | str) -> list[Problem]:
    """A property's ``workloads`` against the task's catalog: one problem per name the task does not have."""
    known = [w.name for w in task.workloads]
    return [Problem(str(path), f"properties.{index}.workloads.{j}",
                    f"property {prop.id!r} names workload {name!r}, which task {task.id!r} does not have; its "
                    f"workloads: {', '.join(known)}")
            for j, name in enumerate(prop.workloads or []) if name not in known]


def _known_checks() -> set[str]:
    from d2kgrade.static.registry import known_checks

    return known_checks()


def validate_task(suite: Suite, task_id: str, known_checks: set[str] | None = None) -> list[Problem]:
    """Every problem of one task's files."""
    problems: list[Problem] = []
    task_path = suite.task_path(task_id)
    task: Task | None = None
    try:
        task = suite.load_task(task_id)
    except SpecError as exc:
        problems.extend(exc.problems)
    if task is not None:
        problems.extend(check_task_formulas(task, task_path))
    problems.extend(check_python_defines(suite.reference_py(task_id), REFERENCE_FUNCTIONS, "reference.py"))
    rubric_path = suite.rubric_path(task_id)
    if not rubric_path.is_file():
        problems.append(Problem(str(rubric_path), "", "missing: every task needs a rubric"))
    else:
        try:
            rubric = suite.load_rubric(task_id)
            if task is not None:
                problems.extend(check_rubric(task, rubric, rubric_path, known_checks))
        except SpecError as exc:
            problems.extend(exc.problems)
    kernels = suite.reference_kernels(task_id)
    if "triton" not in kernels:
        kernels["triton"] = suite.root / "references" / task_id / "triton.py"
    for path in kernels.values():
        problems.extend(check_python_defines(path, ("kernel",), "reference kernel"))
    return problems


def check_task_evaluable(suite: Suite, task_id: str, *, kernels: tuple[str, ...] = ()) -> Task:
    """The task, if what an evaluation of it reads is sound: task.yaml, its formulas on every workload,
    ``reference.py`` (parsed, never imported) and the named expert ``kernels`` (``"triton"``, ``"cuda"``).

    Raises:
        SpecError: every problem, each naming the file and the field, so a task fault is never blamed on a
            submission; UserError for an unknown id.
    """
    task = suite.load_task(task_id)
    problems = check_task_formulas(task, suite.task_path(task_id))
    problems += check_python_defines(suite.reference_py(task_id), REFERENCE_FUNCTIONS, "reference.py")
    for lang in kernels:
        problems += check_python_defines(suite.root / "references" / task_id / f"{lang}.py", ("kernel",),
                                         "reference kernel")
    if problems:
        raise SpecError(problems)
    return task


def validate_suite(suite: Suite, task_ids: list[str] | None = None) -> dict[str, list[Problem]]:
    """Problems per task id (an empty list means the task is valid). Unknown ids raise UserError."""
    ids = suite.resolve_ids(task_ids)
    known = _known_checks()
    return {tid: validate_task(suite, tid, known) for tid in ids}
