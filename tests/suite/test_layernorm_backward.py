"""layernorm_backward: every path of the expert Triton reference against reference.py (CPU, Triton interpreter),
the launcher's routing and group count for the catalog workloads, bitwise determinism of dw/db, and the
precision trap: dw accumulated in bf16 fails the tolerance while the reference kernel passes, as do zeros,
constants and echo."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from d2kgrade.schema import Workload
from d2kgrade.suite import Suite
from runner.direct import compare_outputs, load_reference
from runner.inputs import WorkloadSpec, as_tuple, distributions, make_inputs
from runner.loading import load_module

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
TASK = SUITE.load_task("layernorm_backward")
REF = load_reference(SUITE.task_dir("layernorm_backward"))
KERNEL = load_module(SUITE.reference_kernels("layernorm_backward")["triton"], prefix="d2k_test_layernorm_bwd")

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(M: int, N: int) -> WorkloadSpec:
    return WorkloadSpec.resolve(TASK, Workload(name="t", params={"M": M, "N": N}, dtype="bf16"))


def failures(s: WorkloadSpec, fn, inputs) -> list[str]:
    got = fn(*[t.clone() for t in inputs])
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, REF.reference(*inputs)) if not m.ok]


# (M, N, launcher overrides): multi-row tiles with a partial last block and stage 2 at its GPU width, one-row
# tiles, and the wide path with a short last column tile, a partial row block and programs that own several
# blocks (read-modify-write partials). The default smoke path runs in the shortcut test below.
CASES = {
    "rows_multi_groups": (50, 64, {"_rows": 4, "_groups": 5, "_block_cols": 32}),
    "rows_single": (11, 300, {"_rows": 1, "_groups": 4}),
    "wide": (7, 200, {"_max_block": 128, "_wide_tile": 128}),
    "wide_single_row": (5, 200, {"_max_block": 128, "_wide_tile": 128, "_wide_rows": 1, "_groups": 2}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    M, N, overrides = CASES[case]
    s = spec(M, N)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=30 + i, device="cpu", dist=dist)
        assert failures(s, lambda *t: KERNEL.layernorm_backward(*t, **overrides), inputs) == [], dist


def test_catalog_workloads_take_their_designed_path():
    plans = {w.name: KERNEL._plan(w.params["N"]) for w in TASK.workloads}
    assert plans["llama_8k"] == dict(path="rows", rows=1, block_n=8192, num_warps=16)
    assert plans["many_rows_n1024"] == dict(path="rows", rows=4, block_n=1024, num_warps=8)
    assert plans["wide_few_rows"] == dict(path="wide", rows=4, block_n=4096, num_warps=16)
    # G: whole waves of resident programs on 132 SMs; the wide path keeps its [G, N] partials within budget.
    assert KERNEL._group_count(plans["many_rows_n1024"], 1024, 32768, 3, 132) == 396
    assert KERNEL._group_count(plans["wide_few_rows"], 16384, 1024, 3, 132) == 132
    assert 132 * 16384 * 8 <= KERNEL.PARTIAL_BUDGET
    assert KERNEL._group_count(plans["llama_8k"], 8192, 20, 2, 132) == 20  # never more programs than row blocks


@pytest.mark.parametrize("overrides", [{}, {"_max_block": 128, "_wide_tile": 128}], ids=["rows", "wide"])
def test_param_grads_are_deterministic(overrides):
    s = spec(12, 200)
    inputs = make_inputs(REF, s, seed=3, device="cpu", dist="normal")
    first = KERNEL.layernorm_backward(*inputs, **overrides)
    again = KERNEL.layernorm_backward(*inputs, **overrides)
    assert all(torch.equal(a, b) for a, b in zip(first, again))


def bf16_param_grads(dy, x, w, mean, rstd):
    """The shortcut: exact dx, but dw and db accumulated row by row in a bf16 accumulator."""
    dx, _, _ = REF.reference(dy, x, w, mean, rstd)
    xhat = (x.float() - mean[:, None]) * rstd[:, None]
    dw = torch.zeros(x.shape[1], dtype=torch.bfloat16)
    db = torch.zeros(x.shape[1], dtype=torch.bfloat16)
    for row in range(x.shape[0]):
        dw = dw + (dy[row].float() * xhat[row]).to(torch.bfloat16)
        db = db + dy[row]
    return dx, dw.float(), db.float()


def test_shortcuts_fail_the_tolerance_where_the_kernel_passes():
    s = WorkloadSpec.resolve(TASK, TASK.smoke)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=40 + i, device="cpu", dist=dist)
        expected = as_tuple(REF.reference(*inputs))
        assert failures(s, KERNEL.kernel, inputs) == [], dist
        bad = failures(s, bf16_param_grads, inputs)
        assert any(f.startswith("dw:") for f in bad) and any(f.startswith("db:") for f in bad), dist
        dy = inputs[0]
        fakes = {
            "zeros": tuple(torch.zeros_like(e) for e in expected),
            "ones": tuple(torch.ones_like(e) for e in expected),
            "constant": tuple(torch.full_like(e, float(e.float().mean())) for e in expected),
            "echo_dy": (dy.clone(), *expected[1:]),
            "dx_without_mean_terms": ((dy.float() * inputs[2].float() * inputs[4][:, None]).to(dy.dtype),
                                      *expected[1:]),
        }
        for label, fake in fakes.items():
            assert not all(m.ok for m in compare_outputs(s, fake, expected)), f"{dist}: '{label}' passed"
