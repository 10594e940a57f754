"""moe_permute: the expert Triton reference against reference.py (CPU, Triton interpreter) with several routing
blocks, scan steps and copy chunks, the input maker's hot experts, and wrong-but-plausible pipelines (ties broken
the other way, an unstable permutation, inclusive offsets, weights over all E experts) that the check catches."""

from __future__ import annotations

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
TASK = SUITE.load_task("moe_permute")
REF = load_reference(SUITE.task_dir("moe_permute"))
KERNEL = load_module(SUITE.reference_kernels("moe_permute")["triton"], prefix="d2k_test_moe_permute")

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(T: int, E: int, k: int, H: int, hot: int = 0, bias: float = 0.0) -> WorkloadSpec:
    params = {"T": T, "E": E, "k": k, "H": H, "hot_experts": hot, "hot_bias": bias}
    return WorkloadSpec.resolve(TASK, Workload(name="t", params=params, dtype="bf16"))


def failures(s: WorkloadSpec, fn, inputs) -> list[str]:
    got = fn(*inputs, **s.scalars)
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, REF.reference(*inputs, **s.scalars)) if not m.ok]


# (T, E, k, H, hot experts, hot bias, overrides): several routing blocks with a partial last one, several scan
# steps and expert groups, copy chunks with a tail, k = 1, k = E, E a power of two below the 32-bin histogram.
CASES = {
    "default": (23, 12, 3, 72, 2, 1.5, {}),
    "small_blocks": (17, 12, 3, 40, 2, 1.5, {"_block_t": 4, "_block_h": 16, "_eg": 4, "_scan_rows": 2}),
    "mixtral_like": (27, 8, 2, 24, 0, 0.0, {"_block_t": 8}),
    "many_experts_top8": (11, 40, 8, 16, 4, 3.0, {"_block_t": 2, "_scan_rows": 4}),
    "k1": (9, 5, 1, 8, 0, 0.0, {}),
    "k_equals_e": (7, 6, 6, 8, 0, 0.0, {"_block_t": 4}),
}


@pytest.mark.parametrize("case", CASES)
def test_matches_reference(case):
    T, E, k, H, hot, bias, overrides = CASES[case]
    s = spec(T, E, k, H, hot, bias)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=70 + i, device="cpu", dist=dist)
        assert failures(s, lambda lg, X, k: KERNEL.moe_permute(lg, X, k, **overrides), inputs) == [], dist


def test_rejects_bad_inputs():
    lg, X = torch.zeros(4, 6), torch.zeros(4, 8, dtype=torch.bfloat16)
    with pytest.raises(ValueError):
        KERNEL.moe_permute(lg, X, 7)
    with pytest.raises(ValueError):
        KERNEL.moe_permute(lg, X[:3], 2)
    with pytest.raises(TypeError):
        KERNEL.moe_permute(lg.double(), X, 2)


def test_hot_experts_follow_the_catalog():
    """skewed_128e_top8: the 4 hot experts (+3.0) take ~44% of the assignments, each in ~89% of tokens."""
    s = spec(4096, 128, 8, 8, 4, 3.0)
    logits, _ = make_inputs(REF, s, seed=1, device="cpu", dist="normal")
    ids = REF.reference(logits, torch.zeros(4096, 8, dtype=torch.bfloat16), k=8)[0]
    assert abs(float((ids < 4).float().mean()) - 0.444) < 0.02
    assert all(abs(float((ids == e).any(dim=1).float().mean()) - 0.89) < 0.03 for e in range(4))
    ties, _ = make_inputs(REF, s, seed=1, device="cpu", dist="quantized_ties")
    assert torch.equal(ties * 4, torch.round(ties * 4))


# ------------------------------------------------------------------------------- wrong-but-plausible pipelines


def ties_high(logits, X, *, k):
    """Right except that equal logits go to the higher expert index first."""
    flipped = REF.reference(logits.flip(-1), X, k=k)
    E = logits.shape[1]
    ids = (E - 1 - flipped[0].long())
    return _permute(logits, X, ids, k)


def _permute(logits, X, ids, k, *, stable=True, inclusive=False, full_softmax=False):
    T, E = logits.shape
    if full_softmax:
        w = torch.softmax(logits.double(), -1).gather(-1, ids).float()
    else:
        w = torch.softmax(logits.double().gather(-1, ids), -1).float()
    flat = ids.flatten()
    if stable:
        order = torch.argsort(flat, stable=True)
    else:  # expert-major, but tokens in descending order within each expert
        order = torch.argsort(flat * (T * k) + (T * k - 1 - torch.arange(T * k)), stable=True)
    row = torch.empty(T * k, dtype=torch.int64)
    row[order] = torch.arange(T * k)
    counts = torch.bincount(flat, minlength=E).cumsum(0)
    offsets = torch.cat([counts, counts[-1:]]) if inclusive else torch.cat([torch.zeros(1, dtype=torch.int64), counts])
    return ids.int(), w, offsets.int(), row.view(T, k).int(), X[order // k]


def canonical_ids(logits, k):
    return torch.sort(logits, dim=-1, descending=True, stable=True).indices[:, :k]


VARIANTS = {
    "ties_to_higher_index": (ties_high, ("quantized_ties",)),
    "unstable_permutation": (lambda lg, X, k: _permute(lg, X, canonical_ids(lg, k), k, stable=False),
                             ("normal", "quantized_ties")),
    "inclusive_offsets": (lambda lg, X, k: _permute(lg, X, canonical_ids(lg, k), k, inclusive=True),
                          ("normal", "quantized_ties")),
    "softmax_over_all_experts": (lambda lg, X, k: _permute(lg, X, canonical_ids(lg, k), k, full_softmax=True),
                                 ("normal", "quantized_ties")),
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_wrong_but_plausible_pipelines_fail(variant):
    fn, caught_on = VARIANTS[variant]
    s = spec(40, 12, 3, 8, 2, 1.5)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=90 + i, device="cpu", dist=dist)
        if dist in caught_on:
            assert failures(s, lambda lg, X, k: fn(lg, X, k=k), inputs) != [], f"{variant} passed {dist}"
    # The honest version of the same pipeline passes both distributions.
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=90 + i, device="cpu", dist=dist)
        assert failures(s, lambda lg, X, k: _permute(lg, X, canonical_ids(lg, k), k), inputs) == [], dist


def test_baseline_matches_reference_without_ties():
    s = spec(64, 16, 4, 32)
    inputs = make_inputs(REF, s, seed=3, device="cpu", dist="normal")
    assert failures(s, REF.baseline, inputs) == []
