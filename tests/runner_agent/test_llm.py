"""The chat client: backoff, Retry-After, which errors are retried, tool refusal."""

from __future__ import annotations

import pytest

from runner.agent.llm import ApiFailure, ChatClient, ToolsUnsupported
from tests.fakes.openai_server import FakeOpenAI


def _client(url: str, delays: list[float], **kw) -> ChatClient:
    return ChatClient(model="m", base_url=url, api_key="k", timeout_s=5, sleep=delays.append, **kw)


def test_backoff_doubles_and_honours_retry_after():
    script = [{"status": 500}, {"status": 502}, {"status": 429, "headers": {"Retry-After": "7"}},
              {"content": "ok", "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}}]
    delays: list[float] = []
    with FakeOpenAI(script) as srv:
        c = _client(srv.base_url, delays, retries=5, backoff_s=1.0, backoff_max_s=60).complete(
            [{"role": "user", "content": "hi"}])
    assert (c.content, c.attempts, c.tokens_in, c.tokens_out) == ("ok", 4, 11, 3)
    assert 0.75 <= delays[0] <= 1.25 and 1.5 <= delays[1] <= 2.5 and delays[2] == 7.0
    delays.clear()
    with FakeOpenAI([{"status": 429, "headers": {"Retry-After": "900"}}, {"content": "ok"}]) as srv:
        _client(srv.base_url, delays, retries=2, backoff_s=1.0, backoff_max_s=30).complete([{"role": "user",
                                                                                               "content": "x"}])
    assert delays == [30]  # capped


def test_what_is_not_retried():
    delays: list[float] = []
    with FakeOpenAI([{"status": 400, "body": {"error": {"message": "tool_choice/tools are not supported"}}},
                     {"status": 400, "body": {"error": {"message": "context too long"}}},
                     {"status": 403}]) as srv:
        c = _client(srv.base_url, delays, retries=3)
        with pytest.raises(ToolsUnsupported):
            c.complete([{"role": "user", "content": "x"}], tools=[{"type": "function", "function": {
                "name": "t", "parameters": {"type": "object", "properties": {}}}}])
        with pytest.raises(ApiFailure, match="context too long") as e1:
            c.complete([{"role": "user", "content": "x"}])
        with pytest.raises(ApiFailure, match="HTTP 403") as e2:
            c.complete([{"role": "user", "content": "x"}])
    assert delays == [] and e1.value.attempts == e2.value.attempts == 1 and not isinstance(e1.value, ToolsUnsupported)
    with FakeOpenAI([{"status": 503}] * 3) as srv:
        with pytest.raises(ApiFailure, match="gave up after 3 attempts; last error: HTTP 503"):
            _client(srv.base_url, delays, retries=2, backoff_s=0.0).complete([{"role": "user", "content": "x"}])
