"""paged_attention_decode: the expert Triton reference (token-balanced chunks, direct writes and LSE merges, masked
tail tiles, GQA packing) against reference.py on fragmented varlen caches (CPU: Triton interpreter), plausible
page-table mistakes shown to fail the check, the input maker's page tables and context lengths, and the baseline."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch

from d2kgrade import formulas
from d2kgrade.schema import Workload
from d2kgrade.suite import Suite
from runner.direct import compare_outputs, load_reference
from runner.inputs import WorkloadSpec, distributions, make_inputs
from runner.loading import load_module

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
TASK = SUITE.load_task("paged_attention_decode")
REF = load_reference(SUITE.task_dir("paged_attention_decode"))
KERNEL = load_module(SUITE.reference_kernels("paged_attention_decode")["triton"], prefix="d2k_test_paged_attn")
DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def spec(B, Hq, Hkv, D, P, num_pages, ctx) -> WorkloadSpec:
    lengths = REF.context_lengths(ctx, B)
    params = dict(B=B, Hq=Hq, Hkv=Hkv, D=D, P=P, num_pages=num_pages, ctx=ctx, sum_ctx=sum(lengths))
    return WorkloadSpec.resolve(TASK, Workload(name="t", params=params, dtype="fp16"))


def failures(s: WorkloadSpec, got, expected) -> list[str]:
    return [f"{m.name}: {m.reason}" for m in compare_outputs(s, got, expected) if not m.ok]


# ((B, Hq, Hkv, D, P, num_pages, ctx), launcher overrides, distribution). Lengths are never multiples of the
# tile, so every sequence ends in a masked tail tile.
CASES = {
    "split_and_direct": ((5, 8, 2, 64, 16, 97, "3 x 45 + 2 x 201"), {"_chunk": 64}, "sharp"),
    "one_chunk_each_no_merge": ((4, 8, 2, 64, 16, 80, "3 x 30 + 1 x 170"), {"_chunk": 1024}, "normal"),
    "gqa8_page8_two_pages_per_tile": ((3, 16, 2, 32, 8, 120, "2 x 17 + 1 x 150"), {"_chunk": 32, "_block_n": 16},
                                     "offset"),
    "mha_one_head_per_kv": ((3, 4, 4, 32, 16, 40, "2 x 77 + 1 x 9"), {"_chunk": 64}, "sharp"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_matches_reference(case):
    dims, overrides, dist = CASES[case]
    s = spec(*dims)
    inputs = make_inputs(REF, s, seed=11, device=DEVICE, dist=dist)
    got = KERNEL.paged_attention_decode(*inputs, **overrides)
    assert failures(s, got, REF.reference(*inputs)) == [], (case, inputs[4].tolist())


# ------------------------------------------------------------------------------------- wrong answers fail


def _with_lengths(q, k, v, bt, lens, new_lens):
    return REF.reference(q, k, v, bt, new_lens.to(torch.int32))


def _average_of_chunks(q, k, v, bt, lens, chunk=64):
    """Split at 64 tokens but merge the chunk outputs with equal weights instead of their LSE weights."""
    P = k.shape[1]
    outs = []
    for b, c in enumerate(lens.tolist()):
        parts = []
        for lo in range(0, c, chunk):
            n = min(chunk, c - lo)
            sub_bt = bt[b:b + 1, lo // P:].contiguous()
            parts.append(REF.reference(q[b:b + 1], k, v, sub_bt, torch.tensor([n], dtype=torch.int32)).double())
        outs.append(torch.stack(parts).mean(0))
    return torch.cat(outs).to(q.dtype)


WRONG = {
    # Whole pages read: the table walk stops at the page, not at c_b (slots past c_b hold other data).
    "whole_last_page": lambda q, k, v, bt, lens: _with_lengths(
        q, k, v, bt, lens, (lens + k.shape[1] - 1) // k.shape[1] * k.shape[1]),
    # Every table column read (the entries past ceil(c_b / P) are random valid pages).
    "ignores_context_length": lambda q, k, v, bt, lens: _with_lengths(
        q, k, v, bt, lens, torch.full_like(lens, bt.shape[1] * k.shape[1])),
    # Pages assumed contiguous from the sequence's first page (block_tables[b, 0] + t // P).
    "contiguous_pages_assumed": lambda q, k, v, bt, lens: REF.reference(
        q, k, v, ((bt[:, :1] + torch.arange(bt.shape[1])[None, :]) % k.shape[0]).to(torch.int32), lens),
    "merge_without_lse_weights": _average_of_chunks,
}


@pytest.fixture(scope="module")
def honest_runs():
    s = WorkloadSpec.resolve(TASK, TASK.smoke)
    runs = {}
    for i, dist in enumerate(distributions(REF)):
        inputs = make_inputs(REF, s, seed=80 + i, device=DEVICE, dist=dist)
        expected = REF.reference(*inputs)
        runs[dist] = (inputs, expected, failures(s, KERNEL.paged_attention_decode(*inputs, _chunk=64), expected))
    return s, runs


@pytest.mark.parametrize("name", WRONG)
def test_plausible_mistakes_fail_while_the_kernel_passes(name, honest_runs):
    s, runs = honest_runs
    assert all(honest == [] for _, _, honest in runs.values())
    caught = [bool(failures(s, WRONG[name](*[t.cpu() for t in inputs]), expected.cpu()))
              for inputs, expected, _ in runs.values()]
    assert any(caught), name


def test_zero_constant_and_echo_outputs_fail(honest_runs):
    s, runs = honest_runs
    for inputs, expected, _ in runs.values():
        for fake in (torch.zeros_like(expected), torch.full_like(expected, float(expected.float().mean())),
                     inputs[0].clone()):
            assert failures(s, fake, expected)


# ------------------------------------------------------------------------------------- inputs


def test_context_lengths_follow_the_catalog():
    for w in TASK.workloads:
        lengths = REF.context_lengths(w.params["ctx"], w.params["B"])
        assert sum(lengths) == w.params["sum_ctx"], w.name
        assert lengths == formulas.lengths(w.params["ctx"]) * (w.params["B"] if isinstance(w.params["ctx"], int)
                                                               else 1), w.name
        assert TASK.shapes(w)["block_tables"][1] == math.ceil(max(lengths) / w.params["P"]), w.name
    skewed = REF.context_lengths("60 x 509 + 4 x 65519", 64)
    assert skewed.count(65519) == 4 and all(c % 16 for c in skewed)
    # A hidden batch of another size keeps the mix: 8 sequences from "60 x 509 + 4 x 65519" -> 7 short, 1 long.
    assert sorted(REF.context_lengths("60 x 509 + 4 x 65519", 8)) == [509] * 7 + [65519]
    with pytest.raises(ValueError):
        REF.context_lengths("60 * 509", 60)


def test_page_tables_are_fragmented_and_valid():
    s = spec(6, 8, 2, 32, 16, 300, "4 x 45 + 2 x 333")
    q, k, v, bt, lens = make_inputs(REF, s, seed=5, device="cpu", dist="normal")
    n_pages = (lens.long() + 15) // 16
    used = torch.cat([bt[b, :n] for b, n in enumerate(n_pages.tolist())])
    assert used.numel() == int(n_pages.sum()) == used.unique().numel()        # without replacement
    assert int(used.max()) > 200 and not torch.equal(used, used.sort().values)  # scattered over the pool
    assert int(bt.min()) >= 0 and int(bt.max()) < 300                          # every entry a valid page id
    # The long sequences land at random batch indices: over seeds, not always at the end.
    long_at = {tuple(make_inputs(REF, s, seed=i, device="cpu", dist="normal")[4].eq(333).nonzero().flatten().tolist())
               for i in range(6)}
    assert len(long_at) > 1
    with pytest.raises(ValueError):  # a pool too small for the sequences
        make_inputs(REF, spec(6, 8, 2, 32, 16, 40, "4 x 45 + 2 x 333"), seed=5, device="cpu", dist="normal")


def test_baseline_matches_reference(honest_runs):
    s, runs = honest_runs
    for inputs, expected, _ in runs.values():
        assert failures(s, REF.baseline(*inputs), expected) == []


def test_rejects_bad_inputs():
    q = torch.zeros(2, 8, 32, dtype=torch.float16)
    k = torch.zeros(10, 16, 2, 32, dtype=torch.float16)
    bt, lens = torch.zeros(2, 3, dtype=torch.int32), torch.ones(2, dtype=torch.int32)
    with pytest.raises(ValueError):
        KERNEL.paged_attention_decode(q[:, :7], k, k, bt, lens)                # Hq % Hkv != 0
    with pytest.raises(TypeError):
        KERNEL.paged_attention_decode(q, k, k, bt.long(), lens)
    with pytest.raises(ValueError):
        KERNEL.paged_attention_decode(q, k, k, bt, lens, _block_n=24)          # tiles must cover whole pages
    with pytest.raises(ValueError):
        KERNEL.paged_attention_decode(q, k, k, bt[:1], lens)
