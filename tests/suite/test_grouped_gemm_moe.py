"""grouped_gemm_moe: the expert Triton reference (pointer and TMA-descriptor loads, decode/prefill tile shapes) against
reference.py on irregular routings with empty experts (CPU: Triton interpreter), plausible boundary mistakes shown to
fail the check, the routing laws of the input maker, and the launcher's bucket choice."""

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
TASK = SUITE.load_task("grouped_gemm_moe")
REF = load_reference(SUITE.task_dir("grouped_gemm_moe"))
KERNEL = load_module(SUITE.reference_kernels("grouped_gemm_moe")["triton"], prefix="d2k_test_grouped_gemm")
DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(E: int, T: int, K: int, N: int, routing: str = "zipf_1.2") -> WorkloadSpec:
    params = {"E": E, "T": T, "K": K, "N": N, "routing": routing}
    return WorkloadSpec.resolve(TASK, Workload(name="t", params=params, dtype="fp16"))


def failures(s: WorkloadSpec, got, expected) -> list[str]:
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, expected) if not m.ok]


# (E, T, K, N, routing, launcher overrides). 4 persistent programs; N = 80 / 48 leave partial N tiles (W tile rows
# from the next expert), K = 100 a K tail, the decode shape has one 16-row M tile per expert.
CASES = {
    "ptr_default": (5, 77, 96, 80, "zipf_1.2", {}),
    "ptr_k_tail": (5, 77, 100, 80, "zipf_1.2", {}),
    "tma": (5, 77, 96, 80, "zipf_1.2", {"_use_tma": True}),
    "tma_bm64_grouped": (3, 150, 64, 96, "uniform", {"_use_tma": True,
                                                     "_config": {"BM": 32, "BN": 32, "BK": 32, "GROUP_M": 2}}),
    "decode_bm16": (9, 23, 128, 48, "uniform", {"_config": {"BM": 16, "BN": 16, "BK": 64, "GROUP_M": 1},
                                                 "_num_progs": 3}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    E, T, K, N, routing, overrides = CASES[case]
    s = spec(E, T, K, N, routing)
    for i, dist in enumerate(distributions(REF)):
        X, W, offs = make_inputs(REF, s, seed=20 + i, device=DEVICE, dist=dist)
        got = KERNEL.grouped_gemm(X, W, offs, **overrides)
        assert failures(s, got, REF.reference(X, W, offs)) == [], (case, dist, offs.tolist())


def test_hand_built_offsets_with_runs_of_empty_experts():
    """Empty first, middle and last experts, and one expert holding most rows."""
    s = spec(7, 50, 96, 40)
    X, W, _ = make_inputs(REF, s, seed=1, device=DEVICE, dist="normal")
    offs = torch.tensor([0, 0, 3, 3, 3, 47, 50, 50], dtype=torch.int32, device=DEVICE)
    assert failures(s, KERNEL.grouped_gemm(X, W, offs), REF.reference(X, W, offs)) == []


# ------------------------------------------------------------------------------------- wrong answers fail


def _shift_boundaries(offs: torch.Tensor) -> torch.Tensor:
    """Every inner boundary one row later (a fence-post error): the first row of each expert goes to the one before."""
    out = offs.clone()
    out[1:-1] = torch.minimum(out[1:-1] + 1, out[-1])
    return out


def _compacted_experts(X, W, offs):
    """Experts indexed by their rank among non-empty experts: right until the first empty expert."""
    o = offs.tolist()
    nonempty = [e for e in range(W.shape[0]) if o[e + 1] > o[e]]
    Y = torch.empty((X.shape[0], W.shape[1]), dtype=X.dtype, device=X.device)
    for rank, e in enumerate(nonempty):
        Y[o[e]:o[e + 1]] = (X[o[e]:o[e + 1]].double() @ W[rank].double().T).to(X.dtype)
    return Y


WRONG = {
    "boundary_off_by_one": lambda X, W, offs: REF.reference(X, W, _shift_boundaries(offs)),
    "empty_experts_compacted": _compacted_experts,
    "one_weight_for_all": lambda X, W, offs: (X.double() @ W[0].double().T).to(X.dtype),
}


@pytest.fixture(scope="module")
def honest_runs():
    s = spec(5, 77, 96, 80)
    runs = {}
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=60 + i, device=DEVICE, dist=dist)
        expected = REF.reference(*inputs)
        runs[dist] = (inputs, expected, failures(s, KERNEL.grouped_gemm(*inputs), expected))
    return s, runs


@pytest.mark.parametrize("name", WRONG)
def test_plausible_mistakes_fail_while_the_kernel_passes(name, honest_runs):
    s, runs = honest_runs
    assert all(honest == [] for _, _, honest in runs.values())
    # Each mistake is caught on at least one distribution (the compacted index needs an empty expert).
    assert any(failures(s, WRONG[name](*inputs), expected) for inputs, expected, _ in runs.values()), name


def test_zero_and_constant_outputs_fail(honest_runs):
    s, runs = honest_runs
    for _, expected, _ in runs.values():
        for fake in (torch.zeros_like(expected), torch.full_like(expected, float(expected.float().mean()))):
            assert failures(s, fake, expected)


# ------------------------------------------------------------------------------------- inputs and routing


def test_routing_laws_and_offsets():
    s = spec(64, 4000, 16, 8, "zipf_1.2")
    counts = make_inputs(REF, s, seed=3, device="cpu", dist="normal")[2].diff()
    p = REF.routing_probs(64, "zipf_1.2", "cpu")
    assert abs(float(p[0]) - 0.29) < 0.01  # the catalog: the hottest expert gets ~29% of rows
    assert abs(int(counts[0]) / 4000 - float(p[0])) < 0.04 and bool((counts >= 0).all())
    s = spec(8, 4000, 16, 8, "uniform")
    offs = make_inputs(REF, s, seed=3, device="cpu", dist="normal")[2]
    assert offs[0] == 0 and offs[-1] == 4000 and bool((offs.diff() > 350).all())
    offs = make_inputs(REF, spec(9, 400, 16, 8), seed=3, device="cpu", dist="empty_experts")[2]
    assert offs[-1] == offs[-2] and offs[5] == offs[4]  # the last and the middle expert are empty
    with pytest.raises(ValueError):
        REF.routing_probs(4, "zipf", "cpu")


def test_buckets_and_bounds():
    rows = {w.name: KERNEL.rows_bucket(w.params["T"], w.params["E"]) for w in TASK.workloads}
    assert rows == {"mixtral_prefill": 2, "fine_grained_prefill": 1, "skewed_routing": 1,
                    "decode_fine_grained": 0}
    for w in TASK.workloads:
        assert w.params["K"] * 2 % 16 == 0, w.name  # 16-byte rows: the TMA path on Hopper


def test_rejects_bad_inputs():
    X, W = torch.zeros(4, 16, dtype=torch.float16), torch.zeros(2, 8, 16, dtype=torch.float16)
    with pytest.raises(ValueError):
        KERNEL.grouped_gemm(X, W, torch.tensor([0, 4], dtype=torch.int32))
    with pytest.raises(ValueError):
        KERNEL.grouped_gemm(X, W, torch.tensor([0, 2, 4], dtype=torch.int64))
    with pytest.raises(TypeError):
        KERNEL.grouped_gemm(X.float(), W, torch.tensor([0, 2, 4], dtype=torch.int32))


def test_baseline_matches_reference():
    s = spec(5, 77, 96, 80)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=5 + i, device=DEVICE, dist=dist)
        assert failures(s, REF.baseline(*inputs), REF.reference(*inputs)) == [], dist
