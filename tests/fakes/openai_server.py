"""A local OpenAI-compatible chat-completions server for tests, driven through the real ``openai`` client.

Scripted: each request pops the next step from a queue, or asks a responder function. A step is one of

- ``{"content": "...", "tool_calls": [{"name": ..., "arguments": "<json>"}], "usage": {...}}``: a completion;
- ``{"status": 429}`` / ``{"status": 500, "body": {...}}``: an HTTP error (``"headers": {"Retry-After": "1"}``
  adds response headers to any step);
- ``{"sleep": 3.0, ...}``: wait before answering (for client timeouts), then answer the rest of the step;
- ``{"raw": "..."}``: send this body as is (malformed JSON and the like).

Every request body is kept in ``server.requests`` for assertions, and the paths of GET requests in
``server.gets``. ``GET /models`` lists ``models`` (``models_status`` other than 200 answers that error instead),
for the runner's pre-flight request. Use as a context manager::

    with FakeOpenAI(script=[{"content": "hi"}]) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="test")
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = dict[str, Any]
Responder = Callable[[dict[str, Any]], Step]


def completion(step: Step, model: str) -> dict[str, Any]:
    """A chat.completion body for a scripted step."""
    message: dict[str, Any] = {"role": "assistant", "content": step.get("content")}
    calls = step.get("tool_calls") or []
    if calls:
        message["tool_calls"] = [
            {"id": c.get("id") or f"call_{uuid.uuid4().hex[:8]}", "type": "function",
             "function": {"name": c["name"], "arguments": c.get("arguments", "{}")}}
            for c in calls
        ]
    usage = step.get("usage") or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": step.get("finish_reason") or ("tool_calls" if calls else "stop")}],
        "usage": usage,
    }


class FakeOpenAI:
    """The server; ``script`` is consumed in order, then ``responder`` (if any) answers."""

    def __init__(self, script: list[Step] | None = None, responder: Responder | None = None, *,
                 models: tuple[str, ...] = ("fake", "fake-model"), models_status: int = 200) -> None:
        self.script: deque[Step] = deque(script or [])
        self.responder = responder
        self.models = models
        self.models_status = models_status
        self.requests: list[dict[str, Any]] = []
        self.gets: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        # poll_interval 0.05: shutdown() waits up to one interval; the default 0.5 s adds up over many tests
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def next_step(self, body: dict[str, Any]) -> Step:
        with self._lock:
            self.requests.append(body)
            if self.script:
                return self.script.popleft()
        if self.responder is not None:
            return self.responder(body)
        return {"status": 500, "body": {"error": {"message": "fake server: script exhausted"}}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, str(value))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:  # noqa: N802
                fake.gets.append(self.path)
                if self.path.rstrip("/").endswith("/models") and fake.models_status != 200:
                    self._send(fake.models_status, json.dumps(
                        {"error": {"message": f"fake /models error {fake.models_status}"}}).encode())
                elif self.path.rstrip("/").endswith("/models"):
                    self._send(200, json.dumps({"object": "list", "data": [{"id": m, "object": "model"}
                                                                           for m in fake.models]}).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, b'{"error": {"message": "bad json"}}')
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                step = fake.next_step(body)
                if "sleep" in step:
                    time.sleep(float(step["sleep"]))
                headers = step.get("headers")
                if "raw" in step:
                    self._send(int(step.get("status", 200)), str(step["raw"]).encode(), headers)
                elif "status" in step and int(step["status"]) != 200:
                    err = step.get("body") or {"error": {"message": f"fake error {step['status']}",
                                                         "type": "fake"}}
                    self._send(int(step["status"]), json.dumps(err).encode(), headers)
                else:
                    self._send(200, json.dumps(completion(step, body.get("model", "fake"))).encode(), headers)

        return Handler
