"""A host ``for`` over a literal tuple binds its target to each element (issue 16, host structure).

``corpus/paged_attention_decode/partial_gathered_contig.py`` launches one gather kernel per cache,
``for src, dst in ((k_cache, kc), (v_cache, vc)): _gather_pages[grid](src, ...)``: the kernel's ``src_ptr`` is
input 1 and input 2 of ``kernel(...)``, so ``int64-page-addressing`` (judged on the loads of inputs 1 and 2) must read
its ``page.to(tl.int64) * stride_sp`` gather. The lowering gives the target one definition per element (their
union, as ``x = a if c else b`` has two values); a loop over anything else keeps the one opaque definition.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from d2kgrade.static import extract_facts
from d2kgrade.static.corpus import load_labels
from d2kgrade.static.dataflow import flow
from d2kgrade.static.grade import grade_file
from d2kgrade.static.patterns.roles import entry_params, input_params_with_methods
from d2kgrade.suite import Suite

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TASK = "paged_attention_decode"
PROP = f"{TASK}.L3.int64-page-addressing"
FILE = HERE / "corpus" / TASK / "partial_gathered_contig.py"
WIDE = "src = page.to(tl.int64) * stride_sp"
LOOP = "for src, dst in ((k_cache, kc), (v_cache, vc)):"


@cache
def _suite():
    suite = Suite(ROOT)
    return suite.load_rubric(TASK), suite.load_task(TASK)


def _verdict(path: Path) -> str:
    rubric, task = _suite()
    fg = grade_file(rubric, path, task=task)
    assert not fg.error, fg.error
    return {g.property_id: g.verdict for g in fg.properties}[PROP]


def _variant(tmp_path: Path, *pairs: tuple[str, str]) -> Path:
    text = FILE.read_text()
    for old, new in pairs:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    out = tmp_path / "kernel.py"
    out.write_text(text)
    return out


def _gather_inputs(path: Path) -> dict[int, set[str]]:
    facts = extract_facts(path)
    fl = flow(facts)
    fn = facts.functions["_gather_pages"]
    return {i: entry_params(fl, facts, fn, i) | set(input_params_with_methods(fl, facts, fn, i)) for i in (1, 2)}


def test_the_corpus_file_is_labelled_and_graded_present():
    rubric, _ = _suite()
    assert load_labels(HERE / "corpus" / TASK, rubric)[FILE.name][PROP] == "present"
    assert _verdict(FILE) == "present"


def test_the_loop_binds_src_ptr_to_both_caches():
    assert _gather_inputs(FILE) == {1: {"src_ptr"}, 2: {"src_ptr"}}


def test_the_same_loop_with_an_int32_page_product_is_absent(tmp_path):
    weak = _variant(tmp_path, (WIDE, "src = page * stride_sp"))
    assert _gather_inputs(weak) == {1: {"src_ptr"}, 2: {"src_ptr"}}
    assert _verdict(weak) == "absent"


def test_a_list_literal_and_a_single_name_target_bind_too(tmp_path):
    one = _variant(tmp_path, (LOOP, "for src in [k_cache, v_cache]:\n        dst = kc if src is k_cache else vc"))
    assert _gather_inputs(one) == {1: {"src_ptr"}, 2: {"src_ptr"}}
    assert _verdict(one) == "present"


def test_a_loop_over_a_non_literal_iterable_keeps_one_opaque_definition(tmp_path):
    zipped = _variant(tmp_path, (LOOP, "for src, dst in zip((k_cache, v_cache), (kc, vc)):"))
    facts = extract_facts(zipped)
    defs = facts.functions["kernel"].defs()["src"]
    assert [(d.index, d.value.kind, d.value.op) for d in defs] == [(None, "call", "zip")]
    assert _gather_inputs(zipped) == {1: set(), 2: set()}
    assert _verdict(zipped) == "absent"


def test_device_loops_are_lowered_as_before(tmp_path):
    src = tmp_path / "k.py"
    src.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                   "def _k(a_ptr, b_ptr):\n    for p in (a_ptr, b_ptr):\n        tl.store(p, 0)\n\n\n"
                   "def kernel(a, b):\n    for t in (a, b):\n        _k[(1,)](t, t)\n    return a\n")
    facts = extract_facts(src)
    dev = facts.functions["_k"].defs()["p"]
    assert [(d.value.kind, d.value.op) for d in dev] == [("other", "loop-var")]
    host = facts.functions["kernel"].defs()["t"]
    assert [d.value.op for d in host] == ["a", "b"]
