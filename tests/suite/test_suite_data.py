"""Test the data: every task, rubric and reference of the shipped suite loads, validates, matches the catalog,
and every reference kernel reproduces reference.py on the smoke workload (CPU: the Triton interpreter)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml

from d2kgrade.suite import Suite
from d2kgrade.validate import validate_suite

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT.parent / "shared" / "catalog.yaml"
SUITE = Suite(ROOT)
TASKS = SUITE.task_ids
KERNELS = [(t, lang) for t in TASKS for lang in sorted(SUITE.reference_kernels(t))]


@functools.cache
def catalog_tasks() -> dict[str, dict]:
    """The catalog's task entries by id, parsed once per module (200 KB of YAML: 0.2 s a parse, 26 tasks)."""
    return {t["id"]: t for t in yaml.safe_load(CATALOG.read_text())["tasks"]}


def test_suite_is_not_empty():
    assert {"softmax", "rmsnorm_residual", "gemm_bf16"} <= set(TASKS)


@pytest.mark.parametrize("task_id", TASKS)
def test_task_validates(task_id):
    assert [str(p) for p in validate_suite(SUITE, [task_id])[task_id]] == []


@pytest.mark.skipif(not CATALOG.is_file(), reason="catalog not beside the checkout")
@pytest.mark.parametrize("task_id", TASKS)
def test_task_keeps_the_catalog_contract(task_id):
    entry = catalog_tasks()[task_id]
    task = SUITE.load_task(task_id)
    assert [(w.name, dict(w.params), w.dtype) for w in task.workloads] == [
        (w["name"], w["params"], w["dtype"]) for w in entry["workloads"]]
    assert [(g.id, g.level, sorted(g.depends_on)) for g in task.guidance] == [
        (g["id"], g["level"], sorted(g["depends_on"])) for g in entry["guidance"]]
    assert [t.name for t in task.inputs] == [t["name"] for t in entry["inputs"]]
    assert [t.name for t in task.outputs] == [t["name"] for t in entry["outputs"]]
    assert (task.cost.flops, task.cost.bytes) == (entry["cost"]["flops"], entry["cost"]["bytes"])


@pytest.mark.parametrize("task_id,lang", KERNELS)
def test_reference_kernel_matches_on_smoke(task_id, lang):
    if lang == "cuda":
        pytest.importorskip("torch").cuda.is_available() or pytest.skip("CUDA reference needs a GPU")
    from runner.direct import load_reference, run_trials
    from runner.loading import load_module

    task = SUITE.load_task(task_id)
    ref = load_reference(SUITE.task_dir(task_id))
    module = load_module(SUITE.reference_kernels(task_id)[lang], prefix=f"d2k_refkernel_{lang}")
    trials = run_trials(task, ref, module.kernel, "smoke", seed=1234)
    assert len(trials) >= 2, "the input maker must offer more than one distribution"
    failures = [(t.dist, m.name, m.reason) for t in trials for m in t.outputs if not m.ok]
    assert failures == []


@pytest.mark.parametrize("task_id", TASKS)
def test_trivial_outputs_fail(task_id):
    """Zeros, ones, garbage-free empty buffers and input echo never pass the smoke workload's check."""
    import torch

    from runner.direct import compare_outputs, load_reference
    from runner.inputs import WorkloadSpec, as_tuple, distributions, make_inputs

    task = SUITE.load_task(task_id)
    ref = load_reference(SUITE.task_dir(task_id))
    spec = WorkloadSpec.resolve(task, task.smoke)
    for i, dist in enumerate(distributions(ref)):
        inputs = make_inputs(ref, spec, seed=99 + i, device="cpu", dist=dist)
        expected = as_tuple(ref.reference(*inputs, **spec.scalars))
        fakes = {
            "zeros": tuple(torch.zeros_like(e) for e in expected),
            "ones": tuple(torch.ones_like(e) for e in expected),
        }
        same = [x for x in inputs if x.shape == expected[0].shape and x.dtype == expected[0].dtype]
        if same:
            fakes["echo"] = (same[0].clone(), *expected[1:])
        for label, fake in fakes.items():
            res = compare_outputs(spec, fake, expected)
            assert not all(m.ok for m in res), f"{task_id}/{dist}: a '{label}' output passed"


@pytest.mark.parametrize("task_id", TASKS)
def test_input_distributions_differ(task_id):
    import torch

    from runner.direct import load_reference
    from runner.inputs import WorkloadSpec, distributions, make_inputs

    task = SUITE.load_task(task_id)
    ref = load_reference(SUITE.task_dir(task_id))
    spec = WorkloadSpec.resolve(task, task.smoke)
    draws = [make_inputs(ref, spec, seed=7, device="cpu", dist=d) for d in distributions(ref)]
    assert len(draws) >= 2
    # Every input counts, integer ones too: a histogram's only input is its int32 keys.
    for other in draws[1:]:
        assert any(not torch.equal(a, b) for a, b in zip(draws[0], other)), "distributions draw identical inputs"
    a = make_inputs(ref, spec, seed=7, device="cpu", dist=distributions(ref)[0])
    assert all(torch.equal(x, y) for x, y in zip(a, draws[0])), "the input maker is not deterministic per seed"
