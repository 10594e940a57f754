"""histogram: both paths of the expert Triton reference against reference.py (CPU, Triton interpreter), the
launcher's routing of the catalog workloads, the input maker's key distributions, and wrong-but-plausible
kernels (a merge without atomics, a dropped edge bin, a dropped tail) that the check must catch."""

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
TASK = SUITE.load_task("histogram")
REF = load_reference(SUITE.task_dir("histogram"))
KERNEL = load_module(SUITE.reference_kernels("histogram")["triton"], prefix="d2k_test_histogram")

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

HOT = "90% of keys = 0, rest uniform"


def spec(N: int, NB: int, dist: str = HOT) -> WorkloadSpec:
    return WorkloadSpec.resolve(TASK, Workload(name="t", params={"N": N, "NB": NB, "dist": dist}, dtype="int32"))


def failures(s: WorkloadSpec, fn, inputs) -> list[str]:
    got = fn(*inputs, **s.scalars)
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, REF.reference(*inputs, **s.scalars)) if not m.ok]


# (N, NB, key dist, launcher overrides): partial last tiles, several tiles per program, NB below one bin per lane
# (NB_P2 = 32), a single bin, and the global path on a non-power-of-two NB.
CASES = {
    "private_hot": (20011, 200, HOT, {}),
    "private_small_tiles": (9001, 200, "uniform", {"_block": 512, "_num_progs": 5}),
    "private_few_bins": (5003, 7, HOT, {"_block": 1024}),
    "private_one_bin": (777, 1, "uniform", {"_block": 256, "_num_progs": 2}),
    "private_1024_bins": (6007, 1024, "uniform", {}),
    "global": (12007, 3000, "uniform", {"_block": 2048}),
    "global_hot": (7001, 1500, "3% of keys = 1499, rest uniform", {"_path": "global", "_num_progs": 2}),
    # the global path's aggregation of each group's two ends: a hot smallest key, a hot largest key, groups cut by
    # the end of the input (N is not a multiple of the group), and no aggregation at all
    "global_hot_low": (6221, 1500, HOT, {"_path": "global", "_block": 2048, "_group": 32, "_num_progs": 2}),
    "global_hot_high": (4133, 1100, "60% of keys = 1099, rest uniform", {"_block": 1024, "_group": 128}),
    "global_no_groups": (5001, 2000, HOT, {"_path": "global", "_block": 1024, "_group": 0}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    N, NB, key_dist, overrides = CASES[case]
    s = spec(N, NB, key_dist)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=20 + i, device="cpu", dist=dist)
        assert failures(s, lambda x, NB: KERNEL.histogram(x, NB, **overrides), inputs) == [], dist


def test_catalog_workloads_take_their_designed_path():
    picks = {w.name: KERNEL._pick_path(w.params["NB"]) for w in TASK.workloads}
    assert picks == {"uniform_256": "private", "hot_bin_256": "private", "vocab_bins": "global"}


def test_rejects_bad_inputs():
    with pytest.raises(TypeError):
        KERNEL.histogram(torch.zeros(8, dtype=torch.int64), 4)
    with pytest.raises(ValueError):
        KERNEL.histogram(torch.zeros(2, 4, dtype=torch.int32), 4)
    with pytest.raises(ValueError):
        KERNEL.histogram(torch.zeros(8, dtype=torch.int32), 4, _path="bogus")
    with pytest.raises(ValueError, match="_group"):
        KERNEL.histogram(torch.zeros(8, dtype=torch.int32), 4000, _block=1024, _group=96)
    with pytest.raises(ValueError, match="_group"):
        KERNEL.histogram(torch.zeros(8, dtype=torch.int32), 4000, _block=1000)
    assert KERNEL.histogram(torch.zeros(0, dtype=torch.int32), 3).tolist() == [0, 0, 0]


def test_key_distributions_follow_the_catalog():
    gen = torch.Generator().manual_seed(0)
    x = REF.draw_keys(HOT, 200_000, 256, generator=gen, device="cpu")
    assert x.dtype == torch.int32 and int(x.min()) >= 0 and int(x.max()) < 256
    assert abs(float((x == 0).float().mean()) - (0.9 + 0.1 / 256)) < 0.005
    u = REF.draw_keys("uniform", 200_000, 256, generator=gen, device="cpu")
    assert int(torch.bincount(u).min()) > 600  # ~781 per bin
    s = spec(50_000, 256)
    (x,) = make_inputs(REF, s, seed=1, device="cpu", dist="hot_tail_runs")
    assert abs(float((x == 255).float().mean()) - 0.25) < 0.01
    assert bool((x[:1024].diff() >= 0).all()), "keys are sorted within runs of 1024"
    with pytest.raises(ValueError):
        REF.draw_keys("zipf", 10, 4, generator=gen, device="cpu")


# ------------------------------------------------------------------------------- wrong-but-plausible kernels


@triton.jit
def _flawed_histogram_kernel(x_ptr, counts_ptr, N, NB, num_progs, BLOCK: tl.constexpr, NB_P2: tl.constexpr,
                             FLAW: tl.constexpr):
    """The private path with one flaw: 0 merges with a plain store (the last program wins, as when the atomics
    race is dropped), 1 drops the last bin at the merge, 2 skips the partial last tile."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([NB_P2], dtype=tl.int32)
    n_tiles = N // BLOCK if FLAW == 2 else tl.cdiv(N, BLOCK)
    for tile in tl.range(pid, n_tiles, num_progs):
        idx = tile * BLOCK + offs
        mask = idx < N
        acc += tl.histogram(tl.load(x_ptr + idx, mask=mask, other=0), NB_P2, mask=mask)
    bins = tl.arange(0, NB_P2)
    if FLAW == 0:
        tl.store(counts_ptr + bins, acc, mask=bins < NB)
    elif FLAW == 1:
        tl.atomic_add(counts_ptr + bins, acc, mask=bins < NB - 1)
    else:
        tl.atomic_add(counts_ptr + bins, acc, mask=bins < NB)


def flawed(flaw: int):
    def run(x, NB):
        counts = torch.zeros(NB, dtype=torch.int32)
        _flawed_histogram_kernel[(3,)](x, counts, x.numel(), NB, 3, BLOCK=1024,
                                       NB_P2=max(32, triton.next_power_of_2(NB)), FLAW=flaw)
        return counts
    return run


def test_wrong_but_plausible_kernels_fail():
    s = spec(10007, 200)
    for flaw in (0, 1, 2):
        caught = []
        for i, dist in enumerate(distributions(REF)):
            inputs = make_inputs(REF, s, seed=40 + i, device="cpu", dist=dist)
            caught.append(failures(s, flawed(flaw), inputs) != [])
        # The edge-bin flaw only shows when the last bin holds keys; hot_tail_runs guarantees it.
        assert caught[1], f"flaw {flaw} passed hot_tail_runs"
        if flaw != 1:
            assert caught[0], f"flaw {flaw} passed the catalog draw"


def test_trivial_outputs_fail_every_distribution():
    s = spec(3001, 200)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=60 + i, device="cpu", dist=dist)
        expected = REF.reference(*inputs, NB=200)
        for fake in (torch.zeros_like(expected), torch.ones_like(expected), torch.full_like(expected, 3001 // 200)):
            assert not all(m.ok for m in compare_outputs(s, fake, expected)), dist
