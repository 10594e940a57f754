"""rotary_embedding: both styles and the head-chunk loop of the expert Triton reference against reference.py
(CPU, Triton interpreter), in-place operation, the tiling chosen for the catalog workloads, and the precision
trap: cos/sin rounded to bf16 fails the tolerance while the reference kernel passes, as do zeros, constants and
echo."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from d2kgrade.schema import Workload
from d2kgrade.suite import Suite
from runner.direct import compare_outputs, load_reference
from runner.inputs import WorkloadSpec, as_tuple, distributions, make_inputs
from runner.loading import load_module

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
TASK = SUITE.load_task("rotary_embedding")
REF = load_reference(SUITE.task_dir("rotary_embedding"))
KERNEL = load_module(SUITE.reference_kernels("rotary_embedding")["triton"], prefix="d2k_test_rotary")

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(T: int, Hq: int, Hkv: int, D: int, style: str) -> WorkloadSpec:
    params = {"T": T, "Hq": Hq, "Hkv": Hkv, "D": D, "style": style}
    return WorkloadSpec.resolve(TASK, Workload(name="t", params=params, dtype="bf16"))


def failures(s: WorkloadSpec, fn, inputs) -> list[str]:
    got = fn(*[t.clone() for t in inputs], **s.scalars)
    expected = REF.reference(*inputs, **s.scalars)
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, expected) if not m.ok]


# (T, Hq, Hkv, D, style, launcher overrides): a partial token block, head chunks with a partial last chunk, a
# non-power-of-two D/2 (masked lanes), and the MLA shape (one shared k head).
CASES = {
    "neox": (13, 6, 2, 32, "neox", {}),
    "gptj": (13, 6, 2, 32, "gptj", {}),
    "neox_chunks_odd_half": (9, 6, 3, 24, "neox", {"_block_t": 4, "_chunk_elems": 128}),
    "gptj_chunks_odd_half": (9, 6, 3, 24, "gptj", {"_block_t": 4, "_chunk_elems": 128}),
    "gptj_mla": (5, 9, 1, 16, "gptj", {"_block_t": 2, "_chunk_elems": 32}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    T, Hq, Hkv, D, style, overrides = CASES[case]
    s = spec(T, Hq, Hkv, D, style)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=50 + i, device="cpu", dist=dist)
        fn = lambda *t, style: KERNEL.rotary_embedding(*t, style, **overrides)  # noqa: E731
        assert failures(s, fn, inputs) == [], dist


def test_inplace_rotates_the_inputs():
    s = spec(7, 4, 2, 32, "gptj")
    q, k, pos, cos, sin = make_inputs(REF, s, seed=1, device="cpu", dist="normal")
    want_q, want_k = REF.reference(q, k, pos, cos, sin, style="gptj")
    q2, k2 = q.clone(), k.clone()
    out_q, out_k = KERNEL.rotary_embedding(q2, k2, pos, cos, sin, "gptj", inplace=True)
    assert out_q is q2 and out_k is k2
    assert all(m.ok for m in compare_outputs(s, (q2, k2), (want_q, want_k)))


def test_catalog_workloads_take_their_designed_tiles():
    plans = {w.name: KERNEL._plan(w.params["Hq"], w.params["Hkv"], w.params["D"], 2) for w in TASK.workloads}
    # (BLOCK_T, BLOCK_HQ, BLOCK_HK, BLOCK_HALF): >= 32 KB per program, k chunks never padded past Hkv.
    assert plans == {"llama_prefill_neox": (2, 16, 8, 64), "interleaved_gptj": (1, 32, 8, 64),
                     "mla_rope_d64": (1, 64, 1, 32)}
    with pytest.raises(ValueError):
        KERNEL.rotary_embedding(*make_inputs(REF, spec(2, 1, 1, 8, "neox"), seed=0, device="cpu", dist="normal"),
                                style="rope")


def bf16_tables(q, k, positions, cos_cache, sin_cache, *, style):
    """The shortcut: fp32 math, but from cos/sin tables stored in bf16."""
    return REF.baseline(q, k, positions, cos_cache.bfloat16().float(), sin_cache.bfloat16().float(), style=style)


@pytest.mark.parametrize("style", ["neox", "gptj"])
def test_shortcuts_fail_the_tolerance_where_the_kernel_passes(style):
    s = spec(13, 6, 2, 32, style)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=60 + i, device="cpu", dist=dist)
        expected = as_tuple(REF.reference(*inputs, style=style))
        assert failures(s, KERNEL.kernel, inputs) == [], dist
        assert failures(s, REF.baseline, inputs) == [], dist
        assert failures(s, bf16_tables, inputs) != [], f"{dist}: bf16 cos/sin passed"
        q, k = inputs[:2]
        fakes = {
            "zeros": tuple(torch.zeros_like(e) for e in expected),
            "ones": tuple(torch.ones_like(e) for e in expected),
            "constant": tuple(torch.full_like(e, float(e.float().mean())) for e in expected),
            "echo": (q.clone(), k.clone()),
        }
        for label, fake in fakes.items():
            assert not all(m.ok for m in compare_outputs(s, fake, expected)), f"{dist}: '{label}' passed"
