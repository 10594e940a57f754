"""quant_absmax: both paths of the expert Triton reference (single-pass group tiles, two-sweep wide groups) for fp8
e4m3 and int8 against reference.py on CPU (Triton interpreter), the interpreter's exact e4m3 rounding and the int8
round-half-even trick against torch, the routing of the catalog workloads, and the numerics trap: a scale
computed in bf16, a per-row scale where per-group is asked for, zeros, constants and a plain cast fail while the
kernel passes."""

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
TASK = SUITE.load_task("quant_absmax")
REF = load_reference(SUITE.task_dir("quant_absmax"))
KERNEL = load_module(SUITE.reference_kernels("quant_absmax")["triton"], prefix="d2k_test_quant_absmax")

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(M: int, N: int, G: int, qdtype: str) -> WorkloadSpec:
    return WorkloadSpec.resolve(TASK, Workload(name="t", params=dict(M=M, N=N, G=G, qdtype=qdtype), dtype="bf16"))


def failures(s: WorkloadSpec, got, inputs) -> list[str]:
    expected = REF.reference(*inputs, **s.scalars)
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, expected) if not m.ok]


# (M, N, G, qdtype, launcher overrides): partial row blocks and group blocks, a non-power-of-two per-token group
# (G = 3000, padded to 4096), persistent loops with several tiles per program, two-sweep groups with a partial
# last column tile and two groups per row.
CASES = {
    "groups128_fp8": (37, 640, 128, "fp8_e4m3", {}),
    "groups128_int8": (37, 640, 128, "int8", {}),
    "per_token_fp8_unpadded": (9, 3000, 3000, "fp8_e4m3", {}),
    "per_token_int8": (6, 1024, 1024, "int8", {}),
    "groups64_persistent": (21, 384, 64, "fp8_e4m3", {"_rows": 2, "_groups": 2, "_num_progs": 3}),
    "two_sweep_fp8": (5, 1200, 600, "fp8_e4m3", {"_path": "two_sweep", "_num_progs": 3}),
    "two_sweep_int8": (7, 900, 900, "int8", {"_path": "two_sweep"}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    M, N, G, qdtype, overrides = CASES[case]
    s = spec(M, N, G, qdtype)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=80 + i, device="cpu", dist=dist)
        assert failures(s, KERNEL.quant_absmax(*inputs, G, qdtype, **overrides), inputs) == [], dist


@triton.jit
def _rounding_probe(y_ptr, q8_ptr, qi_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    inv = tl.full((BLOCK,), 1.0, tl.float32)
    tl.store(q8_ptr + offs, KERNEL._quantize(y, inv, 448.0, True, True), mask=mask)
    tl.store(qi_ptr + offs, KERNEL._quantize(y, inv, 127.0, False, False), mask=mask)


def test_interpreter_rounding_is_round_to_nearest_even():
    grid = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    grid = grid[torch.isfinite(grid)].unique()
    mids = (grid[1:] + grid[:-1]) / 2                                        # every e4m3 tie, subnormals included
    gen = torch.Generator().manual_seed(0)
    rand = (torch.rand(20000, generator=gen) * 2 - 1) * 448 * torch.exp2(-torch.rand(20000, generator=gen) * 24)
    y = torch.cat([grid, mids, rand, torch.tensor([1.97, -1.97, 447.9, 500.0, -1e4])])
    q8 = torch.empty(y.numel(), dtype=torch.float8_e4m3fn)
    qi = torch.empty(y.numel(), dtype=torch.int8)
    _rounding_probe[(1,)](y, q8, qi, y.numel(), BLOCK=triton.next_power_of_2(y.numel()))
    # torch's fp32 -> e4m3 conversion rounds to nearest even (and is non-saturating, hence the clamp first).
    assert torch.equal(q8.float(), y.clamp(-448, 448).to(torch.float8_e4m3fn).float())
    assert torch.equal(qi, torch.round(y.clamp(-127, 127)).to(torch.int8))
    ties = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 126.5, -126.5])
    assert torch.round(ties).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 126.0, -126.0]  # what "half to even" means


def test_catalog_workloads_take_their_designed_path():
    picks = {}
    for w in TASK.workloads:
        G, N = w.params["G"], w.params["N"]
        picks[w.name] = (KERNEL._pick_path(G), KERNEL._groups_tile(G, N // G))
    assert picks["per_token_fp8"] == ("groups", (8192, 1, 1))
    assert picks["group128_fp8"] == ("groups", (128, 8, 8))     # 8 rows x 8 groups; 56 groups = 7 tiles per row
    assert picks["wide_row_int8"][0] == "two_sweep"
    # Two-sweep: at most 393 groups of 104 KB (one per program) in flight, inside the 40 MB L2 budget.
    assert KERNEL._L2_BUDGET // (53248 * 2) == 393


def test_rejects_bad_inputs():
    x = torch.zeros(4, 256, dtype=torch.bfloat16)
    with pytest.raises(ValueError):
        KERNEL.quant_absmax(x, 100, "fp8_e4m3")
    with pytest.raises(ValueError):
        KERNEL.quant_absmax(x, 128, "fp8_e5m2")
    with pytest.raises(TypeError):
        KERNEL.quant_absmax(x.to(torch.int32), 128, "int8")


# ------------------------------------------------------------------------------------ numerics trap


def bf16_scale_quant(x, G: int, qdtype: str):
    """The shortcut: amax and the scale in bf16 (then stored as fp32), quantization from that scale."""
    M, N = x.shape
    qt = torch.float8_e4m3fn if qdtype == "fp8_e4m3" else torch.int8
    qmax = REF.QMAX[qt]
    xg = x.view(M, N // G, G)
    s = (xg.abs().amax(-1).clamp(min=1e-12) / qmax).to(torch.bfloat16)        # bf16 division and storage
    y = (xg.float() / s.float()[..., None]).clamp(-qmax, qmax)
    q = y.to(qt) if qt == torch.float8_e4m3fn else torch.round(y).to(qt)
    return q.view(M, N), s.float()


@pytest.mark.parametrize("qdtype", ["fp8_e4m3", "int8"])
def test_shortcuts_fail_the_tolerance_where_the_kernel_passes(qdtype):
    M, N, G = 16, 512, 128
    s = spec(M, N, G, qdtype)
    inputs = make_inputs(REF, s, seed=9, device="cpu", dist="outliers")
    (x,) = inputs
    q_ref, s_ref = REF.reference(x, G=G, qdtype=qdtype)
    assert failures(s, KERNEL.kernel(x, G=G, qdtype=qdtype), inputs) == []
    bad = failures(s, bf16_scale_quant(x, G, qdtype), inputs)
    assert any(f.startswith("scales:") for f in bad), "a bf16 scale passed"
    q_row, s_row = REF.reference(x, G=N, qdtype=qdtype)                         # one scale per row
    fakes = {
        "zeros": (torch.zeros_like(q_ref), torch.zeros_like(s_ref)),
        "ones": (torch.ones_like(q_ref), torch.ones_like(s_ref)),
        "constant_scale": (q_ref, torch.full_like(s_ref, float(s_ref.mean()))),
        "plain_cast": (x.float().clamp(-127, 127).to(q_ref.dtype), torch.ones_like(s_ref)),
        "per_row_scale": (q_row, s_row.expand_as(s_ref).contiguous()),
    }
    for label, fake in fakes.items():
        assert failures(s, fake, inputs) != [], f"'{label}' passed"
