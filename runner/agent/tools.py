"""The agent's tools: argument models (their JSON Schemas are the function-calling specs) and their execution.

| tool | does |
|---|---|
| ``write_file(path, content)`` | write a text file in the workspace (a new ``.py`` content is a new kernel version) |
| ``read_file(path, start_line=1, max_lines=400)`` | read part of a workspace file, with line numbers |
| ``list_files(path=".")`` | the workspace's files and sizes |
| ``test(path="kernel.py", workloads="all")`` | correctness through the evaluator, with failure detail |
| ``benchmark(path="kernel.py", workloads="all")`` | times vs eager and torch.compile, fraction of roofline |
| ``profile(path="kernel.py", workload=None)`` | ncu summary (GPU with ncu only) |
| ``sanitize(path="kernel.py", tool="memcheck")`` | compute-sanitizer memcheck/racecheck on a small workload (GPU) |
| ``submit(path="kernel.py")`` | this file's current content becomes the answer; the last submission counts |

Every outcome is a message for the agent, never an exception out of :meth:`ToolBox.run`: a bad argument, an
unknown tool, a refused path or an evaluator fault becomes an ``error: ...`` result with ``ok=False``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from d2kgrade.records import EvalResult
from d2kgrade.schema import Task
from runner.agent.evaluation import (EvalRequest, EvaluationRefused, Evaluator, EvaluatorFault, ProfileRequest,
                                     SanitizeRequest)
from runner.agent.recorder import EpisodeRecorder
from runner.agent.report import format_benchmark, format_sanitize, format_test, scrub, trim
from runner.agent.workspace import Workspace, WorkspaceError

log = logging.getLogger(__name__)

READ_MAX_LINES = 400
_DEFINES_KERNEL = re.compile(r"^(\s*(async\s+)?def\s+kernel\s*\(|kernel\s*=|from\s+\S+\s+import\s+.*\bkernel\b)",
                             re.M)


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class WriteFileArgs(Args):
    """Write (create or replace) a UTF-8 text file in your workspace."""

    path: str
    """File path relative to the workspace, e.g. 'kernel.py'."""
    content: str
    """The complete new content of the file."""


class ReadFileArgs(Args):
    """Read a text file of your workspace, with line numbers."""

    path: str
    """File path relative to the workspace."""
    start_line: int = 1
    """First line to show (1-based)."""
    max_lines: int = READ_MAX_LINES
    """How many lines to show at most."""


class ListFilesArgs(Args):
    """List the files of your workspace (or of one of its folders) with their sizes."""

    path: str = "."
    """Folder relative to the workspace."""


class TestArgs(Args):
    """Check a kernel file's correctness through the evaluator (several input draws per workload)."""

    path: str = "kernel.py"
    """The kernel file to test."""
    workloads: str | list[str] = "all"
    """'all', 'smoke' (the small irregular workload), or a list of workload names."""


class BenchmarkArgs(Args):
    """Time a kernel file against PyTorch eager and torch.compile; reports speedups and fraction of roofline."""

    path: str = "kernel.py"
    """The kernel file to benchmark."""
    workloads: str | list[str] = "all"
    """'all' or a list of workload names."""


class ProfileArgs(Args):
    """Profile one call of the kernel with Nsight Compute: DRAM/SM throughput, occupancy, registers, spills."""

    path: str = "kernel.py"
    """The kernel file to profile."""
    workload: str | None = None
    """Workload name (default: the first catalog workload)."""


class SanitizeArgs(Args):
    """Run the kernel under NVIDIA compute-sanitizer on a small workload: memcheck finds out-of-bounds and misaligned
    memory accesses, racecheck finds shared-memory data races. Reports each error with the kernel and the access."""

    path: str = "kernel.py"
    """The kernel file to check."""
    tool: Literal["memcheck", "racecheck"] = "memcheck"
    """'memcheck' (out-of-bounds accesses) or 'racecheck' (shared-memory races)."""


class SubmitArgs(Args):
    """Submit the file's current content as your answer. You may keep improving and submit again; the last
    submission counts and is evaluated on every workload plus a hidden one when the episode ends."""

    path: str = "kernel.py"
    """The kernel file to submit."""


TOOLS: dict[str, type[Args]] = {
    "write_file": WriteFileArgs, "read_file": ReadFileArgs, "list_files": ListFilesArgs, "test": TestArgs,
    "benchmark": BenchmarkArgs, "profile": ProfileArgs, "sanitize": SanitizeArgs, "submit": SubmitArgs,
}


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Pydantic's JSON Schema without titles (noise for a model), with ``additionalProperties: false``."""
    if isinstance(schema, dict):
        return {k: _clean_schema(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_clean_schema(v) for v in schema]  # type: ignore[return-value]
    return schema


def tool_specs() -> list[dict[str, Any]]:
    """The ``tools`` parameter of a chat-completions request (OpenAI function calling)."""
    out = []
    for name, model in TOOLS.items():
        params = _clean_schema(model.model_json_schema())
        params.pop("description", None)
        out.append({"type": "function", "function": {"name": name, "description": (model.__doc__ or "").strip(),
                                                     "parameters": params}})
    return out


@dataclass
class ToolOutcome:
    """What one tool call produced."""

    text: str
    ok: bool = True
    error: str | None = None
    kernel_version: int | None = None
    eval_id: int | None = None
    wall_s: float = 0.0


@dataclass
class Submission:
    version: int
    path: str
    source: str
    turn: int


@dataclass
class ToolBox:
    """Runs tool calls for one episode."""

    task: Task
    workspace: Workspace
    evaluator: Evaluator
    recorder: EpisodeRecorder
    output_limit: int = 12_000
    eval_timeout_s: float | None = None
    scrub_paths: list[Any] = field(default_factory=list)
    submission: Submission | None = None
    submissions: int = 0
    version_files: dict[int, str] = field(default_factory=dict)
    """Kernel version -> its kept file, relative to RUN_DIR."""
    _versions: dict[str, int] = field(default_factory=dict)
    _n_versions: int = 0
    _n_evals: int = 0
    _last_test: dict[int, str] = field(default_factory=dict)

    # ------------------------------------------------------------------ bookkeeping

    def kernel_version(self, path: str, source: str, turn: int) -> int:
        """The version number of this exact content (a new one, kept as a file, if unseen)."""
        sha = hashlib.sha256(source.encode()).hexdigest()
        if sha in self._versions:
            return self._versions[sha]
        self._n_versions += 1
        n = self._n_versions
        flat = re.sub(r"[^A-Za-z0-9._-]", "_", path.replace("/", "__"))
        rel = self.recorder.save_file(f"kernels/v{n:03d}_{flat}", source)
        self.recorder.kernel_version({"version": n, "turn": turn, "path": path, "file_path": rel, "sha256": sha,
                                      "n_bytes": len(source.encode())})
        self._versions[sha] = n
        self.version_files[n] = rel
        return n

    def next_eval_id(self) -> int:
        self._n_evals += 1
        return self._n_evals

    def record_evaluation(self, result: EvalResult, *, kind: str, turn: int, version: int | None,
                          workloads: Any, wall_s: float) -> int:
        eval_id = self.next_eval_id()
        self.recorder.evaluation(self.evaluation_row(result, eval_id=eval_id, kind=kind, turn=turn, version=version,
                                                     workloads=workloads, wall_s=wall_s))
        return eval_id

    @staticmethod
    def evaluation_row(result: EvalResult, *, eval_id: int, kind: str, turn: int, version: int | None,
                       workloads: Any, wall_s: float) -> dict[str, Any]:
        return {"eval_id": eval_id, "turn": turn, "kind": kind, "kernel_version": version,
                "workloads_requested": json.dumps(workloads), "status": result.status, "correct": result.correct,
                "wall_s": wall_s, "result_json": result.model_dump_json()}

    # ------------------------------------------------------------------ dispatch

    def run(self, name: str, raw_args: Any, *, turn: int) -> ToolOutcome:
        """Execute one call; never raises for anything the agent did."""
        t0 = time.monotonic()
        out = self._run(name, raw_args, turn=turn)
        out.text = trim(out.text, self.output_limit)
        out.wall_s = time.monotonic() - t0
        return out

    def _run(self, name: str, raw_args: Any, *, turn: int) -> ToolOutcome:
        model = TOOLS.get(name)
        if model is None:
            msg = f"unknown tool {name!r}; the tools are: {', '.join(TOOLS)}"
            return ToolOutcome(f"error: {msg}", ok=False, error=msg)
        if isinstance(raw_args, str):
            try:
                raw_args = json.loads(raw_args) if raw_args.strip() else {}
            except json.JSONDecodeError as exc:
                msg = f"arguments of {name} are not valid JSON ({exc.msg} at char {exc.pos}); send a JSON object"
                return ToolOutcome(f"error: {msg}", ok=False, error=msg)
        if not isinstance(raw_args, dict):
            msg = f"arguments of {name} must be a JSON object, got {type(raw_args).__name__}"
            return ToolOutcome(f"error: {msg}", ok=False, error=msg)
        try:
            args = model.model_validate(raw_args)
        except ValidationError as exc:
            parts = [f"{'.'.join(str(x) for x in e['loc']) or '(arguments)'}: {e['msg']}" for e in exc.errors()]
            msg = f"bad arguments for {name}: " + "; ".join(parts)
            return ToolOutcome(f"error: {msg}", ok=False, error=msg)
        try:
            return getattr(self, f"_tool_{name}")(args, turn)
        except WorkspaceError as exc:
            return ToolOutcome(f"error: {exc}", ok=False, error=str(exc))
        except EvaluationRefused as exc:
            msg = scrub(f"the evaluator refused the request: {exc}", self.scrub_paths)
            return ToolOutcome(f"error: {msg}", ok=False, error=msg)
        except EvaluatorFault as exc:
            msg = f"the evaluator failed on its side, not because of your kernel ({exc}); try again"
            return ToolOutcome(f"error: {msg}", ok=False, error=str(exc))

    # ------------------------------------------------------------------ files

    def _tool_write_file(self, a: WriteFileArgs, turn: int) -> ToolOutcome:
        path = self.workspace.write(a.path, a.content)
        rel = self.workspace.rel(path)
        n_lines = a.content.count("\n") + (0 if a.content.endswith("\n") or not a.content else 1)
        text = f"wrote {rel} ({len(a.content.encode())} bytes, {n_lines} lines)"
        version = None
        if rel.endswith(".py"):
            version = self.kernel_version(rel, a.content, turn)
            text += f"; kernel version {version}"
        return ToolOutcome(text, kernel_version=version)

    def _tool_read_file(self, a: ReadFileArgs, turn: int) -> ToolOutcome:
        text = self.workspace.read(a.path)
        lines = text.splitlines()
        start = max(a.start_line, 1)
        count = min(max(a.max_lines, 1), READ_MAX_LINES)
        shown = lines[start - 1:start - 1 + count]
        head = f"{a.path}: lines {start}-{start + len(shown) - 1} of {len(lines)}"
        body = "\n".join(f"{start + i:5d}  {line}" for i, line in enumerate(shown))
        return ToolOutcome(head + ("\n" + body if body else ""))

    def _tool_list_files(self, a: ListFilesArgs, turn: int) -> ToolOutcome:
        folder = self.workspace.resolve(a.path)
        prefix = "" if folder == self.workspace.root else self.workspace.rel(folder) + "/"
        files = [(p, s) for p, s in self.workspace.files() if p.startswith(prefix)]
        if not files:
            return ToolOutcome(f"{a.path}: no files yet (write_file creates them)")
        return ToolOutcome(f"{len(files)} file(s):\n" + "\n".join(f"{p}  {s} bytes" for p, s in files))

    # ------------------------------------------------------------------ evaluation

    def _workloads(self, wl: str | list[str]) -> str | list[str]:
        names = [w.name for w in self.task.workloads] + ["smoke"]
        if isinstance(wl, str):
            if wl in ("all", "smoke"):
                return wl
            wl = [wl]
        bad = [w for w in wl if w not in names]
        if bad or not wl:
            raise WorkspaceError(f"unknown workload(s) {bad}; choose 'all' or among {names}")
        if self.evaluator.device == "cpu" and any(w != "smoke" for w in wl):
            raise WorkspaceError("this run evaluates on CPU under the Triton interpreter, where only the 'smoke' "
                                 "workload runs ('all' means smoke here)")
        return list(wl)

    def _source(self, path: str, turn: int) -> tuple[str, str, int]:
        target = self.workspace.resolve(path, must_exist=True)
        rel = self.workspace.rel(target)
        if not rel.endswith(".py"):
            raise WorkspaceError(f"{path!r} is not a .py file; the kernel is a Python file defining kernel(...)")
        source = self.workspace.read(rel)
        return rel, source, self.kernel_version(rel, source, turn)

    def _evaluate(self, kind: str, path: str, workloads: str | list[str], turn: int) -> ToolOutcome:
        wl = self._workloads(workloads)
        rel, source, version = self._source(path, turn)
        t0 = time.monotonic()
        result = self.evaluator.evaluate(EvalRequest(self.task.id, source, rel, workloads=wl, hidden=False,
                                                     timing=(kind == "benchmark"), timeout_s=self.eval_timeout_s))
        wall = time.monotonic() - t0
        eval_id = self.record_evaluation(result, kind=kind, turn=turn, version=version, workloads=wl, wall_s=wall)
        header = f"{kind} {rel} (kernel version {version})"
        fmt = format_test if kind == "test" else format_benchmark
        text = scrub(fmt(result, header=header, limit=self.output_limit), self.scrub_paths)
        self._last_test[version] = result.status
        return ToolOutcome(text, kernel_version=version, eval_id=eval_id)

    def _tool_test(self, a: TestArgs, turn: int) -> ToolOutcome:
        return self._evaluate("test", a.path, a.workloads, turn)

    def _tool_benchmark(self, a: BenchmarkArgs, turn: int) -> ToolOutcome:
        return self._evaluate("benchmark", a.path, a.workloads, turn)

    def _tool_profile(self, a: ProfileArgs, turn: int) -> ToolOutcome:
        if a.workload is not None and a.workload not in [w.name for w in self.task.workloads] + ["smoke"]:
            raise WorkspaceError(f"unknown workload {a.workload!r}; choose among "
                                 f"{[w.name for w in self.task.workloads] + ['smoke']}")
        rel, source, version = self._source(a.path, turn)
        text = self.evaluator.profile(ProfileRequest(self.task.id, source, rel, a.workload))
        return ToolOutcome(scrub(text, self.scrub_paths), ok=not text.startswith("profile unavailable"),
                           kernel_version=version)

    def _tool_sanitize(self, a: SanitizeArgs, turn: int) -> ToolOutcome:
        rel, source, version = self._source(a.path, turn)
        out = self.evaluator.sanitize(SanitizeRequest(self.task.id, source, rel, a.tool, self.eval_timeout_s))
        return ToolOutcome(scrub(format_sanitize(out, rel=rel, version=version), self.scrub_paths),
                           ok=bool(out["available"]), kernel_version=version)

    def _tool_submit(self, a: SubmitArgs, turn: int) -> ToolOutcome:
        rel, source, version = self._source(a.path, turn)
        self.submission = Submission(version, rel, source, turn)
        self.submissions += 1
        tested = self._last_test.get(version)
        note = (f"this version's last test: {tested}" if tested else
                "this version has not been tested or benchmarked")
        if not _DEFINES_KERNEL.search(source):
            note += f"; warning: {rel} does not seem to define kernel(...), which the evaluator calls"
        return ToolOutcome(f"submitted {rel} (kernel version {version}; submission {self.submissions}); {note}. "
                           "The last submission counts: it is evaluated on every workload plus a hidden one when "
                           "the episode ends. You may keep improving and submit again, or reply without a tool "
                           "call to end the episode.", kernel_version=version)
