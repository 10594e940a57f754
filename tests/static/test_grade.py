"""grade_file: verdict rules, unanalysable files, and the expert references (which implement every property)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from d2kgrade.errors import SpecError, UserError
from d2kgrade.schema import Rubric
from d2kgrade.static import grade_file
from d2kgrade.suite import Suite

ROOT = Path(__file__).resolve().parents[2]

KERNEL = textwrap.dedent("""
    import torch, triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, y_ptr, N, B: tl.constexpr):
        c = tl.arange(0, B)
        x = tl.load(x_ptr + c, mask=c < N, other=0.0, eviction_policy="evict_last")
        tl.store(y_ptr + c, tl.exp(x), mask=c < N)

    def kernel(x):
        y = torch.empty_like(x)
        k[(1,)](x, y, x.numel(), B=1024)
        return y
""")


def rubric(*props: dict) -> Rubric:
    return Rubric.model_validate({
        "task": "toy", "properties": [
            {"id": f"toy.L{p.get('level', 1)}.p{i}", "level": f"L{p.get('level', 1)}", "static": p["static"],
             "judge": {"question": "q?", "met": "m", "not_met": "n"}} for i, p in enumerate(props)]})


@pytest.fixture
def kfile(tmp_path: Path) -> Path:
    p = tmp_path / "k.py"
    p.write_text(KERNEL)
    return p


def verdicts(fg):
    return [p.verdict for p in fg.properties]


def test_verdict_rules(kfile):
    r = rubric(
        {"static": {"checks": []}},
        {"static": {"checks": [{"check": "uses_call", "args": {"name": "tl.exp"}}]}},
        {"static": {"checks": [{"check": "uses_call", "args": {"name": "tl.exp"}, "negate": True}]}},
        {"static": {"checks": [{"check": "uses_call", "args": {"name": "tl.exp"}},
                               {"check": "uses_call", "args": {"name": "tl.exp2"}}], "combine": "all"}},
        {"static": {"checks": [{"check": "uses_call", "args": {"name": "tl.exp"}},
                               {"check": "uses_call", "args": {"name": "tl.exp2"}}], "combine": "any"}},
        {"static": {"checks": [{"check": "vector_access", "language": "cuda"}]}},
        {"static": {"checks": [{"check": "eviction_policy", "args": {"value": "evict_last"}, "language": "triton"},
                               {"check": "vector_access", "language": "cuda"}]}},
    )
    fg = grade_file(r, kfile)
    assert verdicts(fg) == ["unknown", "present", "absent", "absent", "present", "unknown", "present"]
    no_checks, present, negated = fg.properties[:3]
    assert no_checks.reason == "no static checks"
    assert present.evidence[0].file == str(kfile)
    assert "tl.exp(x)" in present.evidence[0].code
    assert present.evidence[0].start_line == 9
    assert negated.evidence and "not:" in negated.reason  # the offending call is shown
    assert fg.properties[5].reason.startswith("no static checks for triton")
    assert fg.properties[6].details["skipped"] == ["vector_access"]
    assert fg.rater == "static" and fg.n_unknown == 2 and fg.error == ""


def test_score_uses_rubric_weights(kfile):
    r = rubric({"static": {"checks": [{"check": "uses_call", "args": {"name": "tl.exp"}}]}},
               {"level": 2, "static": {"checks": [{"check": "uses_call", "args": {"name": "tl.exp2"}}]}})
    fg = grade_file(r, kfile)
    # L1 present, L2 absent, L3 has no property: its 25 points go pro rata to L1 (40) and L2 (35).
    assert fg.score == pytest.approx(100 * 40 / 75)


@pytest.mark.parametrize("content,reason", [
    (b"def kernel(x:\n    return x\n", "syntax error at line 1"),
    (KERNEL[: len(KERNEL) // 2].encode(), "syntax error"),
    (b"\xff\xfe\x00garbage", "binary"),
    ("def kernel(x): return 'caf\u00e9'\n".encode("latin-1"), "not valid UTF-8"),
    (b"", "empty"),
    (b"   \n\n", "empty"),
    (b"x" * (1 << 20), "at most"),
    (b"def helper(x):\n    return x\n", "no kernel(...)"),
])
def test_unanalysable_files_are_unknown_with_a_reason(tmp_path, content, reason):
    p = tmp_path / "bad.py"
    p.write_bytes(content)
    r = rubric({"static": {"checks": [{"check": "uses_call", "args": {"name": "tl.exp"}}]}})
    fg = grade_file(r, p)
    assert verdicts(fg) == ["unknown"]
    assert reason in fg.error
    assert reason in fg.properties[0].reason


def test_truncated_cuda_is_unknown(tmp_path):
    p = tmp_path / "k.cu"
    p.write_text("__global__ void k(float* x) {\n  for (int i = 0; i < 4; ++i) {\n    x[i] = 1.f;\n")
    r = rubric({"static": {"checks": [{"check": "shared_memory"}]}})
    fg = grade_file(r, p)
    assert verdicts(fg) == ["unknown"] and "does not parse" in fg.error


def test_pure_pytorch_is_absent(tmp_path):
    p = tmp_path / "t.py"
    p.write_text("import torch\ndef kernel(x):\n    return torch.softmax(x, -1)\n")
    r = rubric({"static": {"checks": [{"check": "uses_call", "args": {"name": "tl.exp"}}]}})
    fg = grade_file(r, p)
    assert verdicts(fg) == ["absent"] and "no Triton or CUDA" in fg.properties[0].reason


def test_bad_rubric_args_and_paths(kfile, tmp_path):
    r = rubric({"static": {"checks": [{"check": "uses_call", "args": {"nmae": "tl.exp"}}]}})
    with pytest.raises(SpecError, match="no argument"):
        grade_file(r, kfile)
    ok = rubric({"static": {"checks": [{"check": "uses_call", "args": {"name": "tl.exp"}}]}})
    with pytest.raises(UserError, match="no such file"):
        grade_file(ok, tmp_path / "missing.py")
    with pytest.raises(UserError, match="directory"):
        grade_file(ok, tmp_path)


def test_a_check_that_raises_gives_unknown(kfile, monkeypatch):
    from d2kgrade.static.registry import load_all

    def boom(facts, lang, *, name):
        raise RuntimeError("bug")

    monkeypatch.setitem(load_all(), "uses_call", boom)
    r = rubric({"static": {"checks": [{"check": "uses_call", "args": {"name": "tl.exp"}}]}})
    fg = grade_file(r, kfile)
    assert verdicts(fg) == ["unknown"] and "RuntimeError" in fg.properties[0].reason


def _reference_cases():
    suite = Suite(ROOT)
    for tid in suite.task_ids:
        for lang, path in suite.reference_kernels(tid).items():
            if suite.rubric_path(tid).is_file():
                yield pytest.param(tid, lang, path, id=f"{tid}-{lang}")


# Guidance items an expert reference leaves out on purpose, because the H200 measured them slower; each names its
# evidence. The grade still checks them in agents' code (the grader measures adherence to the guidance, the
# benchmark measures speed), and an entry that the reference no longer needs fails the test below.
EXPERT_DEVIATIONS = {
    ("swiglu", "swiglu.L3.vector-io-hints"):
        "evict_first loads and .cs stores made the kernel 5-7% slower at every tile and warp count "
        "(benchmarks/data/runs/round7/tune_hints_ab.json); the 16-byte vector half of the item is kept",
    ("transpose", "transpose.L3.streaming-hints"):
        "evict_first loads and .cs stores cost 3-5% on every catalog shape (benchmarks/data/runs/round7/tune_hints_ab.json)",
}


@pytest.mark.parametrize("task_id,lang,path", list(_reference_cases()))
def test_expert_references_show_every_property(task_id, lang, path):
    """The references implement all guidance: every property with checks for their language must be present, except
    the measured deviations above."""
    suite = Suite(ROOT)
    r = suite.load_rubric(task_id)
    fg = grade_file(r, path)
    assert fg.error == "", fg.error
    checked = {p.id for p in r.properties if any(c.language in (lang, "any") for c in p.static.checks)}
    missed = {g.property_id: g.reason for g in fg.properties if g.property_id in checked and g.verdict != "present"}
    allowed = {pid for (tid, pid) in EXPERT_DEVIATIONS if tid == task_id}
    assert set(missed) == allowed, {"missed": missed, "allowed deviations": sorted(allowed)}
