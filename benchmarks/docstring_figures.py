"""Keep the measured figures in the expert references' docstrings equal to the committed benchmark JSON.

Every ``references/<task>/triton.py`` docstring has a table whose last column reads
``H200: time, fraction of floor, x eager / x compile``; each row starts with a workload name. This tool rewrites
that cell, for every workload that passed, from ``benchmarks/data/references_h200.json`` (rows that did not pass keep
their hand-written text, which says why):

    python benchmarks/docstring_figures.py            # rewrite the cells that differ
    python benchmarks/docstring_figures.py --check    # exit 1 and list them (the test suite runs this)

The prose around the table (which workloads lose, and why) is written by hand.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HEADER = "H200: time, fraction of floor, x eager / x compile"
CELL = re.compile(r"\d[\d.]* (?:us|ms), \d+\.\d\d, \d+\.\d\dx / \d+\.\d\dx")


def fmt_time(ms: float) -> str:
    """Three significant digits, in us below 1 ms: 0.0112 -> '11.2 us', 0.036 -> '36.0 us', 2.94 -> '2.94 ms'."""
    value, unit = (ms * 1e3, "us") if ms * 1e3 < 999.5 else (ms, "ms")
    return f"{value:#.3g}".rstrip(".") + " " + unit


def cell(row: dict[str, Any]) -> str:
    return (f"{fmt_time(row['median_ms'])}, {row['roofline_fraction']:.2f}, {row['speedup_eager']:.2f}x / "
            f"{row['speedup_compiled']:.2f}x")


def sync(path: Path, rows: dict[str, dict[str, Any]]) -> tuple[str, list[str]]:
    """The file's text with its table cells taken from ``rows`` (workload -> JSON row), and what changed."""
    text = path.read_text()
    lines = text.split("\n")
    changes = []
    if HEADER not in text:
        return text, [f"{path}: no '{HEADER}' table"]
    for i, line in enumerate(lines):
        name = line.split(" ", 1)[0]
        row = rows.get(name)
        m = CELL.search(line)
        if row is None or m is None or row.get("status") != "passed":
            continue
        new = cell(row)
        if m.group(0) != new:
            changes.append(f"{path.relative_to(ROOT)}: {name}: {m.group(0)} -> {new}")
            lines[i] = line[:m.start()] + new + line[m.end():]
    return "\n".join(lines), changes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "data" / "references_h200.json")
    ap.add_argument("--check", action="store_true", help="report differences and exit 1; change nothing")
    args = ap.parse_args(argv)
    data = json.loads(args.json.read_text())
    by_task: dict[str, dict[str, dict[str, Any]]] = {}
    for row in data["workloads"]:
        if not row.get("hidden"):
            by_task.setdefault(row["task"], {})[row["workload"]] = row
    all_changes = []
    for task, rows in sorted(by_task.items()):
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
