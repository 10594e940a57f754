"""The judge's settings, resolved once (CLI flags over environment over defaults) and passed down frozen."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from d2kgrade.errors import UserError

API_KEY_VARS = ("D2KGRADE_API_KEY", "OPENAI_API_KEY")
"""Environment variables read for the API key, first found wins."""
BASE_URL_VARS = ("D2KGRADE_BASE_URL", "OPENAI_BASE_URL")
"""Environment variables read for the base URL when ``--base-url`` is not given."""


def default_cache_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/d2kgrade/judge.sqlite`` (``~/.cache`` when unset)."""
    env = os.environ if env is None else env
    root = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "d2kgrade" / "judge.sqlite"


def resolve_api_key(env: Mapping[str, str] | None = None) -> str:
    """The API key from the environment, or a UserError naming the variables to set."""
    env = os.environ if env is None else env
    for var in API_KEY_VARS:
        if env.get(var):
            return env[var]
    raise UserError("the LLM judge needs an API key: set D2KGRADE_API_KEY or OPENAI_API_KEY "
                    "(for a local server that takes none, set either to any value)")


def resolve_base_url(flag: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """``--base-url``, else the first of :data:`BASE_URL_VARS` set, else None (the client's default)."""
    env = os.environ if env is None else env
    if flag:
        return flag.rstrip("/")
    for var in BASE_URL_VARS:
        if env.get(var):
            return env[var].rstrip("/")
    return None


@dataclass(frozen=True)
class JudgeConfig:
    """Everything that decides how the judge asks; the decoding fields also key the cache."""

    model: str
    """Model name as the server knows it."""
    api_key: str = field(default="", repr=False)
    """API key (never logged, never stored in results)."""
    base_url: str | None = None
    """OpenAI-compatible endpoint (``http://host:8000/v1``); None = the client's default (api.openai.com)."""
    samples: int = 3
    """Samples per property; the verdict is their majority vote."""
    temperature: float = 0.0
    """Sampling temperature."""
    seed: int | None = 0
    """Base seed; sample k sends ``seed + k``. None sends no seed."""
    max_tokens: int = 2048
    """Completion token limit per request."""
    concurrency: int = 4
    """Requests in flight."""
    timeout: float = 120.0
    """Seconds per request before it counts as timed out (and is retried)."""
    max_retries: int = 6
    """Retries of one request after 429, 5xx, timeouts and connection errors."""
    backoff_base: float = 1.0
    """First backoff in seconds; doubles per retry, with jitter, capped at ``backoff_max``."""
    backoff_max: float = 60.0
    """Longest wait between retries (also caps a server's Retry-After)."""
    max_reasks: int = 2
    """Re-asks after an invalid answer before the sample counts as unparseable (``unknown``)."""
    batch: Literal["property", "level"] = "property"
    """One request per property, or one per level holding all its properties."""
    facts: bool = True
    """Show the static analyser's facts of a code file as labelled context."""
    max_document_chars: int = 200_000
    """Longer files are not sent; their properties are ``unknown`` with the reason."""

    def __post_init__(self) -> None:
        checks = [(self.model.strip() != "", "--model must name a model"),
                  (self.samples >= 1, f"--samples must be >= 1, got {self.samples}"),
                  (self.concurrency >= 1, f"--concurrency must be >= 1, got {self.concurrency}"),
                  (self.timeout > 0, f"--timeout must be > 0, got {self.timeout}"),
                  (self.max_retries >= 0 and self.max_reasks >= 0, "retries and re-asks must be >= 0"),
                  (self.temperature >= 0, f"temperature must be >= 0, got {self.temperature}"),
                  (self.batch in ("property", "level"), f"batch must be 'property' or 'level', got {self.batch!r}")]
        for ok, msg in checks:
            if not ok:
                raise UserError(msg)

    def decoding(self) -> dict[str, object]:
        """The settings that shape an answer (they key the cache and are recorded with each grade)."""
        return {"temperature": self.temperature, "seed": self.seed, "max_tokens": self.max_tokens,
                "max_reasks": self.max_reasks, "batch": self.batch, "facts": self.facts}

    def public(self) -> dict[str, object]:
        """The settings as data, without the key."""
        out = asdict(self)
        out.pop("api_key")
        return out
