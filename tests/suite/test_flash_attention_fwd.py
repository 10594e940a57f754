"""flash_attention_fwd: every path of the expert reference against reference.py (CPU: Triton interpreter, fp16
because the interpreter's bf16 tl.dot is wrong), and the catalog's traps (causal mask, GQA head mapping), each
shown to catch a deliberately naive variant."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from d2kgrade.suite import Suite
from runner.compare import compare_tensor
from runner.loading import load_module

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
TASK = SUITE.load_task("flash_attention_fwd")
REF = load_module(SUITE.reference_py("flash_attention_fwd"), prefix="d2k_test_ref")
FA = load_module(SUITE.reference_kernels("flash_attention_fwd")["triton"], prefix="d2k_test_kernel")
INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRETING else "cuda"
DTYPE = torch.float16 if INTERPRETING else torch.bfloat16


def _inputs(B, Hq, Hkv, S, D, dist, seed=0):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    shapes = {"q": (B, Hq, S, D), "k": (B, Hkv, S, D), "v": (B, Hkv, S, D)}
    return REF.make_inputs({}, shapes, {"q": DTYPE, "k": DTYPE, "v": DTYPE}, generator=gen, device=DEVICE, dist=dist)


def _failures(got, expected) -> list[str]:
    out = []
    for name, g, e in zip(("o", "lse"), got, expected, strict=True):
        tol = TASK.tolerance_for("fp32" if name == "lse" else {torch.float16: "fp16"}.get(DTYPE, "bf16"))
        m = compare_tensor(name, g, e, tol)
        if not m.ok:
            out.append(f"{name}: {m.reason}")
    return out


# Irregular S (not a multiple of any block), GQA groups of 1, 2 and 3, batch 2, both load paths, several tilings.
CASES = [
    pytest.param(dict(B=2, Hq=4, Hkv=2, S=53, D=32, causal=True, dist="sharp", kw=dict(_block_m=32, _block_n=16)),
                 id="causal-pointers-diag-split"),
    pytest.param(dict(B=1, Hq=3, Hkv=1, S=70, D=16, causal=False, dist="offset", kw=dict(_block_m=32, _block_n=32)),
                 id="noncausal-pointers-tail"),
    pytest.param(dict(B=1, Hq=2, Hkv=2, S=45, D=64, causal=True, dist="offset", kw=dict(_use_tma=True)),
                 id="causal-tma"),
    pytest.param(dict(B=2, Hq=2, Hkv=1, S=40, D=32, causal=False, dist="sharp", kw=dict(_use_tma=True)),
                 id="noncausal-tma"),
]


@pytest.mark.parametrize("case", CASES)
def test_every_path_matches_reference(case):
    if case["kw"].get("_use_tma") and not INTERPRETING and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA descriptors need sm_90")
    q, k, v = _inputs(case["B"], case["Hq"], case["Hkv"], case["S"], case["D"], case["dist"])
    got = FA.flash_attention_fwd(q, k, v, causal=case["causal"], **case["kw"])
    assert _failures(got, REF.reference(q, k, v, causal=case["causal"])) == []


def _naive(q, k, v, *, causal, kv_head_of):
    """float64 attention with a pluggable query-head -> KV-head map."""
    B, Hq, S, D = q.shape
    heads = torch.tensor([kv_head_of(h, Hq, k.shape[1]) for h in range(Hq)])
    kk, vv = k.double()[:, heads], v.double()[:, heads]
    s = q.double() @ kk.transpose(-1, -2) * D ** -0.5
    if causal:
        s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    return (torch.softmax(s, -1) @ vv).to(q.dtype), torch.logsumexp(s, -1).float()


def _grouped(h, Hq, Hkv):
    return h // (Hq // Hkv)


def _interleaved(h, Hq, Hkv):  # the trap: head h reading KV head h % Hkv
    return h % Hkv


def test_causal_mask_and_gqa_mapping_and_the_naive_variants_fail():
    """The kernel (default launcher path) matches; attention without the causal mask, and GQA with interleaved
    head mapping, both fail the same comparison, so the test can tell the traps apart from the right answer."""
    q, k, v = _inputs(1, 4, 2, 38, 32, "sharp", seed=2)
    expected = REF.reference(q, k, v, causal=True)
    assert _failures(FA.flash_attention_fwd(q, k, v, causal=True), expected) == []
    assert _failures(_naive(q, k, v, causal=True, kv_head_of=_grouped), expected) == []  # the helper is right...
    assert _failures(_naive(q, k, v, causal=False, kv_head_of=_grouped), expected) != []  # ...unless unmasked
    assert _failures(_naive(q, k, v, causal=True, kv_head_of=_interleaved), expected) != []


def test_causal_lse_of_the_first_row_is_its_own_score():
    """Row 0 sees only key 0: lse = q0.k0 / sqrt(D) exactly, whatever the other keys hold."""
    q, k, v = _inputs(1, 2, 1, 20, 16, "offset", seed=4)
    o, lse = FA.flash_attention_fwd(q, k, v, causal=True, _block_m=16, _block_n=16)
    s00 = (q[0, :, 0].double() * k[0, 0, 0].double()).sum(-1) / 4.0
    assert float((lse[0, :, 0].double() - s00).abs().max()) <= 1e-3
    assert torch.equal(o[0, :, 0], v[0, 0, 0].expand(2, -1))


def test_autotune_configs_respect_the_shape_rules():
    """On the GPU the autotuner only tries configs that can run: causal needs BLOCK_M % BLOCK_N == 0, D = 256
    keeps BLOCK_N <= 64, and Q + the K/V ring fit in shared memory."""
    for d, causal in ((128, True), (128, False), (256, True)):
        kept = FA._prune(FA._CONFIGS, {}, HEAD_DIM=d, CAUSAL=causal)
        assert kept, (d, causal)
        for c in kept:
            bm, bn = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]
            assert not causal or bm % bn == 0
            assert d < 256 or bn <= 64
            assert (bm * d + 2 * c.num_stages * bn * d) * 2 <= FA._SMEM_BYTES
    assert any(c.kwargs == {"BLOCK_M": 128, "BLOCK_N": 128} for c in FA._prune(FA._CONFIGS, {}, HEAD_DIM=128,
                                                                                    CAUSAL=True))


@pytest.mark.parametrize("causal", [True, False])
def test_the_chunked_float64_reference_is_plain_attention(causal, monkeypatch):
    """reference.py reads only the keys a causal chunk can see and takes exp(s - lse) for the probabilities: the
    same figures as full-width masked attention in float64, over several row chunks and a GQA group of 2."""
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, h, 37, 16, generator=gen, dtype=torch.float64) for h in (4, 2, 2))
    monkeypatch.setattr(REF, "_REF_CHUNK_ROWS", 8)
    o, lse = REF.reference(q, k, v, causal=causal)
    kk, vv = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    s = q @ kk.transpose(-1, -2) * 16 ** -0.5
    if causal:
        s = s.masked_fill(torch.ones(37, 37, dtype=torch.bool).triu(1), float("-inf"))
    assert torch.allclose(o, torch.softmax(s, -1) @ vv, rtol=1e-12, atol=1e-12)
    assert torch.allclose(lse, torch.logsumexp(s, -1).float())
