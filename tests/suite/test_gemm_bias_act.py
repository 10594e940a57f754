"""gemm_bias_act: both paths of the expert Triton reference (pointer and TMA descriptors) against reference.py on
CPU (Triton interpreter, fp16: the interpreter's bf16 tl.dot is wrong), the exp2 GELU against float64 tanh-GELU
including its tails, the routing, and the numerics trap: zeros, constants, a bias-only output and a low-precision
accumulator fail the tolerance while the kernel passes."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from d2kgrade.schema import Workload
from d2kgrade.suite import Suite
from runner.direct import compare_outputs, load_reference
from runner.inputs import WorkloadSpec, distributions, make_inputs
from runner.loading import load_module

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
TASK = SUITE.load_task("gemm_bias_act")
REF = load_reference(SUITE.task_dir("gemm_bias_act"))
KERNEL = load_module(SUITE.reference_kernels("gemm_bias_act")["triton"], prefix="d2k_test_gemm_bias_act")

# The interpreter converts 1-element arrays with int() when a loop starts at tl.program_id (numpy >= 1.25 warns);
# 2^-t overflows to inf on purpose for very negative u.
pytestmark = [pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")]


def spec(M: int, N: int, K: int, dtype: str = "fp16") -> WorkloadSpec:
    return WorkloadSpec.resolve(TASK, Workload(name="t", params={"M": M, "N": N, "K": K}, dtype=dtype))


def failures(s: WorkloadSpec, got, inputs) -> list[str]:
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, REF.reference(*inputs)) if not m.ok]


SMALL = {"BM": 32, "BN": 32, "BK": 32, "GROUP_M": 2}
# (M, N, K, launcher overrides). With 32x32 tiles and 4 programs every case has several tiles per program and a
# partial last group; K = 100 / 104 leave a K tail, N = 93 / M = 67 leave partial edge tiles.
CASES = {
    "ptr_even_k": (67, 93, 160, {}),
    "ptr_k_tail": (67, 93, 100, {}),
    "ptr_bm64_tiny": (5, 7, 16, {"_config": {"BM": 64, "BN": 16, "BK": 16, "GROUP_M": 2}}),
    "tma_subtiled_epilogue": (67, 88, 160, {"_path": "tma"}),
    "tma_k_tail": (37, 88, 104, {"_path": "tma"}),
    "tma_whole_tile_epilogue": (67, 88, 160, {"_path": "tma", "_config": {**SMALL, "EPILOGUE_SUBTILE": False}}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    M, N, K, overrides = CASES[case]
    s = spec(M, N, K)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=40 + i, device="cpu", dist=dist)
        assert failures(s, KERNEL.gemm_bias_act(*inputs, **overrides), inputs) == [], dist


@triton.jit
def _gelu_probe_kernel(u_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    u = tl.load(u_ptr + offs, mask=offs < n, other=0.0)
    zero = tl.zeros((1, BLOCK), tl.float32)
    y = KERNEL._bias_gelu(zero + u[None, :], u_ptr, offs + n, n)  # bias slots past n read as 0 (masked)
    tl.store(y_ptr + offs[None, :], y, mask=offs[None, :] < n)


def test_exp2_gelu_matches_tanh_gelu_in_float64():
    u = torch.cat([torch.linspace(-100.0, 100.0, 3001), torch.tensor([-1e4, -300.0, -88.0, 88.0, 300.0, 1e4, 0.0])])
    y = torch.empty_like(u)
    _gelu_probe_kernel[(1,)](u, y, u.numel(), BLOCK=triton.next_power_of_2(u.numel()))
    exact = F.gelu(u.double(), approximate="tanh")
    assert torch.isfinite(y).all()
    # fp32 rounding of u*(C1 + C2 u^2), ex2 and the division: a few fp32 ulps of max(1, |u|).
    err = ((y.double() - exact).abs() / exact.abs().clamp_min(1.0)).max().item()
    assert err < 1e-6, err
    assert y[u < -20].abs().max().item() < 1e-30 and torch.equal(y[u > 20], u[u > 20])


def test_routing_configs_and_alignment():
    X = torch.zeros(67, 160, dtype=torch.float16)
    assert KERNEL._pick_path(X, torch.zeros(88, 160, dtype=torch.float16), 88) == "ptr"  # CPU: interpreter path
    assert not KERNEL._tma_compatible(X, torch.zeros(93, 160, dtype=torch.float16), 93)  # Y rows 186 B
    with pytest.raises(ValueError):
        KERNEL.gemm_bias_act(X[:, :100], torch.zeros(88, 100, dtype=torch.float16),
                             torch.zeros(88, dtype=torch.float16), _path="tma")
    # Every catalog workload is TMA-aligned; M <= 256 (decode_batch_256 only) gets the BM = 64 config list.
    for w in TASK.workloads:
        assert w.params["K"] * 2 % 16 == 0 and w.params["N"] * 2 % 16 == 0, w.name
    assert [w.name for w in TASK.workloads if w.params["M"] <= KERNEL._SMALL_M] == ["decode_batch_256"]
    # Its list leads with the 128 x 256 tile measured fastest on the H200, then the BM = 64 tiles.
    assert (KERNEL._TMA_SMALL_M_CONFIGS[0].kwargs["BM"], KERNEL._TMA_SMALL_M_CONFIGS[0].kwargs["BN"]) == (128, 256)
    assert all(c.kwargs["BM"] == 64 for c in KERNEL._TMA_SMALL_M_CONFIGS[1:4])
    assert any(c.kwargs["EPILOGUE_SUBTILE"] and c.kwargs["BN"] == 256 for c in KERNEL._TMA_CONFIGS)


def test_rejects_bad_inputs():
    X = torch.zeros(4, 8, dtype=torch.float16)
    W = torch.zeros(5, 8, dtype=torch.float16)
    with pytest.raises(ValueError):
        KERNEL.gemm_bias_act(X, W, torch.zeros(4, dtype=torch.float16))
    with pytest.raises(TypeError):
        KERNEL.gemm_bias_act(X, W, torch.zeros(5))
    with pytest.raises(TypeError):
        KERNEL.gemm_bias_act(X.float(), W.float(), torch.zeros(5))


# ------------------------------------------------------------------------------------ numerics trap


def low_precision_accumulator(X, W, b, every: int):
    """The shortcut: the running K sum is rounded to the input dtype after every ``every`` products; bias and
    GELU are then done in fp32 and rounded once, as in the honest epilogue."""
    acc = torch.zeros(X.shape[0], W.shape[0])
    for k0 in range(0, X.shape[1], every):
        acc = (acc + X[:, k0:k0 + every].float() @ W[:, k0:k0 + every].float().T).to(X.dtype).float()
    return F.gelu(acc + b.float(), approximate="tanh").to(X.dtype)


def test_shortcuts_fail_the_tolerance_where_the_kernel_passes():
    s = spec(67, 93, 160)
    inputs = make_inputs(REF, s, seed=5, device="cpu", dist="wide_range")
    X, W, b = inputs
    expected = REF.reference(*inputs)
    assert failures(s, KERNEL.kernel(*inputs), inputs) == []
    # An fp16 running sum (rounded after every product) fails at the smoke shape.
    assert failures(s, low_precision_accumulator(X, W, b, 1), inputs) != []
    fakes = {
        "zeros": torch.zeros_like(expected),
        "ones": torch.ones_like(expected),
        "constant": torch.full_like(expected, float(expected.float().mean())),
        "bias_only": F.gelu(b.float(), approximate="tanh").expand_as(expected).to(expected.dtype).contiguous(),
        "no_activation": (X.float() @ W.float().T + b.float()).to(expected.dtype),
    }
    for label, fake in fakes.items():
        assert failures(s, fake, inputs) != [], f"'{label}' passed"


def test_bf16_accumulator_shortcut_fails_on_the_catalog_dtype():
    """bf16 (every catalog workload): the kernel's numerics (fp32 accumulation and epilogue, one rounding) emulated
    in torch pass; a bf16 accumulator rounded after every BK = 32 tile does not. The interpreter cannot run the
    kernel itself in bf16 (its bf16 tl.dot is wrong)."""
    s = spec(67, 93, 160, "bf16")
    inputs = make_inputs(REF, s, seed=5, device="cpu", dist="wide_range")
    X, W, b = inputs
    honest = F.gelu(X.float() @ W.float().T + b.float(), approximate="tanh").to(torch.bfloat16)
    assert failures(s, honest, inputs) == []
    assert failures(s, low_precision_accumulator(X, W, b, 32), inputs) != []
    assert math.isclose(TASK.tolerance_for("bf16")[0], 1e-2)
