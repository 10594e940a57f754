"""topk: every path of the expert Triton reference against reference.py (CPU, Triton interpreter), the launcher's
routing of the catalog workloads, and the tie-aware check: valid indices among tied values pass (also through
run_trials), duplicated, out-of-range or misplaced indices fail."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from d2kgrade.schema import Workload
from d2kgrade.suite import Suite
from runner.direct import checked_outputs, compare_outputs, load_reference, run_trials
from runner.inputs import WorkloadSpec, distributions, make_inputs
from runner.loading import load_module

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
TASK = SUITE.load_task("topk")
REF = load_reference(SUITE.task_dir("topk"))
KERNEL = load_module(SUITE.reference_kernels("topk")["triton"], prefix="d2k_test_topk")

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(B: int, V: int, k: int, dtype: str) -> WorkloadSpec:
    return WorkloadSpec.resolve(TASK, Workload(name="t", params={"B": B, "V": V, "k": k}, dtype=dtype))


def failures(s: WorkloadSpec, fn, inputs) -> list[str]:
    got = fn(*inputs, **s.scalars)
    expected = REF.reference(*inputs, **s.scalars)
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, expected, inputs=inputs, ref=REF) if not m.ok]


# (B, V, k, dtype, launcher overrides): router tiles with partial rows/columns and non-power-of-two k; the rows
# path with several rows per program, candidates in several tiles and an overflowing candidate buffer (the row
# fallback); the split path with two and three chunks, with and without overflowing segments.
CASES = {
    "router_fp32": (5, 50, 5, "fp32", {}),
    "router_bf16_k_eq_v": (6, 24, 24, "bf16", {"_rows": 4}),
    "rows_fp32": (3, 1200, 13, "fp32", {"_path": "rows", "_tile": 512, "_num_progs": 2}),
    "rows_bf16_overflow": (2, 1100, 9, "bf16", {"_path": "rows", "_tile": 256, "_cap": 16}),
    "split_fp32": (2, 1100, 7, "fp32", {"_path": "split", "_tile": 256, "_split": 2}),
    "split_bf16_overflow": (1, 1500, 16, "bf16", {"_path": "split", "_tile": 256, "_split": 3, "_cap": 8}),
    # the rows path's refining pass (off by default): bucket over the cap, then candidates from the buffer or,
    # when the 12-bit bucket still overflows, from the row; and the default cap (only the negative draw refines)
    "rows_fp32_refine": (3, 1200, 13, "fp32", {"_path": "rows", "_tile": 512, "_cap": 8, "_refine": True}),
    "rows_bf16_refine_overflow": (2, 1100, 9, "bf16", {"_path": "rows", "_tile": 256, "_cap": 2, "_refine": True}),
    "rows_fp32_refine_default_cap": (3, 1200, 13, "fp32", {"_path": "rows", "_tile": 512, "_refine": True}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    B, V, k, dtype, overrides = CASES[case]
    s = spec(B, V, k, dtype)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=10 + i, device="cpu", dist=dist)
        got = KERNEL.topk(*inputs, k, **overrides)
        assert failures(s, lambda x, k: got, inputs) == [], dist
        # The expert kernel makes the canonical choice among ties (lower index first), so it matches exactly.
        assert torch.equal(got[1], REF.reference(*inputs, k=k)[1]), dist


def test_overflow_cases_really_overflow():
    """rows_bf16_overflow's cap (16) is smaller than every row's threshold bucket, so the row fallback runs."""
    s = spec(2, 1100, 9, "bf16")
    for i, dist in enumerate(distributions(REF)):
        (x,) = make_inputs(REF, s, seed=10 + i, device="cpu", dist=dist)
        bits = x.view(torch.int16).int()
        skey = torch.where(bits < 0, bits ^ 0x7FFF, bits) << 16
        digit = ((skey ^ -2147483648) >> 26) & 63  # the pass-1 digit: sign + top exponent bits
        kth = torch.sort(digit, dim=1, descending=True).values[:, 8:9]
        assert int((digit == kth).sum(1).min()) > 16, dist


def _bucket_sizes(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, how many keys share the k-th largest key's top 6 bits (the first pass's bucket) and its top 12
    bits (the refining pass's), from the same order-preserving keys as the kernel."""
    if x.dtype == torch.bfloat16:
        bits = x.view(torch.int16).long()
        skey = torch.where(bits < 0, bits ^ 0x7FFF, bits) << 16
    else:
        bits = x.view(torch.int32).long()
        skey = torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
    u = skey + 2**31  # the unsigned key, as int64
    sizes = []
    for shift in (26, 20):
        d = u >> shift
        kth = torch.sort(d, dim=1, descending=True).values[:, k - 1:k]
        sizes.append((d == kth).sum(1))
    return sizes[0], sizes[1]


def test_refine_cases_take_the_paths_they_name():
    """rows_fp32_refine's first bucket overflows its cap on every row and the 12-bit bucket fits it on some;
    rows_bf16_refine_overflow's 12-bit bucket still overflows on some, so the row fallback runs after refining."""
    for case, fits in (("rows_fp32_refine", True), ("rows_bf16_refine_overflow", False)):
        B, V, k, dtype, overrides = CASES[case]
        s = spec(B, V, k, dtype)
        first, second = [], []
        for i, dist in enumerate(distributions(REF)):
            (x,) = make_inputs(REF, s, seed=10 + i, device="cpu", dist=dist)
            a, b = _bucket_sizes(x, k)
            first.append(a)
            second.append(b)
        first, second = torch.cat(first), torch.cat(second)
        assert int(first.min()) > overrides["_cap"], case
        assert bool((second <= overrides["_cap"]).any()) if fits else bool((second > overrides["_cap"]).any()), case


def test_refining_is_off_by_default():
    """Not yet timed on the H200: the default launch keeps the measured path."""
    assert KERNEL._REFINE_OVERFLOW is False


def test_catalog_workloads_take_their_designed_path():
    picks = {w.name: KERNEL._pick_path(w.params["B"], w.params["V"], w.params["k"], 132) for w in TASK.workloads}
    assert picks == {"sampling_k50": "rows", "sparse_attention_k2048": "rows", "moe_router_k8": "router",
                     "bf16_ties_k256": "split"}


def test_rejects_bad_inputs():
    with pytest.raises(ValueError):
        KERNEL.topk(torch.zeros(2, 3), 4)
    with pytest.raises(TypeError):
        KERNEL.topk(torch.zeros(2, 3, dtype=torch.int32), 1)
    with pytest.raises(ValueError):
        KERNEL.topk(torch.zeros(2, 3, 4), 1)


# ------------------------------------------------------------------------------- the tie-aware check


def ties_to_higher_index(x, *, k):
    """An honest alternative: equal values in decreasing index order (what another radix select may return)."""
    V = x.shape[1]
    flipped = torch.sort(x.double().flip(-1), dim=-1, descending=True, stable=True).indices[:, :k]
    idx = V - 1 - flipped
    return x.gather(-1, idx), idx


def first_match_per_value(x, *, k):
    """Plausible but wrong: for each top value, the first index holding that value (repeats among ties)."""
    values = REF.reference(x, k=k)[0]
    idx = (x[:, None, :] == values[:, :, None]).int().argmax(dim=-1)
    return values, idx


def test_valid_tie_choices_pass_and_duplicates_fail():
    s = spec(6, 700, 40, "bf16")
    assert checked_outputs(REF) == ("indices",)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=40 + i, device="cpu", dist=dist)
        want = REF.reference(*inputs, k=40)
        alt = ties_to_higher_index(*inputs, k=40)
        assert not torch.equal(alt[1], want[1]), "the draw has no ties at all"
        assert failures(s, ties_to_higher_index, inputs) == [], dist
        assert failures(s, REF.baseline, inputs) == [], dist  # torch.topk, whatever its tie order
        # Without the reference module the comparison is elementwise, so only the canonical choice passes.
        assert not all(m.ok for m in compare_outputs(s, alt, want))
        assert failures(s, first_match_per_value, inputs) != [], f"{dist}: repeated tie indices passed"


def test_check_rejects_invalid_indices():
    s = spec(3, 300, 10, "fp32")
    (x,) = make_inputs(REF, s, seed=5, device="cpu", dist="normal")
    values, idx = REF.reference(x, k=10)

    def bad(mutate):
        got = mutate(values.clone(), idx.clone())
        return [m for m in compare_outputs(s, got, (values, idx), inputs=(x,), ref=REF) if not m.ok]

    def out_of_range(v, i):
        i[1, 3] = 300
        return v, i

    def next_best(v, i):  # the 11th largest instead of the 10th: values stay, the index points elsewhere
        i[:, 9] = torch.sort(x, dim=1, descending=True).indices[:, 10]
        return v, i

    def duplicate(v, i):
        i[2, 1] = i[2, 0]
        return v, i

    def wrong_value(v, i):
        v[0, 0] = v[0, 1]
        return v, i

    for mutate in (out_of_range, next_best, duplicate, wrong_value):
        assert bad(mutate), mutate.__name__
    assert bad(lambda v, i: (v, i.int()))  # int32 indices
    assert not bad(lambda v, i: (v, i))


def test_run_trials_uses_the_check():
    """The suite runner hands inputs and the reference module to the comparison: a valid non-canonical tie
    choice passes the smoke workload on every distribution, a repeated index does not."""
    ok = run_trials(TASK, REF, ties_to_higher_index, "smoke", seed=3)
    assert all(t.ok for t in ok), [(t.dist, m.reason) for t in ok for m in t.outputs if not m.ok]
    wrong = run_trials(TASK, REF, first_match_per_value, "smoke", seed=3)
    assert not all(t.ok for t in wrong)
