"""The fake server speaks the API the real openai client expects."""

import json

import openai
import pytest

from tests.fakes.openai_server import FakeOpenAI


def test_content_tool_calls_and_errors():
    script = [
        {"content": "hello"},
        {"content": None, "tool_calls": [{"name": "write_file", "arguments": json.dumps({"path": "k.py"})}]},
        {"status": 400, "body": {"error": {"message": "bad request", "type": "invalid_request_error"}}},
    ]
    with FakeOpenAI(script) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="test", max_retries=0)
        r1 = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert r1.choices[0].message.content == "hello"
        r2 = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "go"}])
        call = r2.choices[0].message.tool_calls[0]
        assert call.function.name == "write_file" and json.loads(call.function.arguments) == {"path": "k.py"}
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert [r["messages"][0]["content"] for r in srv.requests] == ["hi", "go", "x"]
