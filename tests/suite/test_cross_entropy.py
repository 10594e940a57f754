"""cross_entropy: every path of the expert reference against reference.py (CPU: Triton interpreter), and the
catalog's traps (ignore_index rows, int64 row offsets), each shown to catch a deliberately naive variant."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from d2kgrade.suite import Suite
from runner.compare import compare_tensor
from runner.loading import load_module

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
TASK = SUITE.load_task("cross_entropy")
REF = load_module(SUITE.reference_py("cross_entropy"), prefix="d2k_test_ref")
CE = load_module(SUITE.reference_kernels("cross_entropy")["triton"], prefix="d2k_test_kernel")
INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRETING else "cuda"


def _inputs(M: int, V: int, dist: str, seed: int = 0):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    return REF.make_inputs({"M": M, "V": V}, {"logits": (M, V), "target": (M,)}, {"logits": torch.bfloat16},
                           generator=gen, device=DEVICE, dist=dist)


def _failures(got, expected) -> list[str]:
    out = []
    for name, g, e in zip(("loss", "dlogits"), got, expected, strict=True):
        tol = TASK.tolerance_for("fp32" if name == "loss" else "bf16")
        m = compare_tensor(name, g, e, tol)
        if not m.ok:
            out.append(f"{name}: {m.reason}")
    return out


# Small irregular shapes that still make each path loop: several tiles per sweep, several chunks per row,
# fewer persistent programs than rows (so programs loop over rows), one ignored row per draw at least.
# The ignore_index test below runs every path on "normal" too, and the suite's smoke test runs the default path
# (rows) on every distribution.
PATHS = {
    "rows": dict(M=7, V=700, dist="shifted", kw=dict(_path="rows", _block_v=256, _num_progs=3)),
    "coop": dict(M=4, V=700, dist="peaked", kw=dict(_path="coop", _block_v=128, _chunk=256, _num_progs=6)),
    "split": dict(M=4, V=900, dist="shifted", kw=dict(_path="split", _block_v=128, _chunk=384)),
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_every_path_matches_reference(path):
    spec = PATHS[path]
    logits, target = _inputs(spec["M"], spec["V"], spec["dist"], seed=1)
    assert bool((target == REF.IGNORE_INDEX).any()), "every draw should include an ignored row"
    got = CE.cross_entropy(logits, target, **spec["kw"])
    assert _failures(got, REF.reference(logits, target)) == []


def test_coop_without_waiting_still_matches():
    """_spin=0: no program waits, every one finishes its row statistics itself (the deadlock-free fallback)."""
    logits, target = _inputs(3, 700, "normal", seed=5)
    got = CE.cross_entropy(logits, target, _path="coop", _block_v=128, _chunk=256, _num_progs=3, _spin=0)
    assert _failures(got, REF.reference(logits, target)) == []


def test_launcher_picks_the_designed_path_per_workload():
    picks = {w.name: CE._pick_path(w.params["M"], w.params["V"], 2, 132) for w in TASK.workloads}
    assert picks == {"llama3_vocab": "rows", "gemma_vocab": "coop", "few_rows_huge_vocab": "split"}


def _naive_no_ignore(logits, target):
    """The trap: treating -100 as an ordinary index (Python wraps it to column V - 100)."""
    z = logits.double()
    t = target % z.shape[1]
    lse = torch.logsumexp(z, dim=1)
    grad = torch.softmax(z, dim=1)
    grad[torch.arange(z.shape[0]), t] -= 1.0
    return (lse - z.gather(1, t[:, None]).squeeze(1)).float(), grad.to(logits.dtype)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_ignore_index_rows_are_zero_and_the_naive_variant_fails(path):
    spec = PATHS[path]
    logits, target = _inputs(spec["M"], spec["V"], "normal", seed=11)
    target[0] = REF.IGNORE_INDEX
    target[-1] = REF.IGNORE_INDEX
    ignored = target == REF.IGNORE_INDEX
    expected = REF.reference(logits, target)
    loss, dlogits = CE.cross_entropy(logits, target, **spec["kw"])
    assert torch.equal(loss[ignored], torch.zeros_like(loss[ignored]))
    assert torch.equal(dlogits[ignored], torch.zeros_like(dlogits[ignored]))
    assert _failures((loss, dlogits), expected) == []
    assert _failures(_naive_no_ignore(logits, target), expected) != []


@triton.jit
def _naive_int32_loss_kernel(z_ptr, t_ptr, loss_ptr, V, stride_row, BLOCK: tl.constexpr):
    """The trap: the row offset row * stride in int32, which wraps beyond 2^31 elements."""
    row = tl.program_id(0)
    src = z_ptr + row * stride_row
    cols = tl.arange(0, BLOCK)
    z = tl.load(src + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
    m = tl.max(z, axis=0)
    lse = m + tl.log(tl.sum(tl.exp(z - m), axis=0))
    tl.store(loss_ptr + row, lse - tl.load(src + tl.load(t_ptr + row)).to(tl.float32))


@pytest.mark.skipif(not INTERPRETING, reason="reads unmapped memory on purpose only where the interpreter traps it")
def test_row_offsets_beyond_2_31_elements_and_the_int32_variant_fails():
    """Rows 2^30 + 512 elements apart: row 2 starts past element 2^31 of an 8 GB address-space reservation
    (untouched pages, so no memory is committed), as gemma_vocab's rows past 8192 do."""
    M, V, stride = 3, 600, 2**30 + 512
    try:
        big = torch.empty(2**32 + 2**16, dtype=torch.bfloat16)
    except (RuntimeError, MemoryError):
        pytest.skip("cannot reserve 8 GB of address space here")
    logits = big.as_strided((M, V), (stride, 1), storage_offset=2**31)
    data, _ = _inputs(M, V, "normal", seed=3)
    logits.copy_(data)
    target = torch.tensor([5, V - 1, 0])
    expected = REF.reference(logits, target)
    for path, kw in (("rows", dict(_block_v=512, _num_progs=2)), ("coop", dict(_block_v=512, _chunk=512)),
                     ("split", dict(_block_v=512, _chunk=512))):
        got = CE.cross_entropy(logits, target, _path=path, **kw)
        assert _failures(got, expected) == [], path
    loss = torch.empty(M, dtype=torch.float32)
    try:
        _naive_int32_loss_kernel[(M,)](logits, target, loss, V, stride, BLOCK=1024)
        naive_ok = compare_tensor("loss", loss, expected[0], TASK.tolerance_for("fp32")).ok
    except Exception:  # the interpreter's int32 overflow check fires: that is the naive kernel failing
        naive_ok = False
    assert not naive_ok
