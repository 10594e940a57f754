"""The installed console script (``.venv/bin/d2kgrade``) in subprocesses, the way a shell script or CI calls it.

``d2k(*args)`` runs it with a clean environment (no API keys, no ``D2KGRADE_*``, HOME and TMPDIR in the test's
folder, cwd there so no project config is picked up) and returns the CompletedProcess; exit codes are asserted by
the tests. ``mini_suite`` copies a few tasks into a suite of the test's own, to break.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).with_name("d2kgrade")

D2k = Callable[..., subprocess.CompletedProcess]


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("D2KGRADE_") and k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "COLUMNS")}
    (tmp / "home").mkdir(exist_ok=True)
    (tmp / "tmp").mkdir(exist_ok=True)
    env.update(HOME=str(tmp / "home"), TMPDIR=str(tmp / "tmp"), D2KGRADE_SUITE=str(ROOT), **extra)
    return env


@pytest.fixture
def d2k(tmp_path: Path) -> D2k:
    if not SCRIPT.is_file():
        pytest.fail(f"{SCRIPT}: the console script is not installed (pip install -e .)")

    def call(*args: object, env: dict[str, str] | None = None, timeout: float = 120,
             input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, cwd=tmp_path,
                              env=env or clean_env(tmp_path), timeout=timeout, input=input)

    return call


@pytest.fixture
def mini_suite(tmp_path: Path) -> Callable[..., Path]:
    def make(*tasks: str, name: str = "suite") -> Path:
        root = tmp_path / name
        for t in tasks:
            shutil.copytree(ROOT / "tasks" / t, root / "tasks" / t, ignore=shutil.ignore_patterns("__pycache__"))
            shutil.copytree(ROOT / "references" / t, root / "references" / t,
                            ignore=shutil.ignore_patterns("__pycache__", "NOTES.md"))
            (root / "rubrics").mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / "rubrics" / f"{t}.yaml", root / "rubrics" / f"{t}.yaml")
        return root

    return make


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The stderr of a refused command: no traceback, and its error lines."""
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors, proc.stderr
    return "\n".join(errors)
