"""moe_permute and embedding_bag forbid PyTorch's gathers: a submission whose permutation (``X_perm``) or bag
lookup (the table rows) is done by ``torch.gather`` / ``Tensor.gather`` / ``torch.take`` has PyTorch doing the
task's memory traffic, which is the whole task for these two memory-bound ops. ``aten::gather`` is data movement
to the profile proof, so without the task's ``forbidden_ops`` such a submission passed.

Both defence layers are tested with the tasks' own ``forbidden_ops``: the static tripwire names the line, and
with the tripwires off (a call hidden behind ``getattr``) the evaluator's op record answers
``profile.forbidden_op``, end to end on CPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from d2kgrade.suite import Suite
from runner import profile_proof, tripwires
from runner.evaluate import EvalOptions, run_evaluation

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
TASKS = ("moe_permute", "embedding_bag")

# A bag lookup through torch.gather, the weighted per-bag sum left to a small Triton kernel.
EMBEDDING_BAG = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _bag_sum_kernel(rows_ptr, psw_ptr, offsets_ptr, out_ptr, D, BLOCK_D: tl.constexpr):
    b = tl.program_id(0)
    lo = tl.load(offsets_ptr + b)
    hi = tl.load(offsets_ptr + b + 1)
    cols = tl.arange(0, BLOCK_D)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for i in range(lo, hi):
        w = tl.load(psw_ptr + i)
        acc += w * tl.load(rows_ptr + i * D + cols, mask=cols < D, other=0.0).to(tl.float32)
    tl.store(out_ptr + b * D + cols, acc, mask=cols < D)


def kernel(table, indices, offsets, per_sample_weights):
    D = table.shape[1]
    rows = {lookup}(table, 0, indices[:, None].expand(-1, D))
    out = torch.empty(offsets.numel() - 1, D, dtype=torch.float32, device=table.device)
    _bag_sum_kernel[(out.shape[0],)](rows, per_sample_weights, offsets, out, D,
                                     BLOCK_D=triton.next_power_of_2(D))
    return out
'''

# The expert reference's routing and scatter kernels, then X_perm rebuilt with torch.gather from row_id_map.
MOE_PERMUTE_TAIL = '''

def kernel(logits, X, *, k):
    ids, weights, offsets, row_map, _ = moe_permute(logits, X, k)
    T, H = X.shape
    token = torch.empty(T * k, dtype=torch.int64, device=X.device)
    token[row_map.flatten().long()] = torch.arange(T * k, device=X.device) // k
    X_perm = {lookup}(X, 0, token[:, None].expand(-1, H))
    return ids, weights, offsets, row_map, X_perm
'''

STATIC = "torch.gather"
HIDDEN = 'getattr(torch, "gat" + "her")'


def submission(task: str, lookup: str) -> str:
    if task == "embedding_bag":
        return EMBEDDING_BAG.replace("{lookup}", lookup)
    return SUITE.reference_kernels(task)["triton"].read_text() + MOE_PERMUTE_TAIL.replace("{lookup}", lookup)


def forbidden_lines(source: str, task: str) -> list[tuple[int | None, str]]:
    flags = tripwires.scan(source, SUITE.load_task(task).forbidden_ops)
    return [(f.line, f.message) for f in flags if f.code == "static.forbidden_op"]


@pytest.mark.parametrize("task", TASKS)
def test_forbidden_ops_name_the_gathers(task: str) -> None:
    ops = set(SUITE.load_task(task).forbidden_ops)
    assert {"torch.gather", "Tensor.gather", "torch.take", "Tensor.take", "torch.take_along_dim",
            "Tensor.take_along_dim"} <= ops
    assert {"gather", "take", "take_along_dim"} <= profile_proof.forbidden_aten_names(ops)


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("call", ["torch.gather(x, 0, i)", "x.gather(0, i)", "torch.take(x, i)", "x.take(i)",
                                  "torch.take_along_dim(x, i, 0)", "x.take_along_dim(i, dim=0)"])
def test_static_tripwire_flags_each_gather(task: str, call: str) -> None:
    source = f"import torch\n\n\ndef kernel(x, i):\n    return {call}\n"
    hits = forbidden_lines(source, task)
    assert [line for line, _ in hits] == [5], hits


def test_static_tripwire_flags_a_gather_followed_by_a_method() -> None:
    source = "import torch\n\n\ndef kernel(x, i):\n    return torch.gather(x, 0, i).contiguous()\n"
    assert [line for line, _ in forbidden_lines(source, "embedding_bag")] == [5]
    chained = "import torch\n\n\ndef kernel(x, i):\n    return torch.gather(x, 0, i).float().contiguous()\n"
    assert [line for line, _ in forbidden_lines(chained, "embedding_bag")] == [5]


@pytest.mark.parametrize("task", TASKS)
def test_static_tripwire_flags_the_gather_submission_not_the_reference(task: str) -> None:
    source = submission(task, STATIC)
    line = next(n for n, text in enumerate(source.splitlines(), 1) if STATIC in text)
    hits = forbidden_lines(source, task)
    assert [n for n, _ in hits] == [line] and "calls torch.gather()" in hits[0][1], hits
    # The expert kernel moves its rows in Triton: no forbidden op in it.
    assert forbidden_lines(SUITE.reference_kernels(task)["triton"].read_text(), task) == []


@pytest.mark.parametrize("task", TASKS)
def test_profile_flags_aten_gather_and_take(task: str) -> None:
    kw = {"own_names": ["_k"], "forbidden_ops": SUITE.load_task(task).forbidden_ops, "allowed_library_ops": [],
          "data_numel": 1_000_000, "device": "cpu", "own_launches": 1}
    for op in ("aten::gather", "aten::take", "aten::take_along_dim"):
        assert [f.code for f in profile_proof.judge({"ops": {op: 10}}, **kw)] == ["profile.forbidden_op"], op
    # Only the gathers: the movement a launcher does stays allowed.
    assert profile_proof.judge({"ops": {"aten::empty": 10, "aten::copy_": 1_000_000}}, **kw) == []


@pytest.mark.parametrize("task", TASKS)
def test_hidden_gather_is_rejected_by_the_profile(task: str, tmp_path: Path) -> None:
    """Tripwires off, the gather behind getattr: the evaluator's op record of the kernel host's calls catches
    it. Without torch.gather in forbidden_ops these submissions passed (aten::gather is movement)."""
    path = tmp_path / "submission.py"
    path.write_text(submission(task, HIDDEN))
    r = run_evaluation(task, path, suite_root=ROOT, device="cpu", seed=20260612, timeout_s=240, hidden=False,
                       options=EvalOptions(tripwires=False))
    assert r.status == "rejected", (r.status, r.message)
    assert "profile.forbidden_op" in {f.code for f in r.flags}, r.flags
    assert any("gather" in f.message for f in r.flags if f.code == "profile.forbidden_op"), r.flags
