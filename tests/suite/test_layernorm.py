"""layernorm: every path of the expert Triton reference against reference.py (CPU, Triton interpreter), the
launcher's routing of the catalog workloads, and the numerics trap: at x_offset = 1000 the one-pass
E[x^2] - E[x]^2 variance fails the tolerance while the reference kernel passes, as do zeros, constants and echo."""

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
TASK = SUITE.load_task("layernorm")
REF = load_reference(SUITE.task_dir("layernorm"))
KERNEL = load_module(SUITE.reference_kernels("layernorm")["triton"], prefix="d2k_test_layernorm")

# The interpreter converts 1-element arrays with int() when a loop starts at tl.program_id (numpy >= 1.25 warns).
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(M: int, N: int, dtype: str, x_offset: int = 0) -> WorkloadSpec:
    params = {"M": M, "N": N, **({"x_offset": x_offset} if x_offset else {})}
    return WorkloadSpec.resolve(TASK, Workload(name="t", params=params, dtype=dtype))


def failures(s: WorkloadSpec, fn, inputs) -> list[str]:
    got = fn(*[t.clone() for t in inputs])
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, REF.reference(*inputs)) if not m.ok]


# (M, N, dtype, x_offset, launcher overrides): partial row blocks, persistent loops of several iterations,
# non-power-of-two rows, tiles with a short last tile, and the catalog's offset.
CASES = {
    "rows_short_persistent": (23, 300, "fp32", 0, {"_rows": 4, "_num_progs": 3}),
    "rows_short_bf16": (50, 100, "bf16", 0, {}),
    "rows_wide": (3, 3000, "fp32", 0, {}),
    "rows_wide_offset": (3, 2100, "fp32", 1000, {}),
    "tiled_offset": (3, 700, "fp32", 1000, {"_max_block": 256, "_tile_n": 256}),
    "tiled_bf16": (3, 600, "bf16", 0, {"_max_block": 256, "_tile_n": 256}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    M, N, dtype, offset, overrides = CASES[case]
    s = spec(M, N, dtype, offset)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=20 + i, device="cpu", dist=dist)
        assert failures(s, lambda *t: KERNEL.layernorm(*t, **overrides), inputs) == [], dist


def test_catalog_workloads_take_their_designed_path():
    plans = {w.name: KERNEL._plan(w.params["N"]) for w in TASK.workloads}
    assert plans["llama_hidden_8k"] == dict(path="tiled", rows=1, block_n=2048, num_warps=4)
    assert plans["many_short_rows"] == dict(path="rows", rows=4, block_n=1024, num_warps=2)
    assert plans["large_offset_fp32"] == dict(path="rows", rows=1, block_n=4096, num_warps=2)
    assert KERNEL._plan(4096)["path"] == "rows" and KERNEL._plan(4097)["path"] == "tiled"


def one_pass_variance(x, w, b):
    """The shortcut: var = E[x^2] - E[x]^2 with fp32 (pairwise) sums, then the usual normalization."""
    xf = x.float()
    mean = xf.mean(-1)
    var = ((xf * xf).mean(-1) - mean * mean).clamp_min(0.0)
    rstd = torch.rsqrt(var + REF.EPS)
    y = (xf - mean[:, None]) * rstd[:, None] * w.float() + b.float()
    return y.to(x.dtype), mean, rstd


def test_shortcuts_fail_the_tolerance_where_the_kernel_passes():
    # A 16 x 1024 cut of large_offset_fp32 (mean 1000, std 1) on the catalog's distribution.
    s = spec(16, 1024, "fp32", 1000)
    inputs = make_inputs(REF, s, seed=5, device="cpu", dist="normal")
    expected = as_tuple(REF.reference(*inputs))
    assert failures(s, KERNEL.kernel, inputs) == []
    bad = failures(s, one_pass_variance, inputs)
    assert any(f.startswith("y:") for f in bad), "E[x^2] - E[x]^2 in fp32 passed at x_offset = 1000"
    x = inputs[0]
    fakes = {
        "zeros": tuple(torch.zeros_like(e) for e in expected),
        "ones": tuple(torch.ones_like(e) for e in expected),
        "constant": tuple(torch.full_like(e, float(e.float().mean())) for e in expected),
        "echo": (x.clone(), *expected[1:]),
        "affine_only": (inputs[2].expand_as(x).clone(), *expected[1:]),  # y = b: the normalization dropped
    }
    for label, fake in fakes.items():
        assert not all(m.ok for m in compare_outputs(s, fake, expected)), f"'{label}' passed"
