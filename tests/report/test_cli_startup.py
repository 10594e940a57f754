"""The score/report/agree/annotate commands keep their heavy imports inside the commands: the CLI starts fast."""

from __future__ import annotations

import subprocess
import sys


def test_cli_import_does_not_load_plotting_or_statistics_libraries():
    code = ("import sys, d2kgrade.cli, d2kgrade.cli.score, d2kgrade.cli.report, d2kgrade.cli.agree, "
            "d2kgrade.cli.annotate, d2kgrade.cli.view, d2kgrade.report, d2kgrade.view, d2kgrade.agreement, "
            "d2kgrade.annotate;"
            "bad = [m for m in ('matplotlib', 'sklearn', 'statsmodels', 'scipy', 'krippendorff', 'pygments', "
            "'playwright') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = subprocess.run([sys.executable, "-m", "d2kgrade", "--help"], capture_output=True, text=True, timeout=120)
    assert all(c in names.stdout for c in ("score", "report", "agree", "annotate", "view"))
