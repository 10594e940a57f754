"""rmsnorm_residual: both paths of the expert Triton reference against reference.py (CPU, Triton interpreter),
the launcher's routing, and the fp16 outlier trap (x_scale = 300: h*h overflows fp16)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from d2kgrade.schema import Workload
from d2kgrade.suite import Suite
from runner.direct import compare_outputs, load_reference
from runner.inputs import WorkloadSpec, distributions, make_inputs
from runner.loading import load_module

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
TASK = SUITE.load_task("rmsnorm_residual")
REF = load_reference(SUITE.task_dir("rmsnorm_residual"))
KERNEL = load_module(SUITE.reference_kernels("rmsnorm_residual")["triton"], prefix="d2k_test_rmsnorm")

# The interpreter converts 1-element arrays with int() when a loop starts at tl.program_id (numpy >= 1.25 warns).
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(M: int, N: int, dtype: str, **extra) -> WorkloadSpec:
    return WorkloadSpec.resolve(TASK, Workload(name="t", params={"M": M, "N": N, **extra}, dtype=dtype))


def failures(s: WorkloadSpec, fn, inputs) -> list[str]:
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, fn(*inputs), REF.reference(*inputs)) if not m.ok]


# (M, N, dtype, extra params, launcher overrides)
CASES = {
    "rows": (23, 777, "fp16", {}, {}),
    "rows_outliers": (23, 777, "fp16", {"x_scale": 300}, {}),
    "rows_bf16_pow2": (5, 2048, "bf16", {}, {}),
    "rows_persistent": (40, 100, "fp16", {}, {"_num_progs": 3}),
    "tiled": (7, 1000, "fp16", {"x_scale": 300}, {"_path": "tiled", "_block_n": 256, "_num_progs": 3}),
    # fp16, not bf16: the tiled path computes y from the stored residual_out, and the 3.6 interpreter casts fp32
    # to bf16 by truncation, so two truncations can exceed bf16's tolerance on CPU (not on a GPU, which rounds).
    "tiled_even": (4, 1024, "fp16", {}, {"_path": "tiled", "_block_n": 256}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    M, N, dtype, extra, overrides = CASES[case]
    s = spec(M, N, dtype, **extra)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=20 + i, device="cpu", dist=dist)
        assert failures(s, lambda *t: KERNEL.rmsnorm_residual(*t, **overrides), inputs) == [], dist


def test_routing_and_warps():
    picks = {w.name: ("rows" if w.params["N"] <= KERNEL._MAX_REG_N else "tiled") for w in TASK.workloads}
    assert set(picks.values()) == {"rows"}  # every catalog row (8k-16k) is held in registers
    assert [KERNEL._row_warps(b) for b in (1024, 4096, 8192, 16384)] == [1, 2, 4, 8]
    # Rows longer than the register budget go through the two-pass path by default.
    x = torch.randn(2, KERNEL._MAX_REG_N + 3, dtype=torch.float16)
    y, res = KERNEL.rmsnorm_residual(x, x, torch.ones(x.shape[1], dtype=torch.float16), _block_n=4096)
    s = spec(2, x.shape[1], "fp16")
    assert [m.ok for m in compare_outputs(s, (y, res), REF.reference(x, x, torch.ones_like(x[0])))] == [True, True]


def test_rejects_bad_inputs():
    x = torch.zeros(3, 8, dtype=torch.float16)
    with pytest.raises(ValueError):
        KERNEL.rmsnorm_residual(x, x, torch.zeros(7, dtype=torch.float16))
    with pytest.raises(TypeError):
        KERNEL.rmsnorm_residual(x, x.float(), torch.zeros(8, dtype=torch.float16))


# ------------------------------------------------------------------------------------ fp16 outlier trap


@triton.jit
def _naive_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, y_ptr, o_ptr, N, eps, BLOCK_N: tl.constexpr):
    """Deliberately naive: h and h*h stay in fp16, as a kernel that upcasts too late would compute them."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    h = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0) + tl.load(r_ptr + row * N + cols, mask=mask, other=0.0)
    tl.store(o_ptr + row * N + cols, h, mask=mask)
    sq = h * h                                            # fp16: inf once |h| > 255
    rstd = tl.math.rsqrt(tl.sum(sq.to(tl.float32), axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * N + cols, (h.to(tl.float32) * rstd * w.to(tl.float32)).to(tl.float16), mask=mask)


def naive_rmsnorm(x, r, w):
    y, o = torch.empty_like(x), torch.empty_like(x)
    _naive_rmsnorm_kernel[(x.shape[0],)](x, r, w, y, o, x.shape[1], 1e-6, BLOCK_N=triton.next_power_of_2(x.shape[1]))
    return y, o


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the naive kernel's fp16 squares overflow, as intended
def test_fp16_outliers_catch_a_naive_kernel_but_not_the_reference():
    ordinary, outliers = spec(23, 777, "fp16"), spec(23, 777, "fp16", x_scale=300)
    normal = make_inputs(REF, ordinary, seed=4, device="cpu", dist="normal")
    trap = make_inputs(REF, outliers, seed=4, device="cpu", dist="normal")
    assert trap[0].abs().max() * 2 > 255, "x_scale=300 must push |h| past fp16's squaring limit"
    assert failures(ordinary, naive_rmsnorm, normal) == []   # the naive kernel is right on ordinary inputs
    assert failures(outliers, naive_rmsnorm, trap) != []
    for overrides in ({}, {"_path": "tiled", "_block_n": 256}):
        assert failures(outliers, lambda *t: KERNEL.rmsnorm_residual(*t, **overrides), trap) == []
