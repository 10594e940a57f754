"""Fixtures of the viewer and report tests: a paired run made through the CLI (``run`` against the local
OpenAI-compatible server, ``judge --run``), its site and report; a Chromium driven by Playwright."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.view.pipeline import ROOT, cli, make_paired_run

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "", shutil.which("chromium-browser")
                             or "") if p and Path(p).is_file()), None)
# CI sets this: there the browser tests must run, never skip (scripts/setup.sh installs Debian's chromium)
REQUIRE = os.environ.get("D2KGRADE_REQUIRE_CHROMIUM") == "1"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run"]


@dataclass
class PairedRun:
    run: Path
    site: Path
    report: Path


@pytest.fixture(scope="session")
def paired(tmp_path_factory) -> PairedRun:
    """softmax: both arms fix a bug and submit (unguided: a simpler kernel); layernorm: the unguided agent never
    submits, the guided one submits a wrong kernel. Then ``view`` (with the H200 reference figures) and
    ``report`` through the CLI."""
    from tests.runner_agent.helpers import FIXED_SOFTMAX

    root = tmp_path_factory.mktemp("paired")
    run = make_paired_run(root, behaviour={("layernorm", "unguided"): "silent", ("layernorm", "guided"): "wrong"},
                          unguided={"softmax": FIXED_SOFTMAX})
    cli("view", str(run), "--reference-figures", str(ROOT / "benchmarks" / "data" / "references_h200.json"),
        "--suite", str(ROOT))
    report = root / "report" / "report.html"
    cli("report", str(run), "--out", str(report), "--resamples", "200")
    return PairedRun(run=run, site=run / "view", report=report)


@pytest.fixture
def artifacts(request) -> Path:
    """A folder named after the test for its screenshots: $D2KGRADE_ARTIFACTS or <tmp>/d2kgrade-artifacts."""
    base = Path(os.environ.get("D2KGRADE_ARTIFACTS") or Path(tempfile.gettempdir()) / "d2kgrade-artifacts")
    folder = base / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium through Playwright (``executable_path``: no browser download)."""
    why = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        why = "playwright is not installed (pip install 'd2kgrade[test]')"
    if why is None and CHROMIUM is None:
        why = "chromium is not installed (apt-get install chromium, or run scripts/setup.sh)"
    if why is not None:
        if REQUIRE:
            pytest.fail(f"D2KGRADE_REQUIRE_CHROMIUM=1 but {why}")
        pytest.skip(why)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    """A 1400 x 1000 page that records script errors and failed requests (none may happen)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.errors = []  # type: ignore[attr-defined]
    pg.on("pageerror", lambda e: pg.errors.append(f"script error: {e}"))  # type: ignore[attr-defined]
    pg.on("requestfailed", lambda r: pg.errors.append(f"failed: {r.url}"))  # type: ignore[attr-defined]
    pg.on("console", lambda m: pg.errors.append(f"console: {m.text}") if m.type == "error" else None)  # type: ignore
    yield pg
    ctx.close()
