"""gemm_fp8_blockwise: every path of the expert Triton reference (persistent and split-K, pointer and TMA-descriptor
loads) against reference.py on irregular shapes (CPU: Triton interpreter), plausible wrong scale handling shown to
fail the check, the input maker's quantization, and the launcher's routing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from d2kgrade.schema import Workload
from d2kgrade.suite import Suite
from runner.direct import compare_outputs, load_reference
from runner.inputs import WorkloadSpec, distributions, make_inputs
from runner.loading import load_module

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
TASK = SUITE.load_task("gemm_fp8_blockwise")
REF = load_reference(SUITE.task_dir("gemm_fp8_blockwise"))
KERNEL = load_module(SUITE.reference_kernels("gemm_fp8_blockwise")["triton"], prefix="d2k_test_gemm_fp8")
DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(M: int, N: int, K: int) -> WorkloadSpec:
    return WorkloadSpec.resolve(TASK, Workload(name="t", params={"M": M, "N": N, "K": K}, dtype="fp8_e4m3"))


def failures(s: WorkloadSpec, got, expected) -> list[str]:
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, expected) if not m.ok]


PERSISTENT = {"BM": 16, "BN": 64, "BK": 128, "GROUP_M": 2}
# (M, N, K, launcher overrides). 4 programs on the persistent path, 5 x 4 tiles of 16 x 64: several tiles each
# and a partial last group; M = 45 / 67 leave partial M tiles, K = 384 three scale blocks.
CASES = {
    "splitk_default_m45": (45, 256, 384, {}),
    "splitk_3_slices_ptr": (45, 256, 384, {"_path": "splitk", "_split_k": 3}),
    "splitk_2_slices_tma": (45, 256, 384, {"_path": "splitk", "_split_k": 2, "_use_tma": True}),
    "splitk_1_slice_direct_store": (7, 128, 256, {"_path": "splitk", "_split_k": 1}),
    "persistent_ptr": (67, 256, 256, {"_path": "persistent", "_config": PERSISTENT}),
    "persistent_tma": (67, 256, 256, {"_path": "persistent", "_config": PERSISTENT, "_use_tma": True}),
    "persistent_tma_bn128": (67, 384, 128, {"_path": "persistent", "_use_tma": True,
                                            "_config": {"BM": 32, "BN": 128, "BK": 128, "GROUP_M": 8}}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    M, N, K, overrides = CASES[case]
    s = spec(M, N, K)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=40 + i, device=DEVICE, dist=dist)
        got = KERNEL.gemm_fp8_blockwise(*inputs, **overrides)
        assert failures(s, got, REF.reference(*inputs)) == [], (case, dist)


# ------------------------------------------------------------------------------------- wrong answers fail


def _unscaled(A, B):
    return A.double() @ B.double().T


WRONG = {
    # One scale per tensor: the mean activation scale and the mean weight scale.
    "per_tensor_scales": lambda A, B, a_s, b_s: _unscaled(A, B) * a_s.double().mean() * b_s.double().mean(),
    # Scales of the first K block applied to the whole row / weight block row.
    "first_block_scale_only": lambda A, B, a_s, b_s: (
        _unscaled(A, B) * a_s.double()[:, :1] * b_s.double()[:, 0].repeat_interleave(128)[None, :]),
    # The weight-scale row picked per 64 columns instead of per 128 (b_s[n // 64], wrapped).
    "weight_scale_per_64_columns": lambda A, B, a_s, b_s: REF.reference(
        A, B, a_s, b_s.repeat_interleave(2, dim=0)[: b_s.shape[0]].contiguous()),
    # The last K block dropped (a loop bound off by one).
    "last_k_block_dropped": lambda A, B, a_s, b_s: REF.reference(
        A[:, :-128].contiguous(), B[:, :-128].contiguous(), a_s[:, :-1].contiguous(), b_s[:, :-1].contiguous()),
}


@pytest.fixture(scope="module")
def honest_runs():
    """Per distribution: inputs, the reference's answer, and the honest kernel's failures (none expected)."""
    s = spec(45, 256, 384)
    runs = {}
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=70 + i, device=DEVICE, dist=dist)
        expected = REF.reference(*inputs)
        runs[dist] = (inputs, expected, failures(s, KERNEL.gemm_fp8_blockwise(*inputs), expected))
    return s, runs


@pytest.mark.parametrize("name", WRONG)
def test_plausible_mistakes_fail_while_the_kernel_passes(name, honest_runs):
    s, runs = honest_runs
    assert all(honest == [] for _, _, honest in runs.values())
    inputs, expected, _ = runs["block_scaled"]
    assert failures(s, WRONG[name](*inputs).to(torch.bfloat16), expected), f"{name} passed on block_scaled"


def test_zero_and_constant_outputs_fail():
    s = spec(45, 256, 384)
    for i, dist in enumerate(distributions(REF)):
        expected = REF.reference(*make_inputs(REF, s, seed=90 + i, device=DEVICE, dist=dist))
        for fake in (torch.zeros_like(expected), torch.full_like(expected, float(expected.float().mean()))):
            assert failures(s, fake, expected), dist


# ------------------------------------------------------------------------------------- inputs and routing


def test_input_maker_quantizes_per_group_and_block():
    s = spec(45, 256, 384)
    for dist in distributions(REF):
        A, B, a_s, b_s = make_inputs(REF, s, seed=3, device="cpu", dist=dist)
        # Every 1x128 group of A and every 128x128 block of B reaches the e4m3 maximum (scale = amax / 448).
        assert torch.equal(A.float().abs().view(45, 3, 128).amax(-1), torch.full((45, 3), 448.0))
        assert torch.equal(B.float().abs().view(2, 128, 3, 128).amax((1, 3)), torch.full((2, 3), 448.0))
        assert a_s.shape == (45, 3) and b_s.shape == (2, 3) and bool((a_s > 0).all()) and bool((b_s > 0).all())
    a_n = make_inputs(REF, s, seed=3, device="cpu", dist="normal")[2]
    a_b = make_inputs(REF, s, seed=3, device="cpu", dist="block_scaled")[2]
    spread = lambda a: float((a.log2().amax(1) - a.log2().amin(1)).mean())  # noqa: E731
    assert spread(a_b) > 1.5 > 0.75 > spread(a_n)  # block_scaled: the 3 scales of a row span binades


def test_routing_and_split():
    assert KERNEL._pick_path(32) == "splitk" and KERNEL._pick_path(64) == "splitk"
    assert KERNEL._pick_path(65) == "persistent" and KERNEL._pick_path(8192) == "persistent"
    # decode_m32 on 132 SMs: 112 N-tiles of 64 x 4 K-slices = 448 programs.
    assert KERNEL._split_k(32, 7168, 18432, 32, 64, 132) == 4
    assert KERNEL._split_k(32, 7168, 256, 32, 64, 132) == 1  # too few K blocks to split
    for w in TASK.workloads:
        N, K = w.params["N"], w.params["K"]
        assert N % 128 == 0 and K % 128 == 0 and K % 16 == 0, w.name  # TMA-aligned rows, whole scale blocks


def test_rejects_bad_inputs():
    A = torch.zeros(4, 256, dtype=torch.float8_e4m3fn)
    B = torch.zeros(128, 256, dtype=torch.float8_e4m3fn)
    a_s, b_s = torch.ones(4, 2), torch.ones(1, 2)
    with pytest.raises(ValueError):
        KERNEL.gemm_fp8_blockwise(A[:, :200], B[:, :200], a_s, b_s)  # K not a multiple of 128
    with pytest.raises(TypeError):
        KERNEL.gemm_fp8_blockwise(A.float(), B, a_s, b_s)
    with pytest.raises(ValueError):
        KERNEL.gemm_fp8_blockwise(A, B, a_s[:, :1], b_s)


def test_baseline_matches_reference():
    """On CPU the baseline is the dequantize + bf16 F.linear fallback; on a GPU with cuBLAS blockwise scaling it
    is torch._scaled_mm: either way it must give the reference's answer."""
    s = spec(45, 256, 384)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=5 + i, device=DEVICE, dist=dist)
        assert failures(s, REF.baseline(*inputs), REF.reference(*inputs)) == [], dist
