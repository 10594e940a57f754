"""The client against the fake server: backoff, Retry-After, timeouts, errors, response_format fallback."""

from __future__ import annotations

import pytest

from d2kgrade.errors import UserError
from d2kgrade.judge.answer import response_format
from d2kgrade.judge.client import ChatClient, RequestFailed, retry_after_seconds
from d2kgrade.judge.usage import Usage
from tests.fakes.openai_server import FakeOpenAI
from tests.judge.conftest import make_config

MSG = [{"role": "user", "content": "hi"}]
FMT = response_format()


def client_for(srv: FakeOpenAI, **kw) -> tuple[ChatClient, list[float]]:
    sleeps: list[float] = []
    return ChatClient(make_config(srv.base_url, **kw), Usage(), sleep=sleeps.append), sleeps


def test_429_honours_retry_after_and_5xx_back_off_exponentially():
    script = [{"status": 429, "headers": {"Retry-After": "0.03"}}, {"status": 500}, {"status": 503},
              {"content": "ok", "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}]
    with FakeOpenAI(script) as srv:
        c, sleeps = client_for(srv, backoff_base=0.01, backoff_max=1.0)
        reply = c.complete(MSG, schema_format=FMT, seed=5)
    assert reply.content == "ok" and (reply.tokens_in, reply.tokens_out) == (7, 3)
    assert sleeps[0] == pytest.approx(0.03)          # Retry-After, not the computed backoff
    assert 0.01 <= sleeps[1] <= 0.02 and 0.02 <= sleeps[2] <= 0.04   # base * 2**attempt, equal jitter
    r = c.usage.report("fake-judge")
    assert (r.calls, r.retries, r.tokens_in, r.tokens_out) == (4, 3, 7, 3)
    body = srv.requests[-1]
    assert body["temperature"] == 0 and body["seed"] == 5 and body["response_format"]["type"] == "json_schema"


def test_retry_after_is_capped_and_dates_parse():
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert retry_after_seconds({}) is None
    with FakeOpenAI([{"status": 429, "headers": {"Retry-After": "3600"}}, {"content": "ok"}]) as srv:
        c, sleeps = client_for(srv, backoff_max=0.05)
        c.complete(MSG, schema_format=FMT, seed=None)
    assert sleeps == [0.05]


def test_timeout_is_retried_then_exhausted_retries_fail():
    with FakeOpenAI([{"sleep": 1.0, "content": "late"}, {"content": "ok"}]) as srv:
        c, sleeps = client_for(srv, timeout=0.3)
        assert c.complete(MSG, schema_format=FMT, seed=None).content == "ok"
        assert len(sleeps) == 1
    with FakeOpenAI([{"status": 500}] * 3) as srv:
        c, sleeps = client_for(srv, max_retries=2)
        with pytest.raises(RequestFailed, match="HTTP 500 after 3 attempts"):
            c.complete(MSG, schema_format=FMT, seed=None)
        assert len(srv.requests) == 3


def test_malformed_body_is_retried():
    with FakeOpenAI([{"raw": "{not json"}, {"content": "ok"}]) as srv:
        c, sleeps = client_for(srv)
        assert c.complete(MSG, schema_format=FMT, seed=None).content == "ok" and len(sleeps) == 1


def test_bad_key_and_unknown_model_stop_with_a_user_error():
    with FakeOpenAI([{"status": 401}]) as srv:
        c, _ = client_for(srv)
        with pytest.raises(UserError, match="OPENAI_API_KEY"):
            c.complete(MSG, schema_format=FMT, seed=None)
    with FakeOpenAI([{"status": 404}]) as srv:
        c, _ = client_for(srv)
        with pytest.raises(UserError, match="no model 'fake-judge'"):
            c.complete(MSG, schema_format=FMT, seed=None)


def test_rejected_response_format_falls_back_and_stays_fallen_back():
    bad = {"status": 400, "body": {"error": {"message": "response_format json_schema not supported"}}}
    with FakeOpenAI([bad, bad, {"content": "a"}, {"content": "b"}, bad]) as srv:
        c, sleeps = client_for(srv)
        assert c.complete(MSG, schema_format=FMT, seed=1).content == "a"
        assert c.format_level == "none"
        assert c.complete(MSG, schema_format=FMT, seed=1).content == "b"
        kinds = [r.get("response_format", {}).get("type") for r in srv.requests]
        assert kinds == ["json_schema", "json_object", None, None]
        assert "seed" not in srv.requests[2] and sleeps == []
        # a 400 at the last level is a rejected request (too long, say): no endless loop
        with pytest.raises(RequestFailed, match="400"):
            c.complete(MSG, schema_format=FMT, seed=1)


def test_stopped_client_sends_nothing_more():
    with FakeOpenAI([{"content": "ok"}]) as srv:
        c, _ = client_for(srv)
        c.stop()
        with pytest.raises(RequestFailed, match="interrupted"):
            c.complete(MSG, schema_format=FMT, seed=None)
        assert srv.requests == []
