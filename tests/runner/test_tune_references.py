"""benchmarks/tune_references.py on CPU: the warp override reaches the launch and is undone, the hint stripping
removes exactly the hints asked for, the config filter respects shared memory and registers, and every sweep's
variants run and agree with the default configuration on the smoke workload (under the interpreter)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch

import benchmarks.tune_references as tune
from runner.direct import load_reference
from runner.evaluate import load_task
from runner.inputs import WorkloadSpec, make_inputs
from runner.loading import load_module
from tests.conftest import ROOT


def test_warps_override_reaches_the_launch_and_is_undone():
    seen = []
    jit = SimpleNamespace(run=lambda *a, **kw: seen.append(kw.get("num_warps")))
    with tune.warps(jit, 8):
        jit.run(grid=(1,), num_warps=4)
    jit.run(grid=(1,), num_warps=4)
    with tune.warps(jit, None):
        jit.run(num_warps=2)
    assert seen == [8, 4, 2]


def test_hint_stripping(tmp_path):
    src = ('x = tl.load(p, mask=m, eviction_policy="evict_first")\n'
           'w = tl.load(q, eviction_policy="evict_last")\n'
           'tl.store(o, y, mask=m, cache_modifier=".cs")\n')
    path = tmp_path / "k.py"
    path.write_text(src)
    assert tune.HINT_RES["evict_first"].sub("", src).count("eviction_policy") == 1
    assert "cache_modifier" not in tune.HINT_RES["cs_stores"].sub("", src)
    bare = tune.HINT_RES["all"].sub("", src)
    assert "eviction_policy" not in bare and "cache_modifier" not in bare and "mask=m)" in bare


def test_gemm_config_filter():
    cfgs = tune._gemm_configs((64, 256), (256,), (64,), (3, 5), (4, 8))
    for c in cfgs:
        assert (c["BM"] + c["BN"]) * c["BK"] * 2 * c["num_stages"] <= 220 << 10
        assert c["BM"] * c["BN"] <= 128 * 64 * c["num_warps"]
    assert dict(BM=256, BN=256, BK=64, GROUP_M=8, num_stages=3, num_warps=8) not in cfgs  # fits smem; 256 acc/thread
    assert dict(BM=64, BN=256, BK=64, GROUP_M=8, num_stages=3, num_warps=4) in cfgs


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs the kernels under the interpreter")
@pytest.mark.parametrize("task_id", ["swiglu", "layernorm", "transpose", "topk", "gemm_splitk", "softmax", "histogram",
                                     "prefix_scan"])
def test_sweep_variants_agree_with_the_default_on_the_smoke_workload(task_id):
    maker, only = tune.SWEEPS[task_id]
    task = load_task(ROOT, task_id)
    ref = load_reference(ROOT / "tasks" / task_id)
    mod = load_module(ROOT / "references" / task_id / "triton.py", prefix="d2k_tune_test")
    spec = WorkloadSpec.resolve(task, task.smoke)
    inputs = make_inputs(ref, spec, seed=0, device="cpu")
    expect = mod.kernel(*inputs, **spec.scalars)
    wl = next(w for w in task.workloads if not only or w.name in only)
    # (TMA variants need 16-byte-aligned rows, which the smoke shapes do not have; on the GPU such a variant is
    # recorded as an error row.)
    variants = [v for v in maker(mod, inputs, dict(wl.params)) if "path=tma" not in v[0]]
    assert variants
    tol = tune._tolerance(task, task.smoke.dtype)
    for label, fn in (variants[0], variants[-1]):
        assert tune.close(fn(*inputs, **spec.scalars), expect, tol), label
    assert not tune.close(torch.zeros_like(tune._flat(expect)[0]), expect, tol)


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs the kernels under the interpreter")
def test_histogram_sweep_covers_the_global_paths_groups():
    task = load_task(ROOT, "histogram")
    ref = load_reference(ROOT / "tasks" / "histogram")
    mod = load_module(ROOT / "references" / "histogram" / "triton.py", prefix="d2k_tune_test")
    spec = WorkloadSpec.resolve(task, task.smoke.model_copy(update={"params": {"N": 9001, "NB": 3000,
                                                                                "dist": "uniform"}}))
    (x,) = make_inputs(ref, spec, seed=0, device="cpu", dist="hot_tail_runs")
    variants = tune.sweep_histogram(mod, (x,), {"NB": 3000})
    assert {label.split()[2] for label, _ in variants} == {"group=0", "group=32", "group=128"}
    assert all(tune.HISTOGRAM_LABEL.match(label) for label, _ in variants)
    expect = torch.bincount(x, minlength=3000).to(torch.int32)
    for label, fn in variants[::5]:
        assert torch.equal(fn(x, NB=3000), expect), label


def test_histogram_pick_takes_the_fastest_config_timed_everywhere_and_writes_it(tmp_path):
    def row(variant, workload, dist, ms):
        return {"task": "histogram", "workload": workload, "dist": dist, "variant": variant, "median_ms": ms}
    g = "global block=4096 group=128 per_sm={}"
    rows = [row(g.format(2), "vocab_bins", "catalog", 0.8), row(g.format(2), "vocab_bins", "hot_tail_runs", 1.0),
            # faster on the catalog draw, much slower on the other: the geomean over both decides
            row(g.format(4), "vocab_bins", "catalog", 0.7), row(g.format(4), "vocab_bins", "hot_tail_runs", 3.0),
            # fastest, but timed on one draw only (the other errored): not picked
            row("global block=8192 group=0 per_sm=3", "vocab_bins", "catalog", 0.1),
            {"task": "histogram", "workload": "vocab_bins", "dist": "hot_tail_runs",
             "variant": "global block=8192 group=0 per_sm=3", "error": "boom"},
            # one program per tile is reported, never written
            row("global block=4096 group=128 per_sm=tile", "vocab_bins", "catalog", 0.01),
            row("global block=4096 group=128 per_sm=tile", "vocab_bins", "hot_tail_runs", 0.01),
            row("private block=8192 group=None per_sm=3", "uniform_256", "catalog", 1.0),
            row("default", "uniform_256", "catalog", 0.5)]
    picks = tune.pick_histogram(rows)
    assert picks["global"]["per_sm"] == 2 and picks["global"]["group"] == 128 and picks["global"]["configs"] == 2
    assert picks["private"] == {**picks["private"], "block": 8192, "per_sm": 3, "group": None}
    ref = tmp_path / "triton.py"
    ref.write_text((ROOT / "references" / "histogram" / "triton.py").read_text())
    now = load_module(ref, prefix="d2k_tune_now")
    picks = {path: {key: getattr(now, name) for key, name in names.items()}
             for path, names in tune.HISTOGRAM_CONSTANTS.items()}
    assert tune.apply_histogram(picks, ref) == []
    picks["global"]["per_sm"] = now._GLOBAL_PROGS_PER_SM + 3
    assert tune.apply_histogram(picks, ref) == [f"_GLOBAL_PROGS_PER_SM {now._GLOBAL_PROGS_PER_SM} -> "
                                                f"{now._GLOBAL_PROGS_PER_SM + 3}"]
    mod = load_module(ref, prefix="d2k_tune_applied")
    assert mod._GLOBAL_PROGS_PER_SM == now._GLOBAL_PROGS_PER_SM + 3 and mod._GLOBAL_GROUP == now._GLOBAL_GROUP
