"""embedding_bag: every path of the expert Triton reference against reference.py (CPU, Triton interpreter): short
bags, long bags split into tail work items, bf16 small-D packing, both cache policies; the input maker against the
catalog (skewed bag construction, Zipf rows_read); and wrong-but-plausible kernels (weights ignored, long-bag
tails dropped, repeated indices deduplicated) that the check must catch."""

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
TASK = SUITE.load_task("embedding_bag")
REF = load_reference(SUITE.task_dir("embedding_bag"))
KERNEL = load_module(SUITE.reference_kernels("embedding_bag")["triton"], prefix="d2k_test_embedding_bag")

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

SKEWED = "{} bags of {} lookups + {} bags sharing the rest (see semantics), Zipf(1.05) indices"


def spec(V: int, D: int, B: int, nnz: int, dist: str, dtype: str) -> WorkloadSpec:
    params = {"V": V, "D": D, "B": B, "nnz": nnz, "rows_read": nnz, "dist": dist}
    return WorkloadSpec.resolve(TASK, Workload(name="t", params=params, dtype=dtype))


def failures(s: WorkloadSpec, fn, inputs) -> list[str]:
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, fn(*inputs), REF.reference(*inputs)) if not m.ok]


# (V, D, B, nnz, dist, dtype, launcher overrides)
CASES = {
    # two 100-lookup bags (> LONG = 64: one tail item each) among short and empty bags; D = 40 masked to 64
    "long_bags_bf16": (3000, 40, 23, 400, SKEWED.format(2, 100, 21), "bf16", {"_long": 64}),
    # many tail items per bag and a tail grid smaller than the item count, uniform-index cache policy forced
    "many_tail_items_fp32": (3000, 24, 9, 200, SKEWED.format(1, 150, 8), "fp32",
                             {"_long": 16, "_chunk": 24, "_tail_progs": 3, "_hot_rows": False}),
    # D = 32 bf16: 8 bags per program; no bag reaches LONG, so the tail kernel finds no work
    "small_d_packing": (5000, 32, 35, 560, "16 per bag, uniform indices", "bf16", {"_hot_rows": True}),
    # D = 128 fp32, 2 bags per program, a partial last step
    "wide_rows_fp32": (4000, 128, 7, 91, "13 per bag, uniform indices", "fp32", {}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    V, D, B, nnz, dist, dtype, overrides = CASES[case]
    s = spec(V, D, B, nnz, dist, dtype)
    for i, d in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=11 + i, device="cpu", dist=d)
        assert failures(s, lambda *t: KERNEL.embedding_bag(*t, **overrides), inputs) == [], d


def test_empty_bags_and_bags_per_program():
    s = spec(100, 8, 6, 10, "x", "fp32")
    gen = torch.Generator().manual_seed(0)
    table = torch.randn(100, 8, generator=gen)
    indices = torch.randint(0, 100, (10,), generator=gen)
    offsets = torch.tensor([0, 0, 4, 4, 4, 10, 10])  # empty bags first, in the middle and last
    psw = torch.randn(10, generator=gen)
    got = KERNEL.embedding_bag(table, indices, offsets, psw, _bags=4)
    assert failures(s, lambda *t: got, (table, indices, offsets, psw)) == []
    assert torch.equal(got[[0, 2, 3, 5]], torch.zeros(4, 8))
    assert [KERNEL._bags_per_program(d, 8) for d in (256, 128, 64, 32, 8)] == [1, 2, 4, 32, 32]


def test_skew_probe_flags_zipf_not_uniform():
    def flag(indices):
        f = torch.empty(1, dtype=torch.int32)
        c = torch.full((1,), 7, dtype=torch.int32)
        KERNEL._index_probe_kernel[(1,)](indices, f, c, indices.numel(), max(1, indices.numel() // 32), SAMPLES=32)
        assert int(c) == 0
        return int(f)
    gen = torch.Generator().manual_seed(0)
    assert flag(torch.randint(0, 1_000_000, (4096,), generator=gen)) == 0
    assert flag(REF.draw_indices(SKEWED.format(1, 1, 1), 100, 4096, generator=gen, device="cpu")) == 1
    assert flag(torch.arange(20)) == 0  # fewer indices than samples: the padding never counts as repeats


def test_input_maker_follows_the_catalog():
    gen = torch.Generator().manual_seed(0)
    pattern = SKEWED.format(64, 32768, 65472)
    lengths = REF.bag_lengths(pattern, 65536, 4194304, generator=gen, device="cpu")
    assert int(lengths.sum()) == 4194304 and int((lengths == 32768).sum()) == 64
    rest = lengths[lengths != 32768]
    assert rest.numel() == 65472 and abs(float(rest.float().mean()) - 32.03) < 0.01 and int((rest == 0).sum()) > 0
    assert round(REF.expected_distinct_rows(4_000_000, 4194304, 1.05)) == 660050
    assert abs(float(REF.zipf_weights(4_000_000, 1.05, "cpu")[:117_000].sum()) - 0.84) < 0.01
    idx = REF.draw_indices("64 per bag, uniform indices", 1000, 64000, generator=gen, device="cpu")
    assert idx.dtype == torch.int64 and int(idx.min()) >= 0 and int(idx.max()) < 1000
    with pytest.raises(ValueError):
        REF.bag_lengths("10 per bag, uniform indices", 7, 71, generator=gen, device="cpu")


def test_rejects_bad_inputs():
    t = torch.zeros(10, 4)
    i = torch.zeros(3, dtype=torch.int64)
    o = torch.tensor([0, 3])
    w = torch.ones(3)
    with pytest.raises(TypeError):
        KERNEL.embedding_bag(t, i.int(), o, w)
    with pytest.raises(ValueError):
        KERNEL.embedding_bag(t, i, o, w[:2])
    with pytest.raises(TypeError):
        KERNEL.embedding_bag(t.int(), i, o, w)


# ------------------------------------------------------------------------------- wrong-but-plausible kernels


def weights_ignored(table, indices, offsets, psw):
    return REF.reference(table, indices, offsets, torch.ones_like(psw))


def tails_dropped(table, indices, offsets, psw, cap=64):
    """Every bag capped at its first `cap` lookups (a per-bag kernel with no split path)."""
    pos = torch.arange(indices.numel())
    bag = torch.repeat_interleave(torch.arange(offsets.numel() - 1), offsets.diff())
    return REF.reference(table, indices, offsets, psw * (pos < offsets[bag] + cap))


def repeats_deduplicated(table, indices, offsets, psw):
    """Each bag's repeated rows counted once (with the first occurrence's weight)."""
    out = torch.zeros(offsets.numel() - 1, table.shape[1])
    for b in range(offsets.numel() - 1):
        lo, hi = int(offsets[b]), int(offsets[b + 1])
        seen: dict[int, float] = {}
        for i in range(lo, hi):
            seen.setdefault(int(indices[i]), float(psw[i]))
        for r, w in seen.items():
            out[b] += w * table[r].float()
    return out


def test_wrong_but_plausible_kernels_fail():
    s = spec(3000, 16, 23, 400, SKEWED.format(2, 100, 21), "fp32")
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=81 + i, device="cpu", dist=dist)
        assert failures(s, KERNEL.kernel, inputs) == []
        assert failures(s, weights_ignored, inputs) != [], f"{dist}: ignoring the weights passed"
        assert failures(s, tails_dropped, inputs) != [], f"{dist}: dropping long-bag tails passed"
        expected = REF.reference(*inputs)
        assert not all(m.ok for m in compare_outputs(s, torch.zeros_like(expected), expected))
    inputs = make_inputs(REF, s, seed=99, device="cpu", dist="repeats_positive")
    assert failures(s, repeats_deduplicated, inputs) != [], "deduplicating repeated rows passed"
