"""The answer schema and parser: what a server that does not enforce schemas may send back."""

from __future__ import annotations

import json

import pytest

from d2kgrade.judge.answer import AnswerError, answer_schema, parse_answers, response_format

PID = "softmax.L1.online-normalizer"
GOOD = {"evidence": [{"quote": "m = tl.max(x, 0)", "start_line": 14, "end_line": 14}], "reasoning": "r",
        "verdict": "met"}


def test_plain_fenced_and_prose_wrapped_json_parse():
    for content in (json.dumps(GOOD), "```json\n" + json.dumps(GOOD) + "\n```",
                    "Here is my answer:\n" + json.dumps(GOOD) + "\nThanks."):
        a = parse_answers(content, [PID], batch=False)[PID]
        assert a.verdict == "met" and a.evidence[0].start_line == 14


def test_verdict_spelling_is_normalized_but_unknown_words_are_not():
    assert parse_answers(json.dumps({**GOOD, "verdict": "Not Met"}), [PID], batch=False)[PID].verdict == "not_met"
    assert parse_answers(json.dumps({**GOOD, "verdict": "not-applicable"}), [PID],
                         batch=False)[PID].verdict == "not_applicable"
    with pytest.raises(AnswerError, match="verdict"):
        parse_answers(json.dumps({**GOOD, "verdict": "probably"}), [PID], batch=False)


@pytest.mark.parametrize("content,match", [
    ("{not json", "not valid JSON"),
    ("", "empty"),
    ("[1, 2]", "JSON list"),
    (json.dumps({"reasoning": "r", "verdict": "met"}), "evidence"),
    (json.dumps({**GOOD, "extra": 1}), "extra"),
    (json.dumps({**GOOD, "evidence": [{"quote": "x", "start_line": 0, "end_line": 1}]}), "start_line"),
])
def test_invalid_replies_raise_with_a_reason(content, match):
    with pytest.raises(AnswerError, match=match):
        parse_answers(content, [PID], batch=False)


def test_cut_off_reply_is_invalid_even_if_it_parses():
    with pytest.raises(AnswerError, match="cut off"):
        parse_answers(json.dumps(GOOD), [PID], batch=False, finish_reason="length")


def test_batch_needs_every_property_once():
    ids = ["a.L1.x", "a.L1.y"]
    items = [{"property_id": i, **GOOD} for i in ids]
    got = parse_answers(json.dumps({"answers": items}), ids, batch=True)
    assert set(got) == set(ids)
    with pytest.raises(AnswerError, match="lacks"):
        parse_answers(json.dumps({"answers": items[:1]}), ids, batch=True)
    with pytest.raises(AnswerError, match="twice"):
        parse_answers(json.dumps({"answers": [items[0], items[0]]}), ids, batch=True)
    with pytest.raises(AnswerError, match="not asked"):
        parse_answers(json.dumps({"answers": [*items, {**items[0], "property_id": "a.L1.z"}]}), ids, batch=True)


def test_schema_is_strict_mode_compatible_and_orders_evidence_first():
    s = answer_schema()
    assert list(s["properties"]) == ["evidence", "reasoning", "verdict"]
    assert s["additionalProperties"] is False and set(s["required"]) == set(s["properties"])
    b = response_format(["a.L1.x"])["json_schema"]
    assert b["strict"] is True
    item = b["schema"]["properties"]["answers"]["items"]
    assert item["properties"]["property_id"]["enum"] == ["a.L1.x"]
