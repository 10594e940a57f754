"""Baseline candidates (task.yaml `baselines`): every task declares the paper's eager and torch.compile columns plus
compile max-autotune; every candidate's function exists in reference.py and takes the task's inputs; a candidate's
`requires` names exactly the modules its function imports, all of them from the `[peers]` extra; the candidates
that run on CPU give the reference's answer on the smoke workload (or are listed here, with the reason, as
known to miss the task's semantics, and then must indeed miss it)."""

from __future__ import annotations

import ast
import inspect
import textwrap
import tomllib
from pathlib import Path

import pytest

from d2kgrade.suite import Suite

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
TASKS = SUITE.task_ids

# Import name of each package of the [peers] extra (pip name -> module).
PEER_MODULES = {"liger-kernel": "liger_kernel", "flash-attn": "flash_attn", "flashinfer-python": "flashinfer",
                "mamba-ssm": "mamba_ssm", "causal-conv1d": "causal_conv1d", "vllm": "vllm"}
# Modules a candidate may import without declaring them: this project's own runtime.
RUNTIME_MODULES = {"torch", "math", "triton"}
# GEMM, convolution and attention tasks: the ones whose vendor library the vendor-ratio figure compares with.
VENDOR_CATEGORIES = {"gemm", "attention"}
VENDOR_TASKS = {"conv2d_implicit_gemm"}

# CPU-runnable candidates that do not meet the task's semantics on the smoke workload, and why. Each must fail.
KNOWN_WRONG = {
    ("embedding_bag", "eager"): "F.embedding_bag returns a bf16 sum for a bf16 table (1e-3 relative off; rtol 1e-4)",
    ("moe_permute", "eager"): "torch.topk does not break ties toward the lower expert (quantized_ties draw)",
}


def _ref(task_id: str):
    from runner.direct import load_reference

    return load_reference(SUITE.task_dir(task_id))


def _candidates():
    return [(t, b.name) for t in TASKS for b in SUITE.load_task(t).baseline_candidates()]


def _candidate(task_id: str, name: str):
    return next(b for b in SUITE.load_task(task_id).baseline_candidates() if b.name == name)


def _imported_modules(fn) -> set[str]:
    """Top-level modules imported inside a function's body."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("task_id", TASKS)
def test_every_task_declares_the_named_columns(task_id):
    task = SUITE.load_task(task_id)
    assert task.baselines, f"{task_id}: no baselines declared (the defaults would hide the task's peers)"
    got = {b.name: (b.kind, b.fn, b.mode) for b in task.baselines}
    assert got.get("eager") == ("eager", "baseline", None)
    assert got.get("compile") == ("compile", "baseline", "default")
    assert got.get("compile_max_autotune") == ("compile", "baseline", "max-autotune-no-cudagraphs")
    assert all(b.description for b in task.baselines), f"{task_id}: a candidate without a description"


@pytest.mark.parametrize("task_id,name", _candidates())
def test_candidate_function_exists_and_takes_the_inputs(task_id, name):
    task = SUITE.load_task(task_id)
    cand = _candidate(task_id, name)
    fn = getattr(_ref(task_id), cand.fn, None)
    assert callable(fn), f"{task_id}: reference.py defines no {cand.fn}()"
    inputs = [t.name for t in task.inputs]
    inspect.signature(fn).bind(*inputs, **{a: None for a in task.scalar_args})  # raises TypeError if not
    if cand.fn != "baseline":
        assert cand.fn == f"baseline_{name}", f"{task_id}: candidate {name!r} runs {cand.fn}, not baseline_{name}"


@pytest.mark.parametrize("task_id,name", _candidates())
def test_requires_names_the_imported_peer_modules(task_id, name):
    cand = _candidate(task_id, name)
    fn = getattr(_ref(task_id), cand.fn)
    imported = _imported_modules(fn) - RUNTIME_MODULES
    assert imported == set(cand.requires), (
        f"{task_id}/{name}: imports {sorted(imported)}, declares requires={cand.requires}")
    assert set(cand.requires) <= set(PEER_MODULES.values()), f"{task_id}/{name}: a module outside [peers]"
    assert (cand.kind == "peer") == bool(cand.requires), f"{task_id}/{name}: kind peer iff it requires a library"
    if cand.requires:
        assert cand.device == "cuda" and not cand.vendor, f"{task_id}/{name}: peers are CUDA-only, not the vendor"


def test_the_peers_extra_installs_every_required_module():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {spec.split("[")[0].split(">")[0].split("=")[0].strip() for spec in extras["peers"]}
    assert names == set(PEER_MODULES)
    required = {m for t in TASKS for b in SUITE.load_task(t).baseline_candidates() for m in b.requires}
    assert required == set(PEER_MODULES.values()), "a [peers] package no candidate uses, or one missing"


@pytest.mark.parametrize("task_id", TASKS)
def test_vendor_candidates_belong_to_gemm_convolution_and_attention(task_id):
    task = SUITE.load_task(task_id)
    vendor = [b.name for b in task.baselines if b.vendor]
    if task.category in VENDOR_CATEGORIES or task_id in VENDOR_TASKS:
        assert vendor, f"{task_id}: no vendor-library candidate"
        assert all(not b.vendor for b in task.baselines if b.kind == "compile")
    else:
        assert vendor == [], f"{task_id}: vendor candidates outside GEMM/convolution/attention: {vendor}"


CPU_CANDIDATES = [(t, n) for t, n in _candidates()
                  if _candidate(t, n).kind == "eager" and _candidate(t, n).device == "any"]


@pytest.mark.filterwarnings("ignore::UserWarning")  # FlexAttention warns when it runs unfused (eager, CPU)
@pytest.mark.parametrize("task_id,name", CPU_CANDIDATES)
def test_cpu_candidates_give_the_reference_answer_on_smoke(task_id, name):
    from runner.direct import run_trials

    task = SUITE.load_task(task_id)
    fn = getattr(_ref(task_id), _candidate(task_id, name).fn)
    trials = run_trials(task, _ref(task_id), fn, "smoke", seed=21)
    failures = [(t.dist, m.name, m.reason) for t in trials for m in t.outputs if not m.ok]
    if (task_id, name) in KNOWN_WRONG:
        assert failures, f"{task_id}/{name} is listed as wrong ({KNOWN_WRONG[task_id, name]}) but passed"
    else:
        assert failures == []


def test_known_wrong_entries_are_cpu_candidates():
    assert set(KNOWN_WRONG) <= set(CPU_CANDIDATES)
