"""prefix_scan: every path of the expert Triton reference (decoupled look-back, carry per row, rows per program)
against reference.py on CPU (Triton interpreter), the look-back step on hand-made predecessor states (including
unpublished ones, which sequential interpretation never produces), the routing of the catalog workloads, and the
numerics trap: a 16-bit scan or carry fails the tolerance while the kernel passes, as do zeros, constants and echo."""

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
TASK = SUITE.load_task("prefix_scan")
REF = load_reference(SUITE.task_dir("prefix_scan"))
KERNEL = load_module(SUITE.reference_kernels("prefix_scan")["triton"], prefix="d2k_test_prefix_scan")

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(B: int, N: int, dtype: str) -> WorkloadSpec:
    return WorkloadSpec.resolve(TASK, Workload(name="t", params={"B": B, "N": N}, dtype=dtype))


def failures(s: WorkloadSpec, got, inputs) -> list[str]:
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, REF.reference(*inputs)) if not m.ok]


# (B, N, dtype, launcher overrides): partial last tiles everywhere; the look-back cases cover several rows
# (tiles of one row never look into another) and, with INCLUSIVE publishing off and a 4-wide window, walks of
# many AGGREGATE-only windows back to the row start.
CASES = {
    "lookback_int32": (3, 1500, "int32", {"_path": "lookback", "_block": 128}),
    "lookback_fp32_one_row": (1, 1500, "fp32", {"_path": "lookback", "_block": 128}),
    "lookback_aggregate_walk": (2, 250, "fp32", {"_path": "lookback", "_block": 16, "_window": 4,
                                                 "_publish_inclusive": False}),
    "rows_fp32": (9, 1500, "fp32", {"_path": "rows"}),
    "rows_int32": (9, 700, "int32", {"_path": "rows", "_block": 128}),
    "tile_fp32": (37, 300, "fp32", {"_path": "tile"}),
    "tile_int32_persistent": (37, 300, "int32", {"_rows": 4, "_num_progs": 3}),
    "tile_single_column": (5, 1, "fp32", {}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    B, N, dtype, overrides = CASES[case]
    s = spec(B, N, dtype)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=70 + i, device="cpu", dist=dist)
        assert failures(s, KERNEL.prefix_scan(*inputs, **overrides), inputs) == [], dist


@triton.jit
def _lookback_step_probe(states, out_ptr, end, row_first, WINDOW: tl.constexpr):
    add, new_end, done = KERNEL._lookback_step(states, end, row_first, tl.zeros((), tl.int32), WINDOW)
    tl.store(out_ptr, add.to(tl.int64))
    tl.store(out_ptr + 1, new_end.to(tl.int64))
    tl.store(out_ptr + 2, done.to(tl.int64))


def packed(status: int, value: int) -> int:
    return (status << 32) | (value & 0xFFFFFFFF)


@pytest.mark.parametrize("states,end,row_first,window,expected", [
    # (status, value) of tiles 0..5 of one row (1 = AGGREGATE, 2 = INCLUSIVE, 0 = unpublished); the tile at index
    # 6 looks back, nearest first. expected = (sum added, new end, done).
    ([(2, 10), (1, 1), (1, 2), (1, 3), (1, 4), (1, 5)], 6, 0, 8, (5 + 4 + 3 + 2 + 1 + 10, 6, 1)),  # to INCLUSIVE
    ([(2, 10), (1, 1), (2, 7), (1, 3), (1, 4), (1, 5)], 6, 0, 8, (5 + 4 + 3 + 7, 6, 1)),           # nearest wins
    ([(2, 10), (1, 1), (0, 0), (1, 3), (1, 4), (1, 5)], 6, 0, 8, (5 + 4 + 3, 3, 0)),               # stop at unpublished
    ([(2, 10), (1, 1), (1, 2), (1, 3), (1, 4), (0, 0)], 6, 0, 8, (0, 6, 0)),                       # nearest: spin
    ([(1, 1), (1, 2), (1, 3), (1, 4), (1, 5), (1, -6)], 6, 0, 4, (-6 + 5 + 4 + 3, 2, 0)),          # AGGREGATEs only
    ([(2, 99), (1, 1), (1, 2), (1, 3), (1, 4), (1, 5)], 6, 2, 8, (5 + 4 + 3 + 2, 6, 1)),           # row start = 0
])
def test_lookback_step_on_hand_made_states(states, end, row_first, window, expected):
    state = torch.tensor([packed(s, v) for s, v in states], dtype=torch.int64)
    out = torch.zeros(3, dtype=torch.int64)
    _lookback_step_probe[(1,)](state, out, end, row_first, WINDOW=window)
    assert tuple(out.tolist()) == expected


def test_catalog_workloads_take_their_designed_path():
    # Under the interpreter (4 "SMs") the smoke shape and lookback_int32 take the look-back path.
    assert KERNEL._pick_path(3, 3000, 4) == "lookback"
    picks = {w.name: KERNEL._pick_path(w.params["B"], w.params["N"], 132) for w in TASK.workloads}
    assert picks == {"giant_1d_int32": "lookback", "vocab_rows_fp32": "rows", "short_rows_fp32": "tile"}
    # giant_1d_int32: 32768 look-back tiles of 8192, within the int32 counter; sums stay within int32.
    assert triton.cdiv(268435456, KERNEL._SCAN_BLOCK) == 32768 and 7 * 268435456 < 2 ** 31


def test_rejects_bad_inputs():
    with pytest.raises(ValueError):
        KERNEL.prefix_scan(torch.zeros(2, 3, 4))
    with pytest.raises(TypeError):
        KERNEL.prefix_scan(torch.zeros(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError):
        KERNEL.prefix_scan(torch.zeros(2, 3), _path="bogus")


# ------------------------------------------------------------------------------------ numerics trap


def test_shortcuts_fail_the_tolerance_where_the_kernel_passes():
    s = spec(3, 3000, "fp32")
    inputs = make_inputs(REF, s, seed=8, device="cpu", dist="normal")
    (x,) = inputs
    expected = REF.reference(*inputs)
    assert failures(s, KERNEL.kernel(*inputs), inputs) == []
    # 16-bit shortcuts: the whole scan in bf16 or fp16, or fp32 tile scans joined by a bf16 carry.
    tiles = x.view(3, -1, 250)
    local = torch.cumsum(tiles, -1)
    carry_bf16 = torch.zeros(3, 1)
    joined = []
    for t in range(tiles.shape[1]):
        joined.append(local[:, t] + carry_bf16)
        carry_bf16 = (carry_bf16 + tiles[:, t].sum(-1, keepdim=True)).bfloat16().float()
    shortcuts = {
        "bf16_scan": torch.cumsum(x.bfloat16(), -1, dtype=torch.bfloat16).float(),
        "fp16_scan": torch.cumsum(x.half(), -1, dtype=torch.half).float(),
        "bf16_carry": torch.cat(joined, -1),
    }
    fakes = {
        "zeros": torch.zeros_like(expected),
        "ones": torch.ones_like(expected),
        "constant": torch.full_like(expected, float(expected.mean())),
        "echo": x.clone(),
        "per_tile_scan_no_carry": local.reshape(3, -1).contiguous(),
    }
    for label, fake in {**shortcuts, **fakes}.items():
        assert failures(s, fake, inputs) != [], f"'{label}' passed"
