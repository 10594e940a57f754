"""Every test here gets an API key in the environment and a clean record of fake-evaluator calls."""

from __future__ import annotations

import pytest

from tests.runner_agent.helpers import CALLS


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.delenv("D2KGRADE_API_KEY", raising=False)
    monkeypatch.delenv("D2KGRADE_MODEL", raising=False)
    monkeypatch.delenv("D2KGRADE_BASE_URL", raising=False)
    CALLS.clear()
