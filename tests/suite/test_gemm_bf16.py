"""gemm_bf16: both paths of the expert Triton reference (pointer and TMA descriptors) against reference.py on CPU
(Triton interpreter, fp16: the interpreter's bf16 tl.dot is wrong), the grouped tile order, and the routing."""

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
TASK = SUITE.load_task("gemm_bf16")
REF = load_reference(SUITE.task_dir("gemm_bf16"))
KERNEL = load_module(SUITE.reference_kernels("gemm_bf16")["triton"], prefix="d2k_test_gemm")

# The interpreter converts 1-element arrays with int() when a loop starts at tl.program_id (numpy >= 1.25 warns).
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(M: int, N: int, K: int) -> WorkloadSpec:
    return WorkloadSpec.resolve(TASK, Workload(name="t", params={"M": M, "N": N, "K": K}, dtype="fp16"))


SMALL = {"BM": 32, "BN": 32, "BK": 32, "GROUP_M": 2}
# (M, N, K, launcher overrides). With 32x32 tiles and 4 programs, every case has several tiles per program and
# a partial last group; K = 100 / 104 leave a K tail, N = 93 / M = 67 leave partial edge tiles.
CASES = {
    "ptr_even_k": (67, 93, 160, {}),
    "ptr_k_tail": (67, 93, 100, {}),
    "ptr_group_taller_than_grid": (130, 200, 64, {"_config": {"BM": 64, "BN": 64, "BK": 64, "GROUP_M": 8}}),
    "ptr_tiny": (5, 7, 16, {"_config": {"BM": 16, "BN": 16, "BK": 16, "GROUP_M": 2}}),
    "tma_even_k_subtile": (67, 88, 160, {"_path": "tma"}),
    "tma_k_tail": (67, 88, 104, {"_path": "tma"}),
    "tma_whole_tile_store": (67, 88, 160, {"_path": "tma", "_config": {**SMALL, "EPILOGUE_SUBTILE": False}}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    M, N, K, overrides = CASES[case]
    s = spec(M, N, K)
    for i, dist in enumerate(distributions(REF)):
        A, B = make_inputs(REF, s, seed=30 + i, device="cpu", dist=dist)
        got, expected = KERNEL.gemm(A, B, **overrides), REF.reference(A, B)
        assert [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, expected) if not m.ok] == [], dist


@triton.jit
def _tile_order_kernel(out_ptr, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    tile_id = tl.program_id(0)
    pid_m, pid_n = KERNEL._tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
    tl.store(out_ptr + 2 * tile_id, pid_m)
    tl.store(out_ptr + 2 * tile_id + 1, pid_n)


def grouped_order(num_pid_m: int, num_pid_n: int, group_m: int) -> list[tuple[int, int]]:
    """GROUP_M tile-rows walk down each column band, bands left to right; the last group may be shorter."""
    order = []
    for first in range(0, num_pid_m, group_m):
        rows = range(first, min(first + group_m, num_pid_m))
        order += [(m, n) for n in range(num_pid_n) for m in rows]
    return order


@pytest.mark.parametrize("num_pid_m,num_pid_n,group_m", [(5, 7, 2), (3, 4, 8), (8, 1, 4), (1, 6, 8)])
def test_tile_coords_is_the_grouped_order(num_pid_m, num_pid_n, group_m):
    out = torch.full((num_pid_m * num_pid_n, 2), -1, dtype=torch.int32)
    _tile_order_kernel[(num_pid_m * num_pid_n,)](out, num_pid_m, num_pid_n, GROUP_M=group_m)
    assert [tuple(r) for r in out.tolist()] == grouped_order(num_pid_m, num_pid_n, group_m)


def test_routing_and_alignment():
    A = torch.zeros(67, 160, dtype=torch.float16)
    assert KERNEL._pick_path(A, torch.zeros(88, 160, dtype=torch.float16), 88) == "ptr"  # CPU: interpreter path
    assert KERNEL._tma_compatible(A, torch.zeros(88, 160, dtype=torch.float16), 88)
    assert not KERNEL._tma_compatible(A, torch.zeros(93, 160, dtype=torch.float16), 93)  # C rows 186 B
    A100 = torch.zeros(67, 100, dtype=torch.float16)
    assert not KERNEL._tma_compatible(A100, torch.zeros(88, 100, dtype=torch.float16), 88)  # A rows 200 B
    with pytest.raises(ValueError):
        KERNEL.gemm(A100, torch.zeros(88, 100, dtype=torch.float16), _path="tma")
    # Every catalog workload is TMA-aligned, so on Hopper it takes the TMA path.
    for w in TASK.workloads:
        assert w.params["K"] * 2 % 16 == 0 and w.params["N"] * 2 % 16 == 0, w.name


def test_rejects_bad_inputs():
    A = torch.zeros(4, 8, dtype=torch.float16)
    with pytest.raises(ValueError):
        KERNEL.gemm(A, torch.zeros(4, 9, dtype=torch.float16))
    with pytest.raises(TypeError):
        KERNEL.gemm(A.float(), torch.zeros(4, 8))
    with pytest.raises(TypeError):
        KERNEL.gemm(A, torch.zeros(4, 8, dtype=torch.bfloat16))
