"""``d2kgrade judge --judge llm|combined`` end to end: typer's CliRunner, the fake server, the real client."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from d2kgrade.cli import app
from tests.fakes.openai_server import FakeOpenAI
from tests.judge.conftest import Responder


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.delenv("D2KGRADE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("D2KGRADE_BASE_URL", raising=False)


def cli(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_llm_json_then_cached_rerun_then_table(kernel_file, note_file, tmp_path):
    cache, out = tmp_path / "cache.sqlite", tmp_path / "grades.jsonl"
    prices = tmp_path / "prices.yaml"
    prices.write_text("fake-judge: {input: 1.0, output: 2.0}\n")
    with FakeOpenAI(responder=Responder({("softmax.L3.exp2-fold", k): ["met"] for k in range(2)})) as srv:
        common = ["judge", "--task", "softmax", "--judge", "llm", "--model", "fake-judge", "--base-url",
                  srv.base_url, "--samples", "2", "--cache", str(cache), "--timeout", "5",
                  "--price-table", str(prices)]
        first = cli(*common, "--json", "--out", str(out), "--proposal", str(note_file), str(kernel_file))
        assert first.exit_code == 0, first.output
        data = json.loads(first.stdout)
        assert data["usage"]["calls"] == 36 and data["usage"]["cache_hits"] == 0  # 2 files x 9 props x 2 samples
        assert data["usage"]["cost_usd"] == pytest.approx((360 * 1.0 + 180 * 2.0) / 1e6)
        code = data["results"][0]
        assert code["kind"] == "code" and data["results"][1]["kind"] == "proposal"
        exp2 = next(p for p in code["properties"] if p["id"] == "softmax.L3.exp2-fold")
        assert exp2["judge"]["verdict"] == "present" and exp2["judge"]["evidence"][0]["start_line"] == 15
        assert exp2["static"] is None and exp2["combined"] is None
        assert code["scores"]["judge"] == pytest.approx(25 / 3)
        assert srv.requests[0]["model"] == "fake-judge"
        assert len(out.read_text().splitlines()) == 2
        n = len(srv.requests)
        again = cli(*common, "--json", str(kernel_file))
        assert json.loads(again.stdout)["usage"]["calls"] == 0 and len(srv.requests) == n
        table = cli(*common, str(kernel_file))
        assert table.exit_code == 0 and "exp2-fold" in table.stdout and "present" in table.stdout
        assert "0 requests, 18 cache hits" in table.stderr


def test_combined_cli_shows_all_three_verdicts(kernel_file, tmp_path):
    pytest.importorskip("d2kgrade.static.grade")
    with FakeOpenAI(responder=Responder({("softmax.L3.exp2-fold", 0): ["met"]})) as srv:
        res = cli("judge", "--task", "softmax", "--judge", "combined", "--model", "m", "--base-url", srv.base_url,
                  "--samples", "1", "--no-cache", "--json", str(kernel_file))
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    r = data["results"][0]
    assert set(r["scores"]) == {"static", "judge", "combined"} and r["scores"]["static"] is not None
    for p in r["properties"]:
        assert p["static"]["verdict"] in ("present", "absent", "unknown")
        assert p["combined"]["agreement"] in ("agree", "disagree", "static_only", "llm_only", "neither")
    assert data["fusion_rule_version"] == 2 and r["grades"]["combined"]["fusion_rule_version"] == 2


def test_user_mistakes_are_one_line(kernel_file, monkeypatch):
    # the real console script once: a missing key is one line naming the variables, exit 1, no traceback
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "D2KGRADE_API_KEY")}
    proc = subprocess.run([sys.executable, "-m", "d2kgrade", "judge", "--task", "softmax", "--judge", "llm",
                           "--model", "m", "--no-cache", str(kernel_file)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "set D2KGRADE_API_KEY or OPENAI_API_KEY" in proc.stderr
    monkeypatch.delenv("D2KGRADE_JUDGE_MODEL", raising=False)
    for args, needle in [
        (["--judge", "llm", "--no-cache", str(kernel_file)], "needs --model NAME"),
        (["--judge", "llm", "--model", "m", "--no-cache"], "nothing to judge"),
        (["--judge", "llm", "--model", "m", "--samples", "0", str(kernel_file)], "--samples must be >= 1"),
        (["--judge", "static", "--proposal", "n.md"], "need --judge llm or combined"),
        (["--judge", "llm", "--model", "m", "--no-cache", "missing.py"], "missing.py: no such file"),
    ]:
        res = CliRunner().invoke(app, ["judge", "--task", "softmax", *args])
        assert res.exit_code != 0 and needle in str(res.exception), (args, res.exception)


def test_judge_package_imports_neither_torch_nor_openai():
    code = ("import sys, d2kgrade.judge, d2kgrade.judge.run, d2kgrade.judge.episodes, d2kgrade.cli;"
            "bad = [m for m in ('torch', 'triton', 'openai') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
