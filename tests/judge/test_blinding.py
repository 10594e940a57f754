"""Blind judging: the judge sees neutral names only, so the same code from a guided and an unguided episode makes
byte-identical requests and one cache entry (issue 16, item 6)."""

from __future__ import annotations

import json

from d2kgrade.judge.cache import JudgeCache
from d2kgrade.judge.run import JudgeItem, judge_files
from tests.fakes.openai_server import FakeOpenAI
from tests.judge.conftest import KERNEL, NOTE, Responder, make_config

EPISODES = {"softmax.guided-all.s0": ("guided", "v003_kernel.py"), "softmax.none.s1": ("unguided", "v007_kernel.py")}
REVEALING = ["guided", "unguided", "none.s1", "s0", "v003", "v007", "episodes", "rubric version", "grok-9"]


def _items(tmp_path, kind="code"):
    items = []
    for ep, (_arm, version) in EPISODES.items():
        folder = tmp_path / "episodes" / ep / ("kernels" if kind == "code" else "")
        folder.mkdir(parents=True, exist_ok=True)
        name = version if kind == "code" else "design_note.md"
        (folder / name).write_text(KERNEL if kind == "code" else NOTE)
        rel = (folder / name).relative_to(tmp_path)
        items.append(JudgeItem(folder / name, kind=kind, item=ep, display=str(rel)))
    return items


def _bodies(requests):
    return [json.dumps(r, sort_keys=True).encode() for r in requests]


def test_same_code_from_both_arms_makes_byte_identical_requests(rubric, tmp_path):
    items = _items(tmp_path)
    with FakeOpenAI(responder=Responder()) as srv:
        cfg = make_config(srv.base_url, concurrency=1)
        for it in items:  # no cache: every request reaches the server
            judge_files(rubric, [it], cfg, cache=None, use_static_backend=True)
    n = len(srv.requests) // 2
    assert n == len([p for p in rubric.properties if not p.deprecated])
    first, second = _bodies(srv.requests[:n]), _bodies(srv.requests[n:])
    assert first == second  # byte for byte, static facts included
    for body in first:
        text = body.decode()
        assert not [w for w in REVEALING if w in text], [w for w in REVEALING if w in text]


def test_same_code_from_both_arms_is_one_cache_entry(rubric, tmp_path):
    items = _items(tmp_path)
    cache = JudgeCache(tmp_path / "c.sqlite")
    with FakeOpenAI(responder=Responder({("softmax.L3.exp2-fold", 0): ["met"]})) as srv:
        run = judge_files(rubric, items, make_config(srv.base_url, concurrency=1), cache=cache,
                          use_static_backend=True)
    n_props = len([p for p in rubric.properties if not p.deprecated])
    assert len(srv.requests) == n_props and run.usage.cache_hits == n_props
    a, b = (r.llm for r in run.results)
    assert [g.verdict for g in a.properties] == [g.verdict for g in b.properties]
    assert (a.item, b.item) == tuple(EPISODES)  # the grades still say which episode they belong to
    assert a.file.endswith("v003_kernel.py") and b.file.endswith("v007_kernel.py")


def test_design_notes_are_blind_too(rubric, tmp_path):
    items = _items(tmp_path, kind="proposal")
    with FakeOpenAI(responder=Responder()) as srv:
        cfg = make_config(srv.base_url, concurrency=1)
        for it in items:
            judge_files(rubric, [it], cfg, cache=None, use_static_backend=False)
    n = len(srv.requests) // 2
    assert _bodies(srv.requests[:n]) == _bodies(srv.requests[n:])
    assert "design_note.md" not in srv.requests[0]["messages"][1]["content"]
