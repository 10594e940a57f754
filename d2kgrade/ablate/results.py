"""The ablation record: one property of one kernel, removed by a codemod and timed against the original.

``d2kgrade ablate`` appends one JSON object per line to ``RUN_DIR/ablations.jsonl`` (``--run``) or to the file
given with ``--out``; the report and the viewer read it back with :func:`load_run_ablations`. A format module:
pydantic only, no torch, no libcst.

How the figures are made (:mod:`d2kgrade.ablate.driver`): the original and every ablated variant are timed in
the same process of rounds, interleaved (orig, v1, v2, ..., orig, v1, ...), each round one evaluation per
variant. Per workload, ``ratio = median over rounds of the variant's median / median over rounds of the
original's``; ``slowdown`` is the geometric mean of those ratios over the timed workloads (the same mean the
speed metrics use). ``ci_low``/``ci_high`` are a 95% bootstrap interval of that geomean, resampling rounds.
``noise_pct`` comes from original-vs-original: the original is timed twice per round, and the noise is the
half-width, in percent, of the bootstrap interval of the first copy against the second. A property is
``load_bearing`` when ``ci_low > 1 + noise_pct/100``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from d2kgrade.errors import UserError

log = logging.getLogger(__name__)

ABLATIONS_FILE = "ablations.jsonl"
"""Name of the ablation records of a run directory."""

AblationStatus = Literal["load_bearing", "not_load_bearing", "broke_correctness", "no_transform", "untimed",
                         "not_present"]
ABLATION_STATUSES: tuple[str, ...] = ("load_bearing", "not_load_bearing", "broke_correctness", "no_transform",
                                      "untimed", "not_present")
"""``load_bearing``: the slowdown's interval lies above the noise; ``not_load_bearing``: it does not;
``broke_correctness``: the ablated kernel fails the evaluator (reported, never timed); ``no_transform``: the rubric
gives the property no transform, or its transform found nothing to change in this file (``message`` says which);
``untimed``: the ablated kernel passes but was not timed (CPU, or the original itself failed); ``not_present``:
the static rater does not find the property in the kernel, so there is nothing to remove (with
``estimated_from_reference``, the slowdown is the expert reference's)."""

REFERENCE_PREFIX = "reference:"
"""``episode`` of a record about an expert reference: ``reference:<task>``."""


class WorkloadAblation(BaseModel):
    """One workload's figures of one ablated property."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    """Workload name."""
    slowdown: float | None = None
    """Median over rounds of the variant's median time / the same of the original's."""
    ci_low: float | None = None
    """Lower end of the 95% bootstrap interval of ``slowdown`` (resampling rounds)."""
    ci_high: float | None = None
    """Upper end of that interval."""
    noise_pct: float | None = None
    """Original-vs-original half-width on this workload, in percent."""
    original_ms: float | None = None
    """Median over rounds of the original's median time."""
    ablated_ms: float | None = None
    """Median over rounds of the ablated variant's median time."""


class AblationRecord(BaseModel):
    """What removing one design property from one kernel did to its correctness and its speed."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    schema_version: Literal[1] = 1
    """Version of this format."""
    task: str
    """Task id."""
    episode: str
    """Episode id of the run, or ``reference:<task>`` for the expert reference."""
    arm: str | None = None
    """The episode's arm (``unguided``, ``guided``, ...); ``reference`` for the expert reference."""
    model: str | None = None
    """The episode's model; None for the reference."""
    seed: int | None = None
    """The episode's seed; None for the reference."""
    property: str
    """Guidance id of the property (``softmax.L3.exp2-fold``)."""
    level: Literal["L1", "L2", "L3"]
    """The property's level."""
    transform: str | None = None
    """The transform(s) that removed it, joined with ``+`` in the order applied (``strip_eviction_hints``);
    None when none applied."""
    present: bool
    """The static rater found the property in this kernel."""
    status: AblationStatus
    """Outcome (see :data:`ABLATION_STATUSES`)."""
    slowdown: float | None = None
    """Ablated / original time: the geomean over the timed workloads of the per-workload ratios of medians
    (above 1: removing the property made the kernel slower). None unless timed, or estimated from the reference."""
    ci_low: float | None = None
    """Lower end of the 95% bootstrap interval of ``slowdown``."""
    ci_high: float | None = None
    """Upper end of that interval."""
    noise_pct: float | None = None
    """Measured original-vs-original noise of this kernel's timing, in percent (geomean over workloads)."""
    estimated_from_reference: bool = False
    """``slowdown`` and its interval are the expert reference's for this property, standing in for a property this
    kernel lacks (status ``not_present``)."""
    message: str = ""
    """Detail for people: what the transform changed, why it did not apply, the first failing workload."""
    workloads: list[WorkloadAblation] = []
    """Per-workload figures behind ``slowdown`` (empty when untimed)."""
    device: str | None = None
    """Where it ran: ``cuda`` or ``cpu``."""
    gpu: str | None = None
    """GPU name, when timed."""
    rounds: int | None = None
    """Interleaved timing rounds behind the figures."""
    kernel_sha256: str | None = None
    """Hash of the original kernel's source."""
    code_sha256: str | None = None
    """:func:`code_sha256` of the original kernel: unchanged by an edit of its docstrings or comments."""
    created_at: str | None = None
    """When the record was written (ISO 8601, UTC)."""

    def key(self) -> tuple[str, str]:
        """(episode, property): a later record with the same key replaces an earlier one."""
        return self.episode, self.property


def code_sha256(source: str) -> str:
    """Hash of a Python kernel's code without its docstrings and comments (the parsed tree, positions left out), so
    that records of a kernel stay current across an edit of its prose; a source that is not Python (CUDA C++) is
    hashed as text. The tree is written out field by field with empty fields left out, so the hash is the same
    under every Python the project supports (``ast.dump`` is not: 3.12 added ``type_params``, and round 19's record
    of histogram, hashed on the H200's 3.12, named a change that a 3.11 checkout did not see)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return hashlib.sha256(source.encode()).hexdigest()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(_tree_text(tree).encode()).hexdigest()


def _tree_text(node: object) -> str:
    if isinstance(node, ast.AST):
        fields = [(f, getattr(node, f, None)) for f in node._fields]
        inner = ",".join(f"{f}={_tree_text(v)}" for f, v in fields if v is not None and v != [])
        return f"{type(node).__name__}({inner})"
    if isinstance(node, list):
        return "[" + ",".join(_tree_text(v) for v in node) + "]"
    return repr(node)


def append_record(path: Path, record: AblationRecord) -> None:
    """Append one record as a JSON line and flush it to disk, so that a crash loses only the unfinished ones.

    A last line that a crash cut short (no final newline) is cut off first: appended to, it would glue onto the
    new record and make a bad middle line of the whole file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as fh:
        size = fh.seek(0, 2)
        if size:
            fh.seek(size - 1)
            if fh.read(1) != b"\n":
                fh.seek(0)
                keep = fh.read().rfind(b"\n") + 1
                log.warning("%s: dropping a last line cut short (%d bytes) before appending", path, size - keep)
                fh.truncate(keep)
        fh.seek(0, 2)
        fh.write((record.model_dump_json() + "\n").encode("utf-8"))
        fh.flush()


def _validated(raw: Any, where: str) -> AblationRecord:
    """``raw`` as a record, or a UserError that names ``where`` (file and line or index) and the first problem."""
    try:
        return AblationRecord.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "(record)"
        raise UserError(f"{where}: {loc}: {first['msg']}; expected an AblationRecord (d2kgrade.ablate.results)"
                        ) from None


def read_ablation_file(path: Path) -> list[AblationRecord]:
    """The records of an ablations file: a JSONL of records (``ablations.jsonl``, the resume file) or the JSON
    that ``benchmarks/ablate_references.py`` writes (its ``records``).

    Raises:
        UserError: no such file, or a file that is neither (naming the file and what was expected).
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: file not found (expected an ablations JSONL or an ablation_<gpu>.json)")
    if path.suffix != ".json":
        return read_records(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
        raise UserError(f"{path}: records: missing; expected the JSON of benchmarks/ablate_references.py, with a "
                        "list of AblationRecords under 'records'")
    return [_validated(rec, f"{path}: records[{i}]") for i, rec in enumerate(doc["records"])]


def read_records(path: Path) -> list[AblationRecord]:
    """Every record of an ablations JSONL file in file order, later duplicates of an (episode, property) key
    replacing earlier ones. A missing file is an empty list; a last line cut short by a crash is skipped (logged).

    Raises:
        UserError: a line that is not a record (naming the file, the line and what was expected).
    """
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    out: dict[tuple[str, str], AblationRecord] = {}
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            if i == len(lines):
                log.warning("%s: line %d cut short (%s); skipped", path, i, exc.msg)
                continue
            raise UserError(f"{path}: line {i}: not JSON ({exc.msg}); expected one AblationRecord per line") from None
        rec = _validated(raw, f"{path}: line {i}")
        out.pop(rec.key(), None)
        out[rec.key()] = rec
    return list(out.values())


def load_run_ablations(run_dir: Path) -> list[AblationRecord]:
    """The ablation records of a run directory (``RUN_DIR/ablations.jsonl``); empty when it has none.

    Raises:
        UserError: a line of the file is not a record.
    """
    return read_records(Path(run_dir) / ABLATIONS_FILE)


__all__ = [
    "ABLATIONS_FILE",
    "ABLATION_STATUSES",
    "REFERENCE_PREFIX",
    "AblationRecord",
    "AblationStatus",
    "WorkloadAblation",
    "append_record",
    "load_run_ablations",
    "read_ablation_file",
    "read_records",
]
