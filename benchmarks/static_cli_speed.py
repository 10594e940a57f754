"""What a user of ``d2kgrade judge --judge static`` waits for: start-up, one file, and a 26-file folder.

Runs the installed console script (``.venv/bin/d2kgrade`` beside this interpreter) in subprocesses, as a shell
script or CI would, and records wall-clock medians:

- ``startup_s``: ``d2kgrade --version`` (interpreter start, the CLI's imports, one line out);
- ``one_file_s``: ``judge --task softmax --judge static references/softmax/triton.py``;
- ``per_file_calls``: the 26 expert references, one CLI call each with its own task (files per second);
- ``folder_26_s``: one call over a folder holding the 26 references, under one rubric (softmax's);
- ``heavy_modules``: which of pandas, matplotlib, openai, numpy, torch, triton the judge call imported
  (read from ``sys.modules`` at exit), and the module count;
- ``import_ms``: ``-X importtime`` cumulative microseconds of the top-level imports, largest first.

The load average before and after is recorded: other processes share the machine's cores.

    python benchmarks/static_cli_speed.py --label before [--reps 5] [--out benchmarks/data/static_cli_speed.json]
    python benchmarks/static_cli_speed.py --label after --baseline /tmp/base   # A/B against an older tree

``--label`` names the entry (``before``/``after``); entries with other labels already in ``--out`` are kept.
``--baseline TREE`` (a source tree of an older commit, e.g. ``git archive <rev> d2kgrade tasks rubrics
references | tar -x -C TREE``) times that tree's CLI too, interleaved run by run with the current one, so both
see the same machine load; its figures are stored under ``baseline``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "matplotlib", "openai", "numpy", "scipy", "torch", "triton", "httpx")
_PROBE = """
import sys
sys.argv = ["d2kgrade"] + sys.argv[1:]
from d2kgrade.cli import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write("MODULES " + " ".join(sorted(m for m in sys.modules if "." not in m)) + "\\n")
"""


def console_script() -> Path:
    exe = Path(sys.executable).with_name("d2kgrade")
    if not exe.is_file():
        raise SystemExit(f"{exe}: the console script is not installed beside {sys.executable}")
    return exe


_BOOT = "import sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = 'd2kgrade'; from d2kgrade.cli import main; main()"


def cli(tree: str | None) -> list[str]:
    """The command line that runs the CLI: the installed console script, or an older source tree's."""
    return [str(console_script())] if tree is None else [sys.executable, "-c", _BOOT, tree]


def where(tree: str | None) -> Path:
    """The folder a tree's CLI runs in: its own suite (an older schema may refuse today's rubrics)."""
    return ROOT if tree is None else Path(tree)


def ab(trees: list[str | None], argv: list[str], reps: int) -> list[float]:
    """Median wall seconds of ``argv`` under each tree's CLI, run in turn ``reps`` times (A, B, A, B...)."""
    times: list[list[float]] = [[] for _ in trees]
    for _ in range(reps):
        for i, tree in enumerate(trees):
            times[i].append(wall(cli(tree) + argv, 1, where(tree)))
    return [round(statistics.median(t), 4) for t in times]


def wall(cmd: list[str], reps: int, cwd: Path = ROOT) -> float:
    """Median wall seconds of ``cmd`` over ``reps`` runs (output discarded; a non-zero exit stops the script)."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return round(statistics.median(times), 4)


def references() -> list[tuple[str, Path]]:
    return sorted((p.parent.name, p) for p in (ROOT / "references").glob("*/triton.py"))


def import_profile(args: list[str]) -> tuple[list[str], int, dict[str, int]]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", _PROBE, *args], cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    modules: list[str] = []
    top: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        if line.startswith("MODULES "):
            modules = line.split()[1:]
        elif line.startswith("import time:") and "|" in line:
            _, cum, raw = line[len("import time:"):].split("|")
            name = raw.strip()
            if cum.strip().isdigit() and raw.startswith(" ") and not raw.startswith("  "):  # top level only
                top[name] = max(top.get(name, 0), int(cum))
    biggest = dict(sorted(top.items(), key=lambda kv: -kv[1])[:12])
    return [m for m in HEAVY if m in modules], len(modules), {k: round(v / 1000, 1) for k, v in biggest.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "data" / "static_cli_speed.json")
    ap.add_argument("--baseline", default=None, help="an older source tree to time alongside, interleaved")
    args = ap.parse_args()
    trees: list[str | None] = [None] + ([args.baseline] if args.baseline else [])
    refs = references()
    load_before = os.getloadavg()
    one = ["judge", "--task", "softmax", "--judge", "static", "references/softmax/triton.py"]
    results: list[dict] = [{} for _ in trees]
    for key, argv in (("startup_s", ["--version"]), ("one_file_s", one)):
        for r, v in zip(results, ab(trees, argv, args.reps)):
            r[key] = v
    totals = [0.0 for _ in trees]
    for task, path in refs:  # file by file, each tree in turn
        for i, t in enumerate(trees):
            totals[i] += wall(cli(t) + ["judge", "--task", task, "--judge", "static", str(path.relative_to(ROOT))],
                              1, where(t))
    for r, total in zip(results, totals):
        r["per_file_calls"] = {"files": len(refs), "total_s": round(total, 3),
                               "files_per_second": round(len(refs) / total, 2)}
    with tempfile.TemporaryDirectory() as tmp:
        for task, path in refs:
            shutil.copy(path, Path(tmp) / f"{task}.py")
        for r, v in zip(results, ab(trees, ["judge", "--task", "softmax", "--judge", "static", tmp], args.reps)):
            r["folder_26_s"] = v
            r["folder_files_per_second"] = round(len(refs) / v, 1)
    heavy, n_modules, top = import_profile(one)
    entry = {
        "command": f"python benchmarks/static_cli_speed.py --label {args.label} --reps {args.reps}"
                   + (f" --baseline {args.baseline}" if args.baseline else ""),
        "date": time.strftime("%Y-%m-%d"),
        "python": sys.version.split()[0], "cpus": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        **results[0], "folder_files": len(refs),
        "heavy_modules": heavy, "modules_imported": n_modules, "import_ms": top,
    }
    if args.baseline:
        entry["baseline"] = {"tree": args.baseline, **results[1]}
    data = json.loads(args.out.read_text()) if args.out.is_file() else {}
    data["what"] = ("wall-clock of the installed d2kgrade console script: start-up, one file, 26 files one call "
                    "each, one call over a 26-file folder; modules the judge call imports")
    data[args.label] = entry
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps(entry, indent=2))


if __name__ == "__main__":
    main()
