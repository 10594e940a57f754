"""Tools one by one: specs, argument errors, kernel versions, read ranges, trimming, harness paths scrubbed."""

from __future__ import annotations

from pathlib import Path

import pytest

from d2kgrade.records import Environment, EvalResult, WorkloadResult
from d2kgrade.runstore import RunStore, load_run
from d2kgrade.suite import Suite
from runner.agent.evaluation import EvalRequest, ProfileRequest, SanitizeRequest, call_sanitize
from runner.agent.profile import parse_ncu_csv, summarize, unavailable_reason
from runner.agent.recorder import EpisodeRecorder, LocalSink
from runner.agent.tools import TOOLS, ToolBox, tool_specs
from runner.agent.workspace import Workspace
from tests.runner_agent.helpers import ROOT


class _Evaluator:
    device = "cpu"

    def __init__(self, log: str = "") -> None:
        self.requests: list[EvalRequest] = []
        self.log = log

    def evaluate(self, req: EvalRequest) -> EvalResult:
        self.requests.append(req)
        return EvalResult(task=req.task_id, status="compile_error", correct=False, log=self.log,
                          workloads=[WorkloadResult(name="smoke", status="compile_error",
                                                    message=f"File \"{ROOT}/runner/evaluate.py\", line 9")],
                          environment=Environment(device="cpu"))

    def profile(self, req: ProfileRequest) -> str:
        return unavailable_reason("cpu") or ""

    def sanitize(self, req: SanitizeRequest) -> dict:
        self.requests.append(req)  # type: ignore[arg-type]
        return call_sanitize(req, suite_root=ROOT, device="cpu")


@pytest.fixture
def box(tmp_path: Path) -> ToolBox:
    store = RunStore(tmp_path / "run")
    rec = EpisodeRecorder(LocalSink(store), "r1", "e1")
    return ToolBox(Suite(ROOT).load_task("softmax"), Workspace(tmp_path / "ws"), _Evaluator("x" * 50_000), rec,
                   output_limit=4000, scrub_paths=[ROOT])


def test_specs_are_function_calling_schemas():
    specs = {s["function"]["name"]: s["function"] for s in tool_specs()}
    assert set(specs) == set(TOOLS) == {"write_file", "read_file", "list_files", "test", "benchmark", "profile",
                                        "sanitize", "submit"}
    assert specs["sanitize"]["parameters"]["properties"]["tool"]["enum"] == ["memcheck", "racecheck"]
    wf = specs["write_file"]["parameters"]
    assert wf["required"] == ["path", "content"] and wf["additionalProperties"] is False
    assert "title" not in wf and wf["properties"]["path"]["description"]


def test_kernel_versions_are_distinct_contents_kept_as_files(box: ToolBox, tmp_path: Path):
    assert box.run("write_file", {"path": "kernel.py", "content": "a = 1\n"}, turn=2).kernel_version == 1
    assert box.run("write_file", {"path": "kernel.py", "content": "a = 2\n"}, turn=3).kernel_version == 2
    assert box.run("write_file", {"path": "kernel.py", "content": "a = 1\n"}, turn=4).kernel_version == 1
    assert box.run("write_file", {"path": "notes.md", "content": "plan"}, turn=4).kernel_version is None
    kv = load_run(tmp_path / "run")["kernel_versions"]
    assert list(kv.version) == [1, 2] and list(kv.turn) == [2, 3]
    assert (tmp_path / "run" / kv.file_path[1]).read_text() == "a = 2\n"


def test_read_file_ranges_and_list(box: ToolBox):
    box.run("write_file", {"path": "kernel.py", "content": "".join(f"line {i}\n" for i in range(1, 11))}, turn=1)
    out = box.run("read_file", {"path": "kernel.py", "start_line": 4, "max_lines": 2}, turn=1).text
    assert out.splitlines() == ["kernel.py: lines 4-5 of 10", "    4  line 4", "    5  line 5"]
    assert box.run("list_files", {}, turn=1).text == "1 file(s):\nkernel.py  71 bytes"
    bad = box.run("read_file", {"path": "kernel.py", "start_line": "four"}, turn=1)
    assert not bad.ok and "start_line" in bad.text


def test_evaluation_output_is_trimmed_and_scrubbed(box: ToolBox):
    box.run("write_file", {"path": "kernel.py", "content": "def kernel(x): return x\n"}, turn=1)
    out = box.run("test", {"workloads": ["smoke"]}, turn=2)
    assert out.ok and out.eval_id == 1 and len(out.text) < 4300
    assert out.text.startswith("test kernel.py (kernel version 1): compile_error")
    assert "characters of log trimmed" in out.text
    assert str(ROOT) not in out.text and "<harness>/runner/evaluate.py" in out.text
    assert box.evaluator.requests[0].workloads == ["smoke"] and box.evaluator.requests[0].hidden is False
    bad = box.run("test", {"workloads": ["huge"]}, turn=3)
    assert not bad.ok and "unknown workload" in bad.text and "rows_4k" in bad.text
    prof = box.run("profile", {}, turn=3)
    assert not prof.ok and "profile unavailable" in prof.text and "CPU" in prof.text


def test_submit_needs_an_existing_python_file_and_warns_without_kernel(box: ToolBox):
    missing = box.run("submit", {}, turn=1)
    assert not missing.ok and "does not exist" in missing.text and box.submission is None
    box.run("write_file", {"path": "k.py", "content": "def helper(): pass\n"}, turn=1)
    out = box.run("submit", {"path": "k.py"}, turn=2)
    assert out.ok and "does not seem to define kernel" in out.text and "not been tested" in out.text
    assert box.submission is not None and box.submission.path == "k.py" and box.submissions == 1


def test_ncu_csv_summary():
    csv_text = ('==PROF== Connected\n"ID","Process ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
                '"0","1","_softmax_kernel","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","91.2"\n'
                '"0","1","_softmax_kernel","launch__registers_per_thread","register/thread","40"\n'
                '"0","1","_softmax_kernel","l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum","byte","0"\n')
    text = summarize(parse_ncu_csv(csv_text))
    assert text.splitlines()[0] == "profile: 1 kernel launch(es) in one call"
    assert "DRAM throughput %: 91.2 %" in text and "registers/thread: 40" in text and "local loads (spills): 0" in text
    assert "no kernel launch" in summarize([])


def test_sanitize_calls_the_sanitizer_on_a_private_copy(box: ToolBox, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path):
    import sys
    import types

    seen: dict = {}

    def fake_sanitize(task_id, submission_path, *, tool="memcheck", suite_root=None, device=None, timeout_s=None):
        seen.update(task=task_id, path=Path(submission_path), text=Path(submission_path).read_text(), tool=tool,
                    device=device, root=suite_root)
        return {"available": True, "reason": "", "tool": tool, "errors": 2,
                "report": f"========= Invalid __global__ read of size 4 in {submission_path}\n2 errors"}

    monkeypatch.setitem(sys.modules, "runner.sanitize", types.SimpleNamespace(sanitize=fake_sanitize))
    box.run("write_file", {"path": "kernel.py", "content": "def kernel(x): return x\n"}, turn=1)
    out = box.run("sanitize", {"tool": "racecheck"}, turn=2)
    assert out.ok and out.kernel_version == 1
    assert out.text.splitlines()[0] == "sanitize racecheck kernel.py (kernel version 1): 2 error(s) found"
    assert "Invalid __global__ read" in out.text
    assert seen["task"] == "softmax" and seen["tool"] == "racecheck" and seen["text"] == "def kernel(x): return x\n"
    assert seen["path"].parent != tmp_path / "ws" and not seen["path"].exists()  # a private copy, removed after
    assert str(seen["path"].parent) not in out.text  # the private folder's name is scrubbed
    bad = box.run("sanitize", {"tool": "initcheck"}, turn=3)
    assert not bad.ok and "memcheck" in bad.text and "racecheck" in bad.text


def test_sanitize_unavailable_says_why(box: ToolBox, monkeypatch: pytest.MonkeyPatch):
    import sys
    import types

    answer = {"available": False, "reason": "needs a CUDA GPU with compute-sanitizer", "tool": "memcheck",
              "errors": 0, "report": ""}
    monkeypatch.setitem(sys.modules, "runner.sanitize", types.SimpleNamespace(sanitize=lambda *a, **k: answer))
    box.run("write_file", {"path": "kernel.py", "content": "def kernel(x): return x\n"}, turn=1)
    out = box.run("sanitize", {}, turn=2)
    assert not out.ok and out.text == "sanitize unavailable: needs a CUDA GPU with compute-sanitizer"
    monkeypatch.setitem(sys.modules, "runner.sanitize", types.SimpleNamespace(sanitize=lambda *a, **k: {"x": 1}))
    broken = box.run("sanitize", {}, turn=3)
    assert not broken.ok and "failed on its side" in broken.text


def test_sanitize_on_cpu_through_the_real_sanitizer(box: ToolBox):
    """runner.sanitize's own CPU answer, unpatched: unavailable, and why."""
    box.run("write_file", {"path": "kernel.py", "content": "def kernel(x): return x\n"}, turn=1)
    out = box.run("sanitize", {"tool": "memcheck"}, turn=2)
    assert not out.ok and out.text.startswith("sanitize unavailable: ") and "CUDA GPU" in out.text
    assert "not available: not available" not in out.text
