"""flash_decoding: the expert Triton reference against reference.py on CPU (Triton interpreter): GQA packing with
tl.dot (fp16: the interpreter's bf16 tl.dot is wrong), the MHA FMA path (bf16), split-KV with the merge kernel and
the direct single-split path, the split heuristic on the catalog shapes, and the numerics trap: on "sharp" scores
a q pre-scaled and re-rounded to bf16, or bf16 scores, fail the tolerance while the kernel passes, as do zeros,
constants, uniform attention and a dropped split."""

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
TASK = SUITE.load_task("flash_decoding")
REF = load_reference(SUITE.task_dir("flash_decoding"))
KERNEL = load_module(SUITE.reference_kernels("flash_decoding")["triton"], prefix="d2k_test_flash_decoding")

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(B: int, Hq: int, Hkv: int, L: int, D: int, dtype: str) -> WorkloadSpec:
    return WorkloadSpec.resolve(TASK, Workload(name="t", params=dict(B=B, Hq=Hq, Hkv=Hkv, L=L, D=D), dtype=dtype))


def failures(s: WorkloadSpec, got, inputs) -> list[str]:
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, REF.reference(*inputs)) if not m.ok]


# (B, Hq, Hkv, L, D, dtype, launcher overrides). Interpreter: BLOCK_N = 32, 4 "SMs", min chunk 32. Every split
# case ends in a partial tile; G = 3 pads to a 16-row MMA; D = 48 pads to 64 columns.
CASES = {
    "gqa4_splits": (2, 8, 2, 160, 64, "fp16", {}),
    "gqa3_direct": (2, 6, 2, 150, 64, "fp16", {"_splits": 1}),
    "gqa3_many_splits_d48": (1, 6, 2, 300, 48, "fp16", {"_splits": 5}),
    # MHA takes the MMA path (one row padded to 16) by default; bf16 stays on the FMA path here because the
    # interpreter's bf16 tl.dot is wrong.
    "mha_fma_splits_bf16": (2, 3, 3, 150, 32, "bf16", {"_splits": 3, "_g_pad": 1}),
    "mha_mma_splits_fp16": (2, 3, 3, 150, 32, "fp16", {"_splits": 3}),
    "mha_direct_fp16": (1, 2, 2, 100, 64, "fp16", {"_splits": 1, "_block_n": 16}),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    B, Hq, Hkv, L, D, dtype, overrides = CASES[case]
    s = spec(B, Hq, Hkv, L, D, dtype)
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=60 + i, device="cpu", dist=dist)
        assert failures(s, KERNEL.flash_decoding(*inputs, **overrides), inputs) == [], dist


def test_split_heuristic_on_the_catalog_shapes():
    got = {}
    for w in TASK.workloads:
        p = w.params
        S, chunk = KERNEL._num_splits(p["B"] * p["Hkv"], p["L"], 132, KERNEL._BLOCK_N, KERNEL._MIN_CHUNK)
        got[w.name] = (S, chunk, p["B"] * p["Hkv"] * S)
    assert got == {"b1_64k": (32, 2048, 256), "b16_16k": (3, 5504, 384), "b64_4k_gqa8": (1, 4096, 512),
                   "mha_b4_16k": (3, 5504, 384)}
    # Splits never run past L and never leave an empty split.
    for pairs, L in [(1, 257), (7, 1000), (8, 65536), (300, 100)]:
        S, chunk = KERNEL._num_splits(pairs, L, 132, 64, 256)
        assert chunk % 64 == 0 and (S - 1) * chunk < L <= S * chunk


def test_rejects_bad_inputs():
    q = torch.zeros(1, 6, 16, dtype=torch.float16)
    kv = torch.zeros(1, 4, 8, 16, dtype=torch.float16)
    with pytest.raises(ValueError):
        KERNEL.flash_decoding(q, kv, kv)  # 6 query heads over 4 KV heads
    with pytest.raises(TypeError):
        KERNEL.flash_decoding(q.bfloat16(), kv[:, :3], kv[:, :3])
    with pytest.raises(ValueError):
        KERNEL.flash_decoding(q, kv[:, :3, :0], kv[:, :3, :0])


# ------------------------------------------------------------------------------------ numerics trap


def shortcut_attention(q, k, v, how: str):
    """Decode attention with one lower-precision step: ``fold_bf16`` rounds q * D^-0.5 * log2(e) to the input
    dtype before q.K (what folding the scale into a bf16 MMA operand does); ``bf16_scores`` rounds the scores."""
    B, Hq, D = q.shape
    Hkv = k.shape[1]
    G = Hq // Hkv
    scale = D ** -0.5 * 1.4426950408889634
    qq = q.float().view(B, Hkv, G, D)
    if how == "fold_bf16":
        s = torch.einsum("bhgd,bhld->bhgl", (qq * scale).to(q.dtype).float(), k.float())
    else:
        s = (torch.einsum("bhgd,bhld->bhgl", qq, k.float()) * scale).to(q.dtype).float()
    p = torch.exp2(s - s.amax(-1, keepdim=True))
    o = torch.einsum("bhgl,bhld->bhgd", p / p.sum(-1, keepdim=True), v.float())
    return o.reshape(B, Hq, D).to(q.dtype)


def test_shortcuts_fail_the_tolerance_where_the_kernel_passes():
    # bf16, so the shortcut's rounding is the catalog dtype's; MHA on the kernel's FMA path (_g_pad=1), which the
    # interpreter executes correctly in bf16 (its bf16 tl.dot, which the default MMA path uses, is wrong).
    s = spec(2, 4, 4, 300, 64, "bf16")
    inputs = make_inputs(REF, s, seed=0, device="cpu", dist="sharp")
    q, k, v = inputs
    expected = REF.reference(*inputs)
    assert failures(s, KERNEL.flash_decoding(*inputs, _g_pad=1), inputs) == []
    for how in ("fold_bf16", "bf16_scores"):
        assert failures(s, shortcut_attention(q, k, v, how), inputs) != [], f"{how} passed"
    fakes = {
        "zeros": torch.zeros_like(expected),
        "ones": torch.ones_like(expected),
        "constant": torch.full_like(expected, float(expected.float().mean())),
        "echo_q": q.clone(),
        "uniform_attention": v.float().mean(2).to(expected.dtype),  # MHA: head h reads KV head h
        "first_half_only": REF.reference(q, k[:, :, :150].contiguous(), v[:, :, :150].contiguous()),
    }
    for label, fake in fakes.items():
        assert failures(s, fake, inputs) != [], f"'{label}' passed"
