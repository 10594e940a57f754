"""transpose: both kernels (pointer tiles and TMA descriptors) of the expert Triton reference against
reference.py (CPU, Triton interpreter) on irregular, skinny and multi-tile shapes, the aspect-aware tile choice for
the catalog workloads, and the trap: copying through a narrower dtype fails the exact tolerance while the
reference kernel passes, as do zeros, constants and the untransposed input."""

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
TASK = SUITE.load_task("transpose")
REF = load_reference(SUITE.task_dir("transpose"))
KERNEL = load_module(SUITE.reference_kernels("transpose")["triton"], prefix="d2k_test_transpose")


def spec(M: int, N: int, dtype: str) -> WorkloadSpec:
    return WorkloadSpec.resolve(TASK, Workload(name="t", params={"M": M, "N": N}, dtype=dtype))


def failures(s: WorkloadSpec, fn, inputs) -> list[str]:
    got = fn(*[t.clone() for t in inputs])
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, REF.reference(*inputs)) if not m.ok]


# (M, N, dtype, launcher overrides). TMA needs 16-byte-aligned row strides on both sides, so its shapes are
# multiples of 8 (bf16) or 4 (fp32) while still leaving partial boxes at the edges.
CASES = {
    "pointer_irregular": (45, 83, "fp32", {"_path": "pointer"}),
    "pointer_multi_tile_bf16": (45, 83, "bf16", {"_path": "pointer", "_max_side": 16}),
    "pointer_skinny_cols": (300, 16, "bf16", {"_path": "pointer", "_max_side": 64}),
    "pointer_skinny_rows": (8, 200, "fp32", {"_path": "pointer", "_max_side": 64}),
    "tma_partial_boxes": (40, 88, "fp32", {"_path": "tma", "_max_side": 16}),
    "tma_bf16": (56, 72, "bf16", {"_path": "tma", "_max_side": 32}),
    "tma_skinny_cols": (296, 16, "bf16", {"_path": "tma", "_max_side": 64}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    M, N, dtype, overrides = CASES[case]
    s = spec(M, N, dtype)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=70 + i, device="cpu", dist=dist)
        assert failures(s, lambda x: KERNEL.transpose(x, **overrides), inputs) == [], dist


def test_catalog_workloads_take_aspect_aware_tiles():
    tiles = {w.name: KERNEL._tiles(w.params["M"], w.params["N"], 2 if w.dtype == "bf16" else 4, None)
             for w in TASK.workloads}
    assert tiles == {"square_bf16": (64, 64), "rect_fp32": (64, 64), "tall_skinny_bf16": (128, 16)}
    # TMA boxes are at most 256 per side.
    assert KERNEL._tiles(16777216, 16, 2, KERNEL.TMA_MAX_BOX) == (128, 16)
    with pytest.raises(ValueError):
        KERNEL.transpose(torch.zeros(4, 4), _path="bogus")


def through(dtype: torch.dtype):
    def narrow_copy(X):
        """The shortcut: the data takes a trip through a narrower dtype on the way."""
        return X.to(dtype).t().contiguous().to(X.dtype)
    return narrow_copy


@pytest.mark.parametrize("dtype,narrow", [("fp32", torch.bfloat16), ("bf16", torch.float16)])
def test_shortcuts_fail_the_tolerance_where_the_kernel_passes(dtype, narrow):
    s = spec(48, 48, dtype)  # square, so echoing the untransposed input has the right shape
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=80 + i, device="cpu", dist=dist)
        expected = as_tuple(REF.reference(*inputs))
        assert failures(s, KERNEL.kernel, inputs) == [], dist
        if dtype == "fp32" or dist == "specials":  # bf16 -> fp16 -> bf16 is exact for N(0,1) data
            assert failures(s, through(narrow), inputs) != [], f"{dist}: a copy through {narrow} passed"
        fakes = {
            "zeros": (torch.zeros_like(expected[0]),),
            "ones": (torch.ones_like(expected[0]),),
            "constant": (torch.full_like(expected[0], float(expected[0].float().nan_to_num().mean())),),
            "echo": (inputs[0].clone(),),
        }
        for label, fake in fakes.items():
            assert not all(m.ok for m in compare_outputs(s, fake, expected)), f"{dist}: '{label}' passed"
