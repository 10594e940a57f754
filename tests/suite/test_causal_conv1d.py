"""causal_conv1d: both paths of the expert Triton reference against reference.py (CPU, Triton interpreter), the
reference against the catalog's per-sequence F.conv1d formula, the packed-boundary maker, and kernels that leak
across sequence starts or drop the bias, which the check must catch."""

from __future__ import annotations

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
TASK = SUITE.load_task("causal_conv1d")
REF = load_reference(SUITE.task_dir("causal_conv1d"))
KERNEL = load_module(SUITE.reference_kernels("causal_conv1d")["triton"], prefix="d2k_test_causal_conv1d")

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(B: int, L: int, D: int, W: int, nseq: int) -> WorkloadSpec:
    return WorkloadSpec.resolve(TASK, Workload(name="t", params={"B": B, "L": L, "D": D, "W": W, "nseq": nseq},
                                               dtype="bf16"))


def failures(s: WorkloadSpec, fn, inputs) -> list[str]:
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, fn(*inputs), REF.reference(*inputs)) if not m.ok]


# (B, L, D, W, nseq, launcher overrides): partial L and D tiles, tiles that straddle many short sequences, W other
# than 4 (W_P2 > W on the tile path), and the rolling path with runs that start mid-sequence.
CASES = {
    "tile_dense": (2, 70, 136, 4, 0, {}),
    "tile_packed": (1, 260, 72, 4, 9, {}),
    "tile_packed_small_tiles_w5": (1, 45, 24, 5, 8, {"_block_l": 16, "_block_d": 16}),
    "tile_dense_w2": (3, 33, 24, 2, 0, {"_block_l": 16}),
    "rolling_packed": (1, 50, 24, 4, 8, {"_path": "rolling", "_run": 16}),
    "rolling_dense_w3": (2, 24, 24, 3, 0, {"_path": "rolling", "_run": 16}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    B, L, D, W, nseq, overrides = CASES[case]
    s = spec(B, L, D, W, nseq)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=30 + i, device="cpu", dist=dist)
        assert failures(s, lambda *t: KERNEL.causal_conv1d(*t, **overrides), inputs) == [], dist


def test_kernel_accepts_absent_cu_seqlens():
    s = spec(2, 50, 24, 4, 0)
    x, w, b, cu = make_inputs(REF, s, seed=3, device="cpu", dist="normal")
    assert torch.equal(KERNEL.kernel(x, w, b, None), KERNEL.kernel(x, w, b, cu))


def test_reference_matches_catalog_formula_per_sequence():
    """The chunked float64 taps equal F.conv1d(padding=W-1, groups=D) applied to each packed sequence."""
    s = spec(1, 70, 12, 4, 9)
    for dist in distributions(REF):
        x, w, b, cu = make_inputs(REF, s, seed=5, device="cpu", dist=dist)
        want = torch.empty_like(x)
        bounds = cu.tolist()
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            seg = x[:, lo:hi].transpose(1, 2).double()
            y = F.conv1d(seg, w.double()[:, None, :], b.double(), padding=3, groups=12)[..., :hi - lo]
            want[:, lo:hi] = F.silu(y).transpose(1, 2).to(torch.bfloat16)
        assert torch.equal(REF.reference(x, w, b, cu), want), dist


def test_boundaries_follow_the_catalog():
    gen = torch.Generator().manual_seed(0)
    cu = REF.draw_boundaries(65536, 512, clustered=False, generator=gen, device="cpu")
    lengths = cu.diff()
    assert cu.dtype == torch.int32 and cu.numel() == 513 and int(cu[0]) == 0 and int(cu[-1]) == 65536
    assert int(lengths.min()) >= 1 and abs(float(lengths.float().mean()) - 128.0) < 1e-9
    assert int(lengths.max()) > 300  # lengths span two orders of magnitude
    heavy = REF.draw_boundaries(300, 21, clustered=True, generator=gen, device="cpu").diff()
    assert int(heavy.min()) >= 1 and int((heavy == 1).sum()) >= 9  # a run of one-token sequences
    with pytest.raises(ValueError):
        REF.draw_boundaries(10, 11, clustered=False, generator=gen, device="cpu")


def test_rejects_bad_inputs():
    x = torch.zeros(2, 8, 4, dtype=torch.bfloat16)
    w = torch.zeros(4, 4, dtype=torch.bfloat16)
    b = torch.zeros(4, dtype=torch.bfloat16)
    with pytest.raises(ValueError):
        KERNEL.causal_conv1d(x, w, b, torch.tensor([0, 3, 8], dtype=torch.int32))  # packed needs B = 1
    with pytest.raises(ValueError):
        KERNEL.causal_conv1d(x, w[:3], b)
    with pytest.raises(ValueError):
        KERNEL.causal_conv1d(x[:1], torch.zeros(4, 5, dtype=torch.bfloat16), b, _path="rolling")  # W > 4


# ------------------------------------------------------------------------------- wrong-but-plausible kernels


def leaky(x, w, b, cu):
    """Right on every dense input, but treats the packed axis as one sequence (taps cross sequence starts)."""
    return KERNEL.causal_conv1d(x, w, b, None)


def no_bias(x, w, b, cu):
    return KERNEL.causal_conv1d(x, w, torch.zeros_like(b), cu)


def test_wrong_but_plausible_kernels_fail():
    s = spec(1, 120, 40, 4, 9)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=50 + i, device="cpu", dist=dist)
        assert failures(s, KERNEL.kernel, inputs) == []
        assert failures(s, leaky, inputs) != [], f"{dist}: the leaky kernel passed"
        assert failures(s, no_bias, inputs) != [], f"{dist}: the bias-free kernel passed"
        expected = REF.reference(*inputs)
        for fake in (torch.zeros_like(expected), inputs[0].clone(), torch.nn.functional.silu(inputs[0])):
            assert not all(m.ok for m in compare_outputs(s, fake, expected)), dist
