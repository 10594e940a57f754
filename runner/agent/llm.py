"""The model side: one chat-completions call with retries, and tool calls parsed natively or from text.

Retries (exponential backoff from ``backoff_s``, doubling, +-25% jitter, capped at ``backoff_max_s``; a server's
``Retry-After`` is honoured up to the cap): 408, 409, 429 and 5xx answers, timeouts, connection errors and
malformed bodies. Other 4xx answers are not retried: a 400 that mentions tools while tools were sent raises
:class:`ToolsUnsupported` (the episode falls back to text tool calls); anything else raises :class:`ApiFailure`,
which ends the episode as ``failed`` (and a resume runs it again).

**Text fallback** (servers without function calling, ``tool_mode = "text"``): the model writes each call as a
fenced block whose info string is ``tool``, holding one JSON object with ``name`` and ``arguments``::

    ```tool
    {"name": "write_file", "arguments": {"path": "kernel.py", "content": "import triton\\n..."}}
    ```

Several blocks in one reply are several calls, run in order. Results come back as a user message per call,
starting ``[tool result: NAME (call ID)]``. A reply in native mode with no native tool calls is also searched for
such blocks (some models write them anyway).
"""

from __future__ import annotations

import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}


class ApiFailure(RuntimeError):
    """The API could not give an answer (non-retryable error, or retries exhausted)."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class ToolsUnsupported(ApiFailure):
    """The server refused the request because of its ``tools`` parameter."""


class Cancelled(RuntimeError):
    """The run is stopping (Ctrl-C, wall budget): give up waiting."""


@dataclass
class ToolCall:
    """One call the model asked for; ``arguments`` is the raw JSON text (possibly malformed) or an object."""

    id: str
    name: str
    arguments: Any
    source: str = "native"


@dataclass
class Completion:
    """One model answer."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    usage_known: bool = True
    attempts: int = 1
    wall_s: float = 0.0


_FENCE_RE = re.compile(r"```[ \t]*(tool|tool_call|tool_code)[ \t]*\n(.*?)\n[ \t]*```[ \t]*(?=\n|$)", re.S)


def parse_text_tool_calls(text: str, *, start_index: int = 0) -> tuple[list[ToolCall], str]:
    """Tool calls written as fenced ```tool blocks, and the text without them.

    A block that is not a JSON object with a string ``name`` still becomes a call (named ``(unparsable)`` or by
    its name) so the agent is told what was wrong with it instead of it being silently ignored.
    """
    calls: list[ToolCall] = []
    for i, m in enumerate(_FENCE_RE.finditer(text or "")):
        body = m.group(2).strip()
        cid = f"text_{start_index + i}"
        try:
            obj = json.loads(body)
        except json.JSONDecodeError as exc:
            calls.append(ToolCall(cid, "(unparsable)", f"not valid JSON: {exc.msg} at char {exc.pos}", "text"))
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            calls.append(ToolCall(cid, "(unparsable)", "a tool block must hold {\"name\": ..., \"arguments\": {...}}",
                                  "text"))
            continue
        args = obj.get("arguments", obj.get("parameters", {}))
        calls.append(ToolCall(cid, obj["name"], args, "text"))
    prose = _FENCE_RE.sub("", text or "").strip()
    return calls, prose


def render_text_call(call: ToolCall) -> str:
    """A call rendered back as a fenced block (for the text-mode history)."""
    args = call.arguments
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            pass
    return "```tool\n" + json.dumps({"name": call.name, "arguments": args}, ensure_ascii=False) + "\n```"


class ChatClient:
    """A chat-completions client for one episode (the ``openai`` client with its own retries turned off)."""

    def __init__(self, *, model: str, base_url: str | None, api_key: str, timeout_s: float = 600.0,
                 retries: int = 6, backoff_s: float = 2.0, backoff_max_s: float = 120.0,
                 temperature: float | None = None, max_output_tokens: int | None = None,
                 cancel: threading.Event | None = None, sleep: Callable[[float], None] | None = None,
                 top_p: float | None = None, seed: int | None = None) -> None:
        import openai

        self._openai = openai
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)
        self.model = model
        self.retries = retries
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self.max_output_tokens = max_output_tokens
        self.cancel = cancel or threading.Event()
        self._sleep = sleep

    def _wait(self, seconds: float) -> None:
        if self._sleep is not None:
            self._sleep(seconds)
        elif self.cancel.wait(seconds):
            raise Cancelled("run cancelled while waiting to retry")

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        base = self.backoff_s * (2 ** attempt) * random.uniform(0.75, 1.25)
        if retry_after is not None:
            base = max(base, retry_after)
        return min(base, self.backoff_max_s)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Completion:
        """One answer, retried on transient errors. Raises ApiFailure, ToolsUnsupported or Cancelled."""
        oa = self._openai
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
        for name in ("temperature", "top_p", "seed"):
            if getattr(self, name) is not None:
                kwargs[name] = getattr(self, name)
        if self.max_output_tokens is not None:
            kwargs["max_tokens"] = self.max_output_tokens
        t0 = time.monotonic()
        last = ""
        for attempt in range(self.retries + 1):
            if self.cancel.is_set():
                raise Cancelled("run cancelled")
            retry_after: float | None = None
            try:
                resp = self.client.chat.completions.create(**kwargs)
                if not getattr(resp, "choices", None):
                    raise ValueError("the response holds no choices")
                return self._completion(resp, attempt + 1, time.monotonic() - t0)
            except oa.APIStatusError as exc:
                status = exc.status_code
                last = f"HTTP {status}: {_error_message(exc)}"
                if status not in RETRYABLE_STATUS:
                    if tools and status in (400, 422) and "tool" in last.lower():
                        raise ToolsUnsupported(last, attempt + 1) from None
                    raise ApiFailure(last, attempt + 1) from None
                retry_after = _retry_after(exc)
            except (oa.APITimeoutError, oa.APIConnectionError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            except (oa.APIResponseValidationError, ValueError, KeyError, TypeError, AttributeError) as exc:
                last = f"malformed response ({type(exc).__name__}: {exc})"
            if attempt < self.retries:
                delay = self._delay(attempt, retry_after)
                log.warning("API error (%s); retry %d/%d in %.1f s", last, attempt + 1, self.retries, delay)
                self._wait(delay)
        raise ApiFailure(f"gave up after {self.retries + 1} attempts; last error: {last}", self.retries + 1)

    @staticmethod
    def _completion(resp: Any, attempts: int, wall: float) -> Completion:
        choice = resp.choices[0]
        msg = choice.message
        calls = [ToolCall(c.id or f"call_{i}", c.function.name, c.function.arguments or "")
                 for i, c in enumerate(getattr(msg, "tool_calls", None) or []) if getattr(c, "function", None)]
        usage = getattr(resp, "usage", None)
        tin = int(getattr(usage, "prompt_tokens", 0) or 0) if usage else 0
        tout = int(getattr(usage, "completion_tokens", 0) or 0) if usage else 0
        return Completion(msg.content or "", calls, choice.finish_reason, tin, tout, usage is not None, attempts, wall)


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:500]
    return str(exc)[:500]


def _retry_after(exc: Any) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (AttributeError, ValueError):
        return None


PREFLIGHT_TIMEOUT_S = 10.0
"""Seconds the pre-flight request may take: a live server answers ``/models`` in milliseconds."""


class EndpointUnusable(RuntimeError):
    """The pre-flight request found the endpoint dead or refusing; the message names the URL and the answer."""


def preflight(*, base_url: str | None, api_key: str, model: str, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> str:
    """One ``GET {base_url}/models`` before a run plans any episode, so a dead endpoint costs seconds, not the
    ~140 s of retries per episode it would cost inside the run.

    Returns a note for the log (the URL, the answer, and whether the model is listed). A 404 passes (some
    servers have no ``/models``); a model missing from the list is only noted (proxies list aliases apart).

    Raises:
        EndpointUnusable: no answer within ``timeout_s`` (connection refused, DNS, timeout), the key refused
            (401/403), or a server error (5xx).
    """
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)
    url = str(client.base_url).rstrip("/")
    t0 = time.monotonic()
    try:
        page = client.models.list()
    except (openai.APITimeoutError, openai.APIConnectionError) as exc:
        cause = exc.__cause__ or exc.__context__
        why = f"{type(exc).__name__}" + (f" ({cause})" if cause else f" ({exc})")
        raise EndpointUnusable(f"the endpoint {url} gave no answer to GET /models within "
                               f"{time.monotonic() - t0:.1f} s: {why}; start the server or fix --base-url") from None
    except openai.APIStatusError as exc:
        answer = f"HTTP {exc.status_code}: {_error_message(exc)}"
        if exc.status_code == 404:
            return f"{url}: GET /models answered {answer} (this server lists no models); going on"
        if exc.status_code in (401, 403):
            raise EndpointUnusable(f"the endpoint {url} refused the API key (GET /models answered {answer}); set "
                                   "D2KGRADE_API_KEY or OPENAI_API_KEY") from None
        if exc.status_code >= 500 or exc.status_code == 429:
            raise EndpointUnusable(f"the endpoint {url} is not healthy (GET /models answered {answer})") from None
        return f"{url}: GET /models answered {answer}; going on"
    ids = [m.id for m in getattr(page, "data", []) or []]
    listed = model in ids
    note = f"{url}: answered in {time.monotonic() - t0:.2f} s, {len(ids)} model(s) listed"
    if ids and not listed:
        shown = ", ".join(ids[:8]) + (", ..." if len(ids) > 8 else "")
        log.warning("the endpoint %s does not list model %r (it lists: %s); its episodes may fail on the API",
                    url, model, shown)
        return note + f", not {model!r}"
    return note + (f", {model!r} among them" if listed else "")
