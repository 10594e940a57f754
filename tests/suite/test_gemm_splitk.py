"""gemm_splitk: every path of the expert Triton reference (CUDA-core GEMV, swap-AB split-K, Stream-K) against
reference.py on CPU (Triton interpreter; fp16 where tl.dot runs, bf16 on the GEMV, which has no tl.dot), the
self-cleaning fp32 workspace, the split heuristic on the catalog shapes, and the numerics trap: on the
"cancelling" draw, split-K partials or a running sum rounded to 16 bits fail while the kernel passes, as do zeros,
constants and a transposed output."""

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
TASK = SUITE.load_task("gemm_splitk")
REF = load_reference(SUITE.task_dir("gemm_splitk"))
KERNEL = load_module(SUITE.reference_kernels("gemm_splitk")["triton"], prefix="d2k_test_gemm_splitk")

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(M: int, N: int, K: int, dtype: str = "fp16") -> WorkloadSpec:
    return WorkloadSpec.resolve(TASK, Workload(name="t", params={"M": M, "N": N, "K": K}, dtype=dtype))


def failures(s: WorkloadSpec, got, inputs) -> list[str]:
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, REF.reference(*inputs)) if not m.ok]


def workspace_is_clean() -> bool:
    return all(float(ws.abs().sum()) == 0.0 and int(cnt.abs().sum()) == 0
               for ws, cnt in KERNEL._WORKSPACE.bufs.values())


# (M, N, K, dtype, launcher overrides). Interpreter tiles: gemv BN=16/BK=64, splitk BN=32/BK=64, streamk 32x32x32,
# 4 "SMs". Every split case has a partial last slice or a K tail; the streamk cases split tiles between programs.
CASES = {
    "gemv_m1": (1, 40, 600, "fp16", {}),
    "gemv_m3_bf16": (3, 37, 700, "bf16", {}),
    "gemv_one_split": (2, 40, 300, "bf16", {"_splits": 1}),
    "splitk_m11": (11, 72, 600, "fp16", {}),
    "splitk_m40_many_splits": (40, 40, 700, "fp16", {"_splits": 5}),
    "splitk_one_split": (11, 72, 300, "fp16", {"_splits": 1}),
    "streamk_k_tail": (70, 40, 200, "fp16", {}),
    "streamk_whole_tiles": (70, 50, 128, "fp16", {"_path": "streamk", "_num_sms": 6}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    M, N, K, dtype, overrides = CASES[case]
    s = spec(M, N, K, dtype)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=50 + i, device="cpu", dist=dist)
        assert failures(s, KERNEL.gemm_splitk(*inputs, **overrides), inputs) == [], dist
        # The last contributor of every tile re-zeroed its workspace tile and counter.
        assert workspace_is_clean(), dist


def test_catalog_workloads_take_their_designed_path_and_split():
    plans = {}
    for w in TASK.workloads:
        plan = KERNEL._plan(w.params["M"], w.params["N"], w.params["K"], 132)
        plans[w.name] = (plan["path"], plan.get("BM"), plan.get("S"), plan.get("k_per"))
    assert plans == {"decode_m1": ("gemv", 1, 2, 4096), "decode_m16_down": ("splitk", 16, 2, 7168),
                     "batch64_square": ("splitk", 64, 2, 4096), "wgrad_long_k": ("splitk", 64, 2, 32768)}
    # Slices stay >= _MIN_SLICE deep and a multiple of BK; S never exceeds what K allows.
    assert KERNEL._split(8192, 66, 256, 1024) == (8, 1024)
    assert KERNEL._split(1000, 132, 64, 1024) == (1, 1024)


def test_rejects_bad_inputs():
    A = torch.zeros(4, 8, dtype=torch.float16)
    with pytest.raises(ValueError):
        KERNEL.gemm_splitk(A, torch.zeros(4, 9, dtype=torch.float16))
    with pytest.raises(TypeError):
        KERNEL.gemm_splitk(A, torch.zeros(4, 8, dtype=torch.bfloat16))
    with pytest.raises(ValueError):
        KERNEL.gemm_splitk(torch.zeros(8, 8, dtype=torch.float16), torch.zeros(4, 8, dtype=torch.float16),
                           _path="gemv")
    with pytest.raises(ValueError):
        KERNEL.gemm_splitk(A, torch.zeros(4, 8, dtype=torch.float16), _path="bogus")


# ------------------------------------------------------------------------------------ numerics trap


def low_precision_split_k(A, B, S: int, how: str):
    """The shortcut: S contiguous K slices accumulated in fp32, then either each slice's partial rounded to the
    input dtype before the sum (``partials``) or a running sum kept in the input dtype (``running``, bf16/fp16
    atomics)."""
    K = A.shape[1]
    kp = -(-K // S)
    parts = [A[:, i * kp:(i + 1) * kp].float() @ B[:, i * kp:(i + 1) * kp].float().T for i in range(S)]
    if how == "partials":
        return sum(p.to(A.dtype).float() for p in parts).to(A.dtype)
    run = torch.zeros_like(parts[0])
    for p in parts:
        run = (run + p).to(A.dtype).float()
    return run.to(A.dtype)


@pytest.mark.parametrize("M,N,K,dtype,S", [(11, 72, 1000, "fp16", 3), (3, 48, 1024, "bf16", 4)],
                         ids=["splitk_fp16", "gemv_bf16"])
def test_shortcuts_fail_the_tolerance_where_the_kernel_passes(M, N, K, dtype, S):
    s = spec(M, N, K, dtype)
    inputs = make_inputs(REF, s, seed=6, device="cpu", dist="cancelling")
    A, B = inputs
    expected = REF.reference(*inputs)
    assert failures(s, KERNEL.gemm_splitk(A, B, _splits=S), inputs) == []
    for how in ("partials", "running"):
        assert failures(s, low_precision_split_k(A, B, S, how), inputs) != [], f"16-bit {how} passed"
    fakes = {
        "zeros": torch.zeros_like(expected),
        "ones": torch.ones_like(expected),
        "constant": torch.full_like(expected, float(expected.float().mean())),
        "first_half_only": (A[:, :K // 2].float() @ B[:, :K // 2].float().T).to(expected.dtype),
    }
    for label, fake in fakes.items():
        assert failures(s, fake, inputs) != [], f"'{label}' passed"
