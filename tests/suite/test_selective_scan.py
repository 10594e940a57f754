"""selective_scan: the expert Triton reference (chunked associative scan with a carried fp32 state) against
reference.py (CPU: Triton interpreter, whose tl.associative_scan runs one element at a time, hence the tiny shapes),
plausible mistakes (bf16 state, state reset per chunk, no softplus) shown to fail the check, the input maker's laws
and the doubling-scan baseline."""

from __future__ import annotations

import math
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
TASK = SUITE.load_task("selective_scan")
REF = load_reference(SUITE.task_dir("selective_scan"))
KERNEL = load_module(SUITE.reference_kernels("selective_scan")["triton"], prefix="d2k_test_selective_scan")
DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(batch: int, D: int, L: int, N: int) -> WorkloadSpec:
    params = {"batch": batch, "D": D, "L": L, "N": N}
    return WorkloadSpec.resolve(TASK, Workload(name="t", params=params, dtype="bf16"))


def failures(s: WorkloadSpec, got, expected) -> list[str]:
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, expected) if not m.ok]


# ((batch, D, L, N), config, distribution). Every case has a partial time chunk; D = 5 / 3 partial channel blocks.
# One distribution per case (each ~2 s of CPU under the interpreter); the smoke shape runs all of them below.
CASES = {
    "two_channels_per_program": ((1, 5, 70, 4), {"BLOCK_D": 2, "BLOCK_L": 32}, "fast_decay"),
    "n16_one_channel": ((1, 3, 40, 16), {"BLOCK_D": 1, "BLOCK_L": 32}, "normal"),
    "four_channels_short_chunks": ((2, 3, 37, 8), {"BLOCK_D": 4, "BLOCK_L": 16}, "long_memory"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_config_matches_reference(case):
    dims, config, dist = CASES[case]
    s = spec(*dims)
    inputs = make_inputs(REF, s, seed=30, device=DEVICE, dist=dist)
    got = KERNEL.selective_scan(*inputs, _config=config)
    assert failures(s, got, REF.reference(*inputs)) == [], case


# ------------------------------------------------------------------------------------- wrong answers fail


def _sequential(u, delta, A, B, C, D_skip, z, delta_bias, *, state=torch.float32, reset=0, softplus=True):
    """The recurrence step by step, with a chosen state dtype, optional state resets every ``reset`` steps, and an
    optional softplus."""
    v = delta.float() + delta_bias[None, :, None]
    dt = F.softplus(v) if softplus else v
    h = torch.zeros(u.shape[0], u.shape[1], A.shape[1], dtype=state)
    ys = []
    for t in range(u.shape[2]):
        if reset and t % reset == 0:
            h = torch.zeros_like(h)
        d_a = torch.exp(dt[:, :, t, None] * A[None]).to(state)
        d_bu = ((dt[:, :, t] * u[:, :, t].float())[..., None] * B[:, None, :, t].float()).to(state)
        h = (d_a * h + d_bu).to(state)
        ys.append((h.float() * C[:, None, :, t].float()).sum(-1) + D_skip[None] * u[:, :, t].float())
    return (torch.stack(ys, -1) * F.silu(z.float())).to(u.dtype)


WRONG = {
    "state_in_bf16": {"state": torch.bfloat16},
    "state_reset_every_chunk_of_32": {"reset": 32},
    "no_softplus": {"softplus": False},
}


@pytest.fixture(scope="module")
def honest_runs():
    s = spec(2, 5, 100, 4)
    runs = {}
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=60 + i, device=DEVICE, dist=dist)
        expected = REF.reference(*inputs)
        runs[dist] = (inputs, expected, failures(s, KERNEL.selective_scan(*inputs), expected))
    return s, runs


def test_sequential_emulation_is_honest(honest_runs):
    s, runs = honest_runs
    for inputs, expected, honest in runs.values():
        assert honest == []
        assert failures(s, _sequential(*[t.cpu() for t in inputs]), expected.cpu()) == []


@pytest.mark.parametrize("name", WRONG)
def test_plausible_mistakes_fail(name, honest_runs):
    s, runs = honest_runs
    # The long_memory inputs integrate hundreds of steps per state: every one of these mistakes is O(1) there.
    inputs, expected, _ = runs["long_memory"]
    assert failures(s, _sequential(*[t.cpu() for t in inputs], **WRONG[name]), expected.cpu()), name


def test_zero_constant_and_echo_outputs_fail(honest_runs):
    s, runs = honest_runs
    for inputs, expected, _ in runs.values():
        for fake in (torch.zeros_like(expected), torch.full_like(expected, float(expected.float().mean())),
                     inputs[0].clone()):
            assert failures(s, fake, expected)


# ------------------------------------------------------------------------------------- inputs and baseline


def test_input_maker_follows_the_catalog():
    s = spec(2, 64, 8, 16)
    u, delta, A, B, C, D_skip, z, bias = make_inputs(REF, s, seed=4, device="cpu", dist="normal")
    perturbation = torch.log(-A) - torch.log(torch.arange(1, 17, dtype=torch.float32))[None, :]
    assert 0.07 < float(perturbation.std()) < 0.13  # A_log = log(n+1) + 0.1*N(0,1): not the exact S4D-real init
    dt0 = F.softplus(bias.double())
    assert float(dt0.min()) >= 1e-3 * (1 - 1e-5) and float(dt0.max()) <= 0.1 * (1 + 1e-5)
    assert float(dt0.log().std()) > 0.8  # log-uniform over two decades, not clustered
    assert u.dtype == delta.dtype == B.dtype == z.dtype == torch.bfloat16 and A.dtype == torch.float32
    assert math.isclose(float(REF.inverse_softplus(torch.tensor(0.05, dtype=torch.float64)).exp().log1p()), 0.05,
                        rel_tol=1e-9)


def test_baseline_matches_reference(honest_runs):
    s, runs = honest_runs
    for inputs, expected, _ in runs.values():
        assert failures(s, REF.baseline(*inputs), expected) == []


def test_rejects_bad_inputs():
    u = torch.zeros(1, 3, 10, dtype=torch.bfloat16)
    A, B = torch.zeros(3, 4), torch.zeros(1, 4, 10, dtype=torch.bfloat16)
    ok = (u, u, A, B, B, torch.zeros(3), u, torch.zeros(3))
    with pytest.raises(ValueError):
        KERNEL.selective_scan(*ok[:2], torch.zeros(3, 5), *ok[3:])  # N = 5 with B's N = 4
    with pytest.raises(ValueError):
        KERNEL.selective_scan(u, u[:, :, :9], *ok[2:])
    with pytest.raises(TypeError):
        KERNEL.selective_scan(*ok[:2], A.double(), *ok[3:])


def _stepwise(u, delta, A, B, C, D_skip, z, delta_bias):
    """The recurrence one step per t in float64 (what reference.py computed before its chunked block scan)."""
    dt = F.softplus(delta.double() + delta_bias.double()[None, :, None])
    h = torch.zeros(u.shape[0], u.shape[1], A.shape[1], dtype=torch.float64)
    ys = []
    for t in range(u.shape[-1]):
        h = torch.exp(dt[:, :, t, None] * A.double()) * h + (dt[:, :, t] * u[:, :, t].double())[..., None] * \
            B.double()[:, None, :, t]
        ys.append((h * C.double()[:, None, :, t]).sum(-1) + D_skip.double() * u[:, :, t].double())
    return torch.stack(ys, -1) * F.silu(z.double())


@pytest.mark.parametrize("dist", distributions(REF))
@pytest.mark.parametrize("block_bytes", [1 << 28, 2 * 3 * 4 * 8 * 29])  # one time block; blocks of 29 steps
def test_the_chunked_float64_reference_is_the_stepwise_recurrence(dist, block_bytes, monkeypatch):
    s = spec(2, 3, 103, 4)  # 103 steps: chunks of 11, the last padded (and 29-step blocks: 6 and a padded 5)
    inputs = [t.double() if t.dtype != torch.float32 else t for t in make_inputs(REF, s, seed=31, device="cpu",
                                                                                   dist=dist)]
    monkeypatch.setattr(REF, "_REF_BYTES", block_bytes)
    got = REF.reference(*inputs)
    want = _stepwise(*inputs)
    assert got.dtype == torch.float64
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12), (got - want).abs().max()
