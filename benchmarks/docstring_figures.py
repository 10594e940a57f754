"""Keep the measured figures in the expert references' docstrings equal to the committed benchmark JSON.

Every ``references/<task>/triton.py`` docstring has a table whose last column reads
``H200: time, fraction of floor, x best peer``; each row starts with a workload name. This tool rewrites that cell,
for every workload that passed, from the rows of ``benchmarks/summary.py`` (the reference's median, its fraction of
the roofline floor, and its speedup over the fastest baseline candidate that was correct in every evaluation, named:
``0.717 ms, 0.09, 1.52x eager``), and an older table's header and cells (``x eager / x compile``, from
``benchmarks/data/references_h200.json``) with them. Rows that did not pass keep their hand-written text, which says
why:

    python benchmarks/docstring_figures.py            # rewrite the cells that differ
    python benchmarks/docstring_figures.py --check    # exit 1 and list them (the test suite runs this)

The prose around the table (which workloads lose, and why) is written by hand.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HEADER = "H200: time, fraction of floor, x best peer"
OLD_HEADER = "H200: time, fraction of floor, x eager / x compile"
CELL = re.compile(r"\d[\d.]* (?:us|ms), \d+\.\d\d, (?:\d+\.\d\dx / \d+\.\d\dx|\d+\.\d\dx [a-z][a-z0-9_]*)")


def fmt_time(ms: float) -> str:
    """Three significant digits, in us below 1 ms: 0.0112 -> '11.2 us', 0.036 -> '36.0 us', 2.94 -> '2.94 ms'."""
    value, unit = (ms * 1e3, "us") if ms * 1e3 < 999.5 else (ms, "ms")
    return f"{value:#.3g}".rstrip(".") + " " + unit


def cell(row: dict[str, Any]) -> str:
    return f"{fmt_time(row['median_ms'])}, {row['roofline_fraction']:.2f}, {row['speedup']:.2f}x {row['best']}"


def sync(path: Path, rows: dict[str, dict[str, Any]]) -> tuple[str, list[str]]:
    """The file's text with its table cells taken from ``rows`` (workload -> summary row), and what changed."""
    text = path.read_text()
    changes = []
    if OLD_HEADER in text:
        text = text.replace(OLD_HEADER, HEADER)
        changes.append(f"{path.relative_to(ROOT)}: header -> {HEADER!r}")
    if HEADER not in text:
        return text, [f"{path.relative_to(ROOT)}: no '{HEADER}' table"]
    lines = text.split("\n")
    for i, line in enumerate(lines):
        name = line.split(" ", 1)[0]
        row = rows.get(name)
        m = CELL.search(line)
        if row is None or m is None or row.get("status") != "passed" or not row.get("speedup"):
            continue
        new = cell(row)
        if m.group(0) != new:
            changes.append(f"{path.relative_to(ROOT)}: {name}: {m.group(0)} -> {new}")
            lines[i] = line[:m.start()] + new + line[m.end():]
    return "\n".join(lines), changes


def summary_rows() -> dict[str, dict[str, dict[str, Any]]]:
    """Per task, per catalog workload, the summary's row (``best_baseline_by_workload``)."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.summary import summarize

    by_task: dict[str, dict[str, dict[str, Any]]] = {}
    for key, row in summarize()["best_baseline_by_workload"].items():
        task, workload = key.split(":", 1)
        by_task.setdefault(task, {})[workload] = row
    return by_task


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="report differences and exit 1; change nothing")
    args = ap.parse_args(argv)
    all_changes = []
    for task, rows in sorted(summary_rows().items()):
        path = ROOT / "references" / task / "triton.py"
        if not path.is_file():
            continue
        text, changes = sync(path, rows)
        all_changes += changes
        if changes and not args.check:
            path.write_text(text)
    for c in all_changes:
        print(c)
    return 1 if (args.check and all_changes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
