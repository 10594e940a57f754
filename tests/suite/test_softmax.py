"""softmax: every path of the expert Triton reference against reference.py (CPU, Triton interpreter), the
launcher's routing of the catalog workloads, and the overflow trap (logits far above exp's fp32 range)."""

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
TASK = SUITE.load_task("softmax")
REF = load_reference(SUITE.task_dir("softmax"))
KERNEL = load_module(SUITE.reference_kernels("softmax")["triton"], prefix="d2k_test_softmax")

# The interpreter converts 1-element arrays with int() when a loop starts at tl.program_id (numpy >= 1.25 warns).
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(M: int, N: int, dtype: str) -> WorkloadSpec:
    return WorkloadSpec.resolve(TASK, Workload(name="t", params={"M": M, "N": N}, dtype=dtype))


def failures(s: WorkloadSpec, fn, inputs) -> list[str]:
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, fn(*inputs), REF.reference(*inputs)) if not m.ok]


# (M, N, dtype, launcher overrides): each path on shapes that give partial tiles, a persistent loop with several
# iterations per program, and (split) a last chunk shorter than the others.
CASES = {
    "tile": (29, 600, "fp32", {}),
    "tile_narrow_bf16": (50, 20, "bf16", {}),
    "tile_persistent": (45, 300, "fp32", {"_block_m": 4, "_num_progs": 3}),
    "rows": (5, 3000, "fp32", {}),
    "rows_bf16_pow2": (6, 2048, "bf16", {}),
    "two_sweep": (7, 2500, "fp32", {"_path": "two_sweep", "_block_n": 512, "_num_progs": 3}),
    "two_sweep_bf16": (5, 3000, "bf16", {"_path": "two_sweep", "_block_n": 1024, "_num_progs": 2}),
    "split_bf16": (3, 2600, "bf16", {"_path": "split", "_block_n": 512, "_chunk": 1024}),
    "split_auto_chunk": (2, 3000, "fp32", {"_path": "split", "_block_n": 512}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    M, N, dtype, overrides = CASES[case]
    s = spec(M, N, dtype)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=10 + i, device="cpu", dist=dist)
        assert failures(s, lambda x: KERNEL.softmax(x, **overrides), inputs) == [], dist


def test_catalog_workloads_take_their_designed_path():
    picks = {w.name: KERNEL._pick_path(w.params["M"], w.params["N"], 132) for w in TASK.workloads}
    assert picks == {"rows_4k": "rows", "short_rows_fp32": "tile", "vocab_rows": "two_sweep",
                     "few_huge_rows": "split"}
    assert [KERNEL._row_warps(b) for b in (1024, 2048, 4096, 8192, 16384)] == [4, 4, 8, 8, 16]


def test_rejects_bad_inputs():
    with pytest.raises(ValueError):
        KERNEL.softmax(torch.zeros(2, 3, 4))
    with pytest.raises(TypeError):
        KERNEL.softmax(torch.zeros(2, 3, dtype=torch.int32))
    with pytest.raises(ValueError):
        KERNEL.softmax(torch.zeros(2, 3), _path="bogus")


# ------------------------------------------------------------------------------------ overflow trap


def overflow_logits(M: int, N: int) -> torch.Tensor:
    """fp32 logits whose exp overflows: rows shifted by 89 .. 1e4, rows near +-3e38 (the top of fp32)."""
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(M, N, generator=gen) * 6.0
    shifts = torch.tensor([89.0, 300.0, 1e3, 1e4, -1e4, 0.0])[torch.arange(M) % 6]
    x = x + shifts[:, None]
    x[M - 2] = 3.0e38 * (0.5 + 0.5 * torch.rand(N, generator=gen))           # max ~ 3e38
    x[M - 1] = 3.0e38 * (2.0 * torch.rand(N, generator=gen) - 1.0)           # x - max reaches -6e38
    return x


@triton.jit
def _naive_softmax_kernel(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr, PRESCALE: tl.constexpr):
    """Deliberately naive: exp(x) without the max subtraction, or exp2 of x pre-multiplied by log2(e)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf"))
    if PRESCALE:
        x = x * 1.4426950408889634
        p = tl.exp2(x - tl.max(x, axis=0))
    else:
        p = tl.exp(x)
    tl.store(y_ptr + row * N + cols, p / tl.sum(p, axis=0), mask=cols < N)


def naive_softmax(x: torch.Tensor, prescale: bool) -> torch.Tensor:
    y = torch.empty_like(x)
    _naive_softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK_N=triton.next_power_of_2(x.shape[1]),
                                         PRESCALE=prescale)
    return y


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # x - max overflows to -inf on the +-3e38 row, as intended
@pytest.mark.parametrize("overrides", [
    {},                                                               # N <= 1024: tile path
    {"_path": "rows"},
    {"_path": "two_sweep", "_block_n": 256, "_num_progs": 3},
    {"_path": "split", "_block_n": 256, "_chunk": 512},
], ids=["tile", "rows", "two_sweep", "split"])
def test_overflowing_logits_pass_every_path(overrides):
    x = overflow_logits(12, 1000)
    assert failures(spec(12, 1000, "fp32"), lambda t: KERNEL.softmax(t, **overrides), (x,)) == []


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_naive_variants_fail_the_overflow_trap():
    s = spec(12, 1000, "fp32")
    normal = make_inputs(REF, s, seed=3, device="cpu", dist="normal")
    trap = (overflow_logits(12, 1000),)
    for prescale in (False, True):
        def naive(t, prescale=prescale):
            return naive_softmax(t, prescale)
        # The naive kernels are right on ordinary logits, so the trap is what catches them.
        assert failures(s, naive, normal) == []
        assert failures(s, naive, trap) != [], f"prescale={prescale} passed the overflow trap"
