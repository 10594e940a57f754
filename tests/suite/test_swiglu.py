"""swiglu: the expert Triton reference against reference.py (CPU, Triton interpreter) on divisible and masked
column blocks and multi-row tiles, the tiles chosen for the catalog workloads, and the precision trap: silu and
the product computed in bf16 end to end fail the tolerance while the reference kernel (and eager PyTorch) pass,
as do zeros, constants and echo."""

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
TASK = SUITE.load_task("swiglu")
REF = load_reference(SUITE.task_dir("swiglu"))
KERNEL = load_module(SUITE.reference_kernels("swiglu")["triton"], prefix="d2k_test_swiglu")


def spec(T: int, inter: int) -> WorkloadSpec:
    return WorkloadSpec.resolve(TASK, Workload(name="t", params={"T": T, "I": inter}, dtype="bf16"))


def failures(s: WorkloadSpec, fn, inputs) -> list[str]:
    got = fn(*[t.clone() for t in inputs])
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, REF.reference(*inputs)) if not m.ok]


# (T, I, launcher overrides): BLOCK_I dividing I with a partial row tile (the moe_short_rows design at small
# scale), a masked last column block, and the default tile on an I no power of two divides.
CASES = {
    "divisible_blocks": (9, 768, {"_tile_elems": 1024, "_max_block_i": 256}),
    "masked_blocks": (5, 1000, {"_tile_elems": 512, "_max_block_i": 256}),
    "default_tile": (9, 300, {}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    T, inter, overrides = CASES[case]
    s = spec(T, inter)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=90 + i, device="cpu", dist=dist)
        assert failures(s, lambda x: KERNEL.swiglu(x, **overrides), inputs) == [], dist


def test_catalog_workloads_take_their_designed_tiles():
    plans = {w.name: KERNEL._plan(w.params["I"]) for w in TASK.workloads}
    # (ROWS, BLOCK_I, num_warps): 4096-output tiles whose BLOCK_I divides I, so no lane is masked; 8 per thread.
    assert plans == {"prefill_14336": (2, 2048, 16), "decode_wide_rows": (1, 4096, 16), "moe_short_rows": (16, 256, 16)}
    for w in TASK.workloads:
        assert w.params["I"] % plans[w.name][1] == 0
    # The decode shape gets 64 x 13 programs, not 64.
    assert 64 * (53248 // plans["decode_wide_rows"][1]) == 832


def bf16_end_to_end(x):
    """The shortcut: every step of silu(g) * u rounded to bf16 (exp, 1 + e, the reciprocal, both products)."""
    inter = x.shape[1] // 2
    g, u = x[:, :inter], x[:, inter:]
    sig = 1 / (1 + torch.exp(-g))
    return (g * sig) * u


def test_shortcuts_fail_the_tolerance_where_the_kernel_passes():
    s = spec(16, 768)
    caught = []
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=100 + i, device="cpu", dist=dist)
        expected = as_tuple(REF.reference(*inputs))
        assert failures(s, KERNEL.kernel, inputs) == [], dist
        assert failures(s, REF.baseline, inputs) == [], dist
        if failures(s, bf16_end_to_end, inputs):
            caught.append(dist)
        x = inputs[0]
        fakes = {
            "zeros": (torch.zeros_like(expected[0]),),
            "ones": (torch.ones_like(expected[0]),),
            "constant": (torch.full_like(expected[0], float(expected[0].float().mean())),),
            "echo_gate": (x[:, :768].clone(),),
            "echo_up": (x[:, 768:].clone(),),
        }
        for label, fake in fakes.items():
            assert not all(m.ok for m in compare_outputs(s, fake, expected)), f"{dist}: '{label}' passed"
    # Saturated gates make sigmoid exactly 0 or 1 in bf16, so that distribution alone cannot catch it.
    assert {"normal", "outliers"} <= set(caught), f"bf16 end to end failed only on {caught}"
