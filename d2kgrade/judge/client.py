"""The chat-completions client: retries with backoff, timeouts, and a fallback for servers without JSON Schema.

Built on the official ``openai`` client with its own retries off, so every retry is counted and bounded here:
429, 5xx, 408/409, timeouts and connection errors wait ``backoff_base * 2**attempt`` seconds (equal jitter:
half fixed, half random; capped at ``backoff_max``), or what the server's ``Retry-After`` says (also capped),
up to ``max_retries`` times. 401/403 and 404 stop the run with a :class:`~d2kgrade.errors.UserError` (a wrong
key or model would fail every request alike).

Structured output is asked for as ``response_format: json_schema``. A server that rejects it (400/422) is asked
again with ``json_object``, then with no ``response_format`` and no ``seed``; the level that worked is kept for
the rest of the run. Whatever the level, the answer is parsed and validated by the caller.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from d2kgrade.errors import UserError
from d2kgrade.judge.settings import JudgeConfig
from d2kgrade.judge.usage import Usage

log = logging.getLogger(__name__)
FORMAT_LEVELS = ("json_schema", "json_object", "none")


class RequestFailed(Exception):
    """A request got no usable reply: retries exhausted, or rejected for this input (too long...)."""


@dataclass(frozen=True)
class ChatReply:
    """One completion."""

    content: str | None
    """The message content."""
    finish_reason: str | None
    """``stop``, ``length``..."""
    tokens_in: int
    """Prompt tokens (0 when the server reports no usage)."""
    tokens_out: int
    """Completion tokens."""


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds from ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms``; None when absent."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(0.0, parsed.timestamp() - time.time())


class ChatClient:
    """Thread-safe: one instance serves all worker threads of a run."""

    def __init__(self, config: JudgeConfig, usage: Usage, *, sleep: Any = time.sleep) -> None:
        import openai  # imported here: the CLI must start without paying for it

        self._openai = openai
        self.config = config
        self.usage = usage
        self._sleep = sleep
        self._client = openai.OpenAI(api_key=config.api_key or "unset", base_url=config.base_url,
                                     max_retries=0, timeout=config.timeout)
        self._level = 0  # index into FORMAT_LEVELS
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def stop(self) -> None:
        """Send no more requests (an interrupted run): the next attempt of every worker fails at once, so the
        process exits after the requests in flight instead of after all their retries."""
        self._stopped.set()

    @property
    def format_level(self) -> str:
        """The structured-output level in use: ``json_schema``, ``json_object`` or ``none``."""
        return FORMAT_LEVELS[self._level]

    def _params(self, messages: list[dict[str, str]], schema_format: dict[str, Any], seed: int | None,
                level: int) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.config.model, "messages": messages,
                                  "temperature": self.config.temperature, "max_tokens": self.config.max_tokens}
        if FORMAT_LEVELS[level] == "json_schema":
            params["response_format"] = schema_format
        elif FORMAT_LEVELS[level] == "json_object":
            params["response_format"] = {"type": "json_object"}
        if seed is not None and FORMAT_LEVELS[level] != "none":
            params["seed"] = seed
        return params

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        if retry_after is not None:
            return min(retry_after, self.config.backoff_max)
        cap = min(self.config.backoff_max, self.config.backoff_base * (2 ** attempt))
        return cap / 2 + random.uniform(0, cap / 2)

    def complete(self, messages: list[dict[str, str]], *, schema_format: dict[str, Any],
                 seed: int | None) -> ChatReply:
        """One chat completion, retried as the module docstring says.

        Raises:
            RequestFailed: no usable reply (the sample becomes ``unknown`` and is not cached).
            UserError: the key, the permissions or the model are wrong.
        """
        oa = self._openai
        attempt = 0
        while True:
            if self._stopped.is_set():
                raise RequestFailed("the run was interrupted")
            level = self._level
            params = self._params(messages, schema_format, seed, level)
            self.usage.add(calls=1)
            try:
                resp = self._client.chat.completions.create(**params)
            except (oa.AuthenticationError, oa.PermissionDeniedError) as exc:
                raise UserError(f"the judge server refused the API key ({exc.status_code}): check "
                                "D2KGRADE_API_KEY / OPENAI_API_KEY and --base-url") from None
            except oa.NotFoundError:
                raise UserError(f"the judge server has no model {self.config.model!r} (404) at "
                                f"{self.config.base_url or 'the default base URL'}") from None
            except (oa.BadRequestError, oa.UnprocessableEntityError) as exc:
                with self._lock:
                    if self._level == level and level + 1 < len(FORMAT_LEVELS):
                        self._level = level + 1
                        log.info("server rejected response_format=%s (%s); falling back to %s",
                                 FORMAT_LEVELS[level], exc.status_code, FORMAT_LEVELS[self._level])
                        continue
                    if self._level != level:
                        continue  # another thread already fell back: retry at its level
                raise RequestFailed(f"request rejected ({exc.status_code}): {_message(exc)}") from None
            except (oa.RateLimitError, oa.InternalServerError, oa.APITimeoutError, oa.APIConnectionError,
                    oa.APIStatusError, oa.APIResponseValidationError, json.JSONDecodeError) as exc:
                # a malformed body (JSONDecodeError, validation error) is a proxy or server hiccup: retried too
                status = getattr(exc, "status_code", None)
                if isinstance(exc, oa.APIStatusError) and not isinstance(exc, (oa.RateLimitError,
                                                                               oa.InternalServerError)):
                    if status not in (408, 409):
                        raise RequestFailed(f"request failed ({status}): {_message(exc)}") from None
                what = f"HTTP {status}" if status else type(exc).__name__
                if attempt >= self.config.max_retries:
                    raise RequestFailed(f"{what} after {attempt + 1} attempts") from None
                response = getattr(exc, "response", None)
                wait = self.backoff(attempt, retry_after_seconds(getattr(response, "headers", None)))
                log.info("judge request: %s; retry %d/%d in %.2fs", what, attempt + 1, self.config.max_retries, wait)
                self.usage.add(retries=1)
                self._sleep(wait)
                attempt += 1
                continue
            return self._reply(resp)

    def _reply(self, resp: Any) -> ChatReply:
        usage = getattr(resp, "usage", None)
        tin = int(getattr(usage, "prompt_tokens", 0) or 0)
        tout = int(getattr(usage, "completion_tokens", 0) or 0)
        self.usage.add(tokens_in=tin, tokens_out=tout)
        choices = getattr(resp, "choices", None) or []
        if not choices:
            return ChatReply(None, None, tin, tout)
        msg = choices[0].message
        return ChatReply(getattr(msg, "content", None), choices[0].finish_reason, tin, tout)

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    return str(exc)[:300]
