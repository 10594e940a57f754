"""Host paths judged per workload (d2kgrade.static.workloads): a launch no catalog workload reaches gives no credit
and takes none, an undecidable condition keeps its path, a property's ``workloads`` narrow the paths it is judged
on, and the grade says which workloads each launch served.

The task is the suite's softmax: x [M, N], workloads rows_4k (16384 x 4096 bf16), short_rows_fp32
(262144 x 256 fp32), vocab_rows (1024 x 128256 bf16), few_huge_rows (16 x 2097152 bf16).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from d2kgrade.errors import SpecError
from d2kgrade.schema import Rubric
from d2kgrade.static import extract_facts, grade_file
from d2kgrade.static.hosteval import UNKNOWN, DType, Evaluator, Tensor
from d2kgrade.static.workloads import workload_paths
from d2kgrade.suite import Suite
from d2kgrade.validate import check_rubric

ROOT = Path(__file__).resolve().parents[2]

KERNELS = """
import torch, triton
import triton.language as tl

@triton.jit
def _exp2_rows(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=0.0)
    tl.store(y_ptr + row * N + offs, tl.exp2(x), mask=offs < N)

@triton.jit
def _exp_rows(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=0.0)
    tl.store(y_ptr + row * N + offs, tl.exp(x), mask=offs < N)
"""


@pytest.fixture(scope="module")
def task():
    return Suite(ROOT).load_task("softmax")


def exp2_rubric(workloads: list[str] | None = None) -> Rubric:
    prop = {"id": "softmax.L3.exp2-fold", "level": "L3",
            "static": {"checks": [{"check": "uses_call", "args": {"name": "tl.exp2"}}]},
            "judge": {"question": "q?", "met": "m", "not_met": "n"}}
    if workloads is not None:
        prop["workloads"] = workloads
    return Rubric.model_validate({"task": "softmax", "properties": [prop]})


def write(tmp_path: Path, launcher: str) -> Path:
    p = tmp_path / "k.py"
    p.write_text(KERNELS + textwrap.dedent(launcher))
    return p


def grade(path: Path, task, workloads: list[str] | None = None):
    return grade_file(exp2_rubric(workloads), path, task=task).properties[0]


FALLBACK_HAS_IT = """
def kernel(x):
    x = x.contiguous()
    M, N = x.shape
    y = torch.empty_like(x)
    if N > 4194304:  # rows over 4M elements: no softmax workload has them (the longest is 2097152)
        _exp2_rows[(M,)](x, y, N, BLOCK=4096)
    else:
        _exp_rows[(M,)](x, y, N, BLOCK=triton.next_power_of_2(N))
    return y
"""


def test_fallback_no_workload_reaches_gives_no_credit(tmp_path, task):
    p = write(tmp_path, FALLBACK_HAS_IT)
    assert grade_file(exp2_rubric(), p).properties[0].verdict == "present"  # without the task: any live path
    g = grade(p, task)
    assert g.verdict == "absent"
    assert "not counted" in g.reason and "_exp2_rows" in g.reason and "N > 4194304" in g.reason
    rows = {r["kernel"]: r for r in g.details["workloads"]["paths"]}
    assert rows["_exp2_rows"]["serves"] == [] and rows["_exp2_rows"]["counted"] is False
    assert rows["_exp_rows"]["serves"] == ["rows_4k", "short_rows_fp32", "vocab_rows", "few_huge_rows"]
    assert g.details["workloads"]["judged"] == [w.name for w in task.workloads]


def test_live_path_has_it_fallback_not(tmp_path, task):
    p = write(tmp_path, FALLBACK_HAS_IT.replace("_exp2_rows[", "_tmp[").replace("_exp_rows[", "_exp2_rows[")
              .replace("_tmp[", "_exp_rows["))
    g = grade(p, task)
    assert g.verdict == "present"
    assert [r["kernel"] for r in g.details["workloads"]["paths"] if not r["counted"]] == ["_exp_rows"]


def test_unresolvable_condition_keeps_both_paths(tmp_path, task):
    p = write(tmp_path, """
    def kernel(x):
        M, N = x.shape
        y = torch.empty_like(x)
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        if M < 2 * sms:
            _exp2_rows[(M,)](x, y, N, BLOCK=4096)
        else:
            _exp_rows[(M,)](x, y, N, BLOCK=4096)
        return y
    """)
    g = grade(p, task)
    assert g.verdict == "present"
    assert "not counted" not in g.reason
    rows = g.details["workloads"]["paths"]
    assert all(r["counted"] and r["serves"] == [] and len(r["undecided"]) == 4 for r in rows)


SIZE_CLASSES = """
_SPLIT = {"huge": _exp2_rows, "rows": _exp_rows}

def _launch(x, y, path=None):
    M, N = x.shape
    path = path or ("huge" if M * 2 < 264 and N >= 65536 else "rows")
    _SPLIT[path][(M,)](x, y, N, BLOCK=min(triton.next_power_of_2(N), 4096))

def kernel(x):
    y = torch.empty_like(x)
    _launch(x, y)
    return y
"""


def test_module_list_changed_in_place_is_not_read(tmp_path, task):
    p = write(tmp_path, """
    _BLOCKS = [4096]

    def _tune():
        _BLOCKS.insert(0, 64)

    def kernel(x):
        _tune()
        M, N = x.shape
        y = torch.empty_like(x)
        if _BLOCKS[0] < 128:  # true once _tune ran: the display [4096] is not what this reads
            _exp2_rows[(M,)](x, y, N, BLOCK=64)
        else:
            _exp_rows[(M,)](x, y, N, BLOCK=4096)
        return y
    """)
    g = grade(p, task)
    assert g.verdict == "present" and all(r["counted"] for r in g.details["workloads"]["paths"])


def test_property_workloads_count_only_their_paths(tmp_path, task):
    p = write(tmp_path, SIZE_CLASSES)  # the kernel is picked from a dict by a size-class key
    assert grade(p, task).verdict == "present"  # few_huge_rows takes the exp2 kernel
    assert grade(p, task, ["few_huge_rows"]).verdict == "present"
    g = grade(p, task, ["rows_4k", "vocab_rows"])
    assert g.verdict == "absent"
    assert g.details["workloads"]["judged"] == ["rows_4k", "vocab_rows"]
    assert "_exp2_rows" in g.reason and "rows_4k, vocab_rows" in g.reason


MODES = """
@triton.jit
def _modes(x_ptr, y_ptr, N, BLOCK: tl.constexpr, FAST: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=0.0)
    if FAST:
        y = tl.exp2(x)
    else:
        y = tl.exp(x)
    tl.store(y_ptr + row * N + offs, y, mask=offs < N)

def kernel(x):
    y = torch.empty_like(x)
    N = x.shape[-1]
    _modes[(x.numel() // N,)](x, y, N, BLOCK=1024, FAST=x.dtype == torch.float32)
    return y
"""


def test_constexpr_mode_judged_per_workload(tmp_path, task):
    p = write(tmp_path, MODES)  # FAST only on fp32 inputs: short_rows_fp32
    assert grade(p, task).verdict == "present"
    assert grade(p, task, ["short_rows_fp32"]).verdict == "present"
    g = grade(p, task, ["rows_4k", "few_huge_rows"])
    assert g.verdict == "absent" and "constexpr condition" in g.reason


def test_mode_through_unknown_meta_keeps_both_branches(tmp_path, task):
    p = write(tmp_path, MODES.replace("BLOCK=1024, FAST=x.dtype == torch.float32)", "**_meta(x))") + textwrap.dedent("""
    def _meta(x):
        if x.dtype == torch.float32:
            return {"BLOCK": 1024, "FAST": True}
        return {"BLOCK": 1024, "FAST": False}
    """))  # the dict a helper returns from two branches is not read: both branches count (short_rows_fp32 does
    # take FAST; were the last return's False spliced into the launch, the exp2 branch would be dropped)
    assert grade(p, task).verdict == "present"
    launch = "    _modes[(x.numel() // N,)](x, y, N, BLOCK=1024, FAST=x.dtype == torch.float32)"
    p = write(tmp_path, MODES.replace(launch, """
    if x.dtype == torch.float32:
        meta = dict(BLOCK=1024, FAST=True)
    else:
        meta = dict(BLOCK=1024, FAST=False)
    _modes[(x.numel() // N,)](x, y, N, **meta)"""))  # assigned in two branches: not spliced as the last one
    assert "**meta" in p.read_text()
    assert grade(p, task).verdict == "present"


def test_unknown_workload_name_is_a_spec_error(tmp_path, task):
    r = exp2_rubric(["rows_4k", "long_rows_fp16"])
    problems = check_rubric(task, r, Path("rubrics/softmax.yaml"), None)  # (this rubric lacks the other ids too)
    assert [str(x) for x in problems if ".workloads" in x.where] == [
        "rubrics/softmax.yaml: properties.0.workloads.1: property 'softmax.L3.exp2-fold' names workload "
        "'long_rows_fp16', which task 'softmax' does not have; its workloads: rows_4k, short_rows_fp32, vocab_rows, "
        "few_huge_rows"]
    with pytest.raises(SpecError, match="long_rows_fp16"):
        grade_file(r, write(tmp_path, MODES), task=task)
    with pytest.raises(ValueError):
        Rubric.model_validate({"task": "softmax", "properties": [
            {**exp2_rubric().properties[0].model_dump(exclude={"workloads"}), "workloads": []}]})


def test_evaluator_binds_entry_parameters(tmp_path, task):
    p = write(tmp_path, """
    def kernel(x, _block=None):
        x = x.contiguous()
        rows = x.view(-1, x.shape[-1])
        M, N = rows.shape
        BLOCK = _block or triton.next_power_of_2(N)
        small = BLOCK <= 1024 and x.dtype in (torch.float32, torch.float16)
        chunks = triton.cdiv(N, max(BLOCK, 8192))
        y = torch.empty_like(x)
        _exp_rows[(M,)](x, y, N, BLOCK=BLOCK)
        return y
    """)
    facts = extract_facts(p)
    paths = workload_paths(facts, task)
    ev = paths.evals["vocab_rows"]
    flat = facts.functions["kernel"]

    def value(name):
        return ev._defs(flat.defs()[name], flat, 0)

    assert value("x") == Tensor((1024, 128256), "bf16")
    assert (value("M"), value("N"), value("BLOCK"), value("chunks")) == (1024, 128256, 131072, 1)
    assert value("small") is False
    assert paths.evals["short_rows_fp32"]._defs(flat.defs()["small"], flat, 0) is True
    assert Evaluator(facts, flat, {}).value(flat.defs()["M"][0].value) is UNKNOWN  # nothing bound: unknown
    assert DType("bf16") == Evaluator(facts, flat, {"x": Tensor((2, 3), "bf16")}).value(
        next(a.value for a in flat.assigns if a.targets == ("small",)).args[1].args[0])


CUDA = '''
import torch
from torch.utils.cpp_extension import load_inline

_SRC = r"""
__global__ void row_shfl(const float* x, float* y, int n) {
  float v = x[blockIdx.x * n + threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  y[blockIdx.x * n + threadIdx.x] = v;
}
__global__ void row_plain(const float* x, float* y, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) y[blockIdx.x * n + i] = x[blockIdx.x * n + i];
}
void launch(torch::Tensor x, torch::Tensor y) {
  int rows = x.size(0), n = x.size(1);
  if (n CONDITION) {
    row_shfl<<<rows, 32>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  } else {
    row_plain<<<rows, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  }
}
torch::Tensor softmax_cuda(torch::Tensor x) {
  auto y = torch::empty_like(x);
  launch(x, y);
  return y;
}
"""
_ext = load_inline("k", cpp_sources="torch::Tensor softmax_cuda(torch::Tensor x);", cuda_sources=_SRC,
                   functions=["softmax_cuda"])

def kernel(x):
    return _ext.softmax_cuda(x.contiguous())
'''


def test_cuda_host_paths_bound_through_load_inline(tmp_path, task):
    shfl = {"id": "softmax.L3.exp2-fold", "level": "L3", "judge": {"question": "q?", "met": "m", "not_met": "n"},
            "static": {"checks": [{"check": "uses_call", "args": {"name": "__shfl_xor_sync"}, "language": "cuda"}]}}
    p = tmp_path / "k.py"
    p.write_text(CUDA.replace("CONDITION", "> 4194304"))  # Python -> softmax_cuda -> launch(x, y): n = x.size(1)
    r = Rubric.model_validate({"task": "softmax", "properties": [shfl]})
    assert grade_file(r, p).properties[0].verdict == "present"
    g = grade_file(r, p, task=task).properties[0]
    assert g.verdict == "absent" and "cu:row_shfl" in g.reason and "false: n > 4194304" in g.reason
    p.write_text(CUDA.replace("CONDITION", "<= 1024"))  # short_rows_fp32 (N = 256) only
    assert grade_file(r, p, task=task).properties[0].verdict == "present"
    r = Rubric.model_validate({"task": "softmax", "properties": [{**shfl, "workloads": ["rows_4k", "vocab_rows"]}]})
    assert grade_file(r, p, task=task).properties[0].verdict == "absent"


HUGE_NUMBERS = """
def kernel(x):
    M, N = x.shape
    e = ((((9 ** 63) ** 63) ** 63) ** 63) ** 63   # 2^(3.2 x 63^4) bits: computing it would hold the grader
    y = torch.empty_like(x)
    if e > N or "x" * (1 << 40) == "":
        _exp2_rows[(M,)](x, y, N, BLOCK=4096)
    else:
        _exp_rows[(M,)](x, y, N, BLOCK=4096)
    return y
"""


def test_huge_host_numbers_are_unknown_not_computed(tmp_path, task):
    """A hostile submission's host arithmetic is not carried out beyond MAX_BITS: its condition is undecided, so
    both launches stay counted (before the bound, grading this file ran for minutes)."""
    from d2kgrade.static.hosteval import MAX_BITS, _bounded, _BINS

    assert _bounded(_BINS["**"], 9 ** 63, 63) is UNKNOWN and _bounded(_BINS["*"], "x", 1 << 40) is UNKNOWN
    assert _bounded(_BINS["<<"], 1, 62) == 1 << 62 and _bounded(_BINS["//"], 7, 0) is UNKNOWN
    assert _bounded(_BINS["*"], 1 << (MAX_BITS - 1), 4) is UNKNOWN and _bounded(_BINS["+"], (1,), (2,)) == (1, 2)
    g = grade(write(tmp_path, HUGE_NUMBERS), task)
    assert g.verdict == "present"
    assert all(r["counted"] for r in g.details["workloads"]["paths"]), g.details["workloads"]
