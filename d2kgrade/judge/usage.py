"""What a judge run cost: requests, cache hits, retries, re-asks, tokens, and dollars from a price table.

A price table is YAML or JSON, model name to dollars per million tokens::

    gpt-4.1: {input: 2.0, output: 8.0}
    qwen3-coder: {input: 0, output: 0}
"""

from __future__ import annotations

import threading
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError

from d2kgrade.errors import Problem, SpecError
from d2kgrade.io import load_yaml, problems_from_validation


class Price(BaseModel):
    """Dollars per million tokens of one model."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    input: float = Field(ge=0)
    """Dollars per 1M prompt tokens."""
    output: float = Field(ge=0)
    """Dollars per 1M completion tokens."""


class PriceTable(RootModel[dict[str, Price]]):
    """Model name to :class:`Price`."""


def load_price_table(path: Path) -> PriceTable:
    """Load a price table; errors name the file and the entry."""
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise SpecError([Problem(str(path), "", "expected a mapping: model -> {input: $/1M, output: $/1M}")])
    try:
        return PriceTable.model_validate(data)
    except ValidationError as exc:
        raise SpecError(problems_from_validation(path, exc)) from None


class UsageReport(BaseModel):
    """Totals of one run (persisted next to grades; printed by the CLI)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    calls: int = 0
    """HTTP requests sent (retries and re-asks included)."""
    cache_hits: int = 0
    """Samples answered from the cache, with no request."""
    retries: int = 0
    """Requests repeated after a 429, 5xx, timeout or connection error."""
    reasks: int = 0
    """Requests that asked again after an invalid answer."""
    failures: int = 0
    """Samples that got no answer (retries exhausted, request rejected): ``unknown``, not cached."""
    tokens_in: int = 0
    """Prompt tokens of the requests sent."""
    tokens_out: int = 0
    """Completion tokens of the requests sent."""
    cost_usd: float | None = None
    """Cost of the requests sent, where a price table names the model."""


class Usage:
    """Thread-safe counters of one run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._c = {k: 0 for k in ("calls", "cache_hits", "retries", "reasks", "failures", "tokens_in", "tokens_out")}

    def add(self, **counts: int) -> None:
        """Add to the named counters."""
        with self._lock:
            for k, v in counts.items():
                self._c[k] += v

    def report(self, model: str, prices: PriceTable | None = None) -> UsageReport:
        """The totals, with the cost when ``prices`` has ``model``."""
        with self._lock:
            r = UsageReport(**self._c)
        if prices is not None and model in prices.root:
            p = prices.root[model]
            r.cost_usd = r.tokens_in / 1e6 * p.input + r.tokens_out / 1e6 * p.output
        return r
