"""conv2d_implicit_gemm: the expert Triton reference (pointer and TMA filter loads, channel tails, strides, paddings,
filter shapes) against reference.py (CPU: Triton interpreter), plausible halo mistakes shown to fail the check, and
the launcher's checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from d2kgrade.schema import Workload
from d2kgrade.suite import Suite
from runner.direct import compare_outputs, load_reference
from runner.inputs import WorkloadSpec, distributions, make_inputs
from runner.loading import load_module

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
TASK = SUITE.load_task("conv2d_implicit_gemm")
REF = load_reference(SUITE.task_dir("conv2d_implicit_gemm"))
KERNEL = load_module(SUITE.reference_kernels("conv2d_implicit_gemm")["triton"], prefix="d2k_test_conv2d")
DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(N, H, W, C, K, R, S, stride, pad) -> WorkloadSpec:
    params = dict(N=N, H=H, W=W, C=C, K=K, R=R, S=S, stride=stride, pad=pad)
    return WorkloadSpec.resolve(TASK, Workload(name="t", params=params, dtype="fp16"))


def failures(s: WorkloadSpec, got, expected) -> list[str]:
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, expected) if not m.ok]


SMALL = {"BM": 32, "BN": 16, "BK": 16, "GROUP_M": 2}
# ((N, H, W, C, K, R, S, stride, pad), launcher overrides)
CASES = {
    "ptr_channel_tail": ((2, 13, 11, 24, 40, 3, 3, 1, 1), {}),
    "tma_filters": ((2, 9, 7, 32, 40, 3, 3, 1, 1), {"_use_tma": True}),
    "grouped_small_tiles": ((1, 10, 9, 16, 40, 3, 3, 1, 1), {"_config": SMALL}),
    "stride2_pad2_5x3": ((1, 15, 12, 16, 24, 5, 3, 2, 2), {"_config": SMALL}),
    "stride3_no_pad": ((2, 11, 13, 8, 16, 3, 3, 3, 0), {"_config": SMALL}),
    "pointwise_1x1": ((2, 9, 10, 8, 16, 1, 1, 1, 0), {}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    dims, overrides = CASES[case]
    s = spec(*dims)
    stride, pad = dims[-2], dims[-1]
    for i, dist in enumerate(distributions(REF)):
        x, w = make_inputs(REF, s, seed=10 + i, device=DEVICE, dist=dist)
        got = KERNEL.conv2d(x, w, stride, pad, **overrides)
        assert failures(s, got, REF.reference(x, w, stride=stride, pad=pad)) == [], (case, dist)


# ------------------------------------------------------------------------------------- wrong answers fail


def _halo_shifted(x, w, stride, pad):
    """h = p*stride + r - pad + 1: the padding off by one (a shift of the whole halo)."""
    P = (x.shape[1] + 2 * pad - w.shape[1]) // stride + 1
    Q = (x.shape[2] + 2 * pad - w.shape[2]) // stride + 1
    return REF.reference(x, w, stride=stride, pad=pad + 1)[:, 2:2 + P, 2:2 + Q].contiguous()


def _edges_clamped(x, w, stride, pad):
    """Out-of-image taps read the nearest edge pixel instead of zero (clamped indices, no mask)."""
    xp = F.pad(x.permute(0, 3, 1, 2).double(), (pad, pad, pad, pad), mode="replicate")
    y = F.conv2d(xp, w.permute(0, 3, 1, 2).double(), stride=stride)
    return y.permute(0, 2, 3, 1).to(x.dtype).contiguous()


def _channel_tail_dropped(x, w, stride, pad):
    """Only whole BK = 16 channel chunks: the last C % 16 channels never reach the accumulator."""
    keep = x.shape[3] // 16 * 16
    return REF.reference(x[..., :keep].contiguous(), w[..., :keep].contiguous(), stride=stride, pad=pad)


WRONG = {"halo_off_by_one": _halo_shifted, "edges_clamped": _edges_clamped,
         "channel_tail_dropped": _channel_tail_dropped}


@pytest.fixture(scope="module")
def honest_runs():
    s = spec(2, 13, 11, 24, 40, 3, 3, 1, 1)
    runs = {}
    for i, dist in enumerate(distributions(REF)):
        x, w = make_inputs(REF, s, seed=50 + i, device=DEVICE, dist=dist)
        expected = REF.reference(x, w, stride=1, pad=1)
        runs[dist] = ((x, w), expected, failures(s, KERNEL.conv2d(x, w, 1, 1), expected))
    return s, runs


@pytest.mark.parametrize("name", WRONG)
def test_plausible_mistakes_fail_while_the_kernel_passes(name, honest_runs):
    s, runs = honest_runs
    assert all(honest == [] for _, _, honest in runs.values())
    # Clamped edges hide in the noise of "normal" inputs; "positive" exposes them (and every other mistake).
    (x, w), expected, _ = runs["positive"]
    assert failures(s, WRONG[name](x, w, 1, 1), expected), name


def test_zero_and_constant_outputs_fail(honest_runs):
    s, runs = honest_runs
    for _, expected, _ in runs.values():
        for fake in (torch.zeros_like(expected), torch.full_like(expected, float(expected.float().mean()))):
            assert failures(s, fake, expected)


# ------------------------------------------------------------------------------------- launcher


def test_launcher_checks_and_routing():
    x = torch.zeros(1, 8, 8, 24, dtype=torch.float16)
    w = torch.zeros(16, 3, 3, 24, dtype=torch.float16)
    assert not KERNEL._tma_ok(x, w, 24, 16, 16)  # a 16-channel tile would straddle two taps
    assert KERNEL._tma_ok(x[..., :16], w[..., :16].contiguous(), 16, 16, 16)
    with pytest.raises(ValueError):
        KERNEL.conv2d(x, w, 1, 1, _use_tma=True, _config=SMALL)
    with pytest.raises(ValueError):
        KERNEL.conv2d(x, w[..., :8], 1, 1)
    with pytest.raises(TypeError):
        KERNEL.conv2d(x.float(), w, 1, 1)
    with pytest.raises(ValueError):
        KERNEL.conv2d(x[:, :2, :2], w, 1, 0)  # a 3x3 filter on a 2x2 unpadded image
    for wl in TASK.workloads:  # every catalog layer takes the TMA path on Hopper: BK = 64 divides C
        assert wl.params["C"] % 64 == 0 and wl.params["K"] * 2 % 16 == 0, wl.name


def test_baseline_matches_reference():
    s = spec(2, 9, 7, 24, 40, 3, 3, 1, 1)
    for i, dist in enumerate(distributions(REF)):
        x, w = make_inputs(REF, s, seed=5 + i, device=DEVICE, dist=dist)
        if DEVICE == "cpu":  # CPU conv2d has no fp16 kernel everywhere; the baseline's layout logic is what is tested
            got = REF.baseline(x.float(), w.float(), stride=1, pad=1).to(x.dtype)
        else:
            got = REF.baseline(x, w, stride=1, pad=1)
        assert failures(s, got, REF.reference(x, w, stride=1, pad=1)) == [], dist
