"""Every adversarial submission through the installed ``d2kgrade eval`` on CPU, with several seeds, with canary
secrets in the environment of the evaluator and of its parent shell.

Each run is a fresh ``bash -c '... d2kgrade eval softmax FILE --device cpu --json --seed S --suite COPY'`` in a
session of its own (a timeout kills its whole process group); the canaries are both in bash's environment and
exported by it. A run fails when the status is ``passed`` or not in the file's ``# expect:``, when any canary
(raw, base64, hex or reversed) appears in stdout, stderr or the JSON, or when a header's extra check fails:

- ``# marker: never`` / ``not-after-end``: the file's ``MARKER_DIR = "..."`` line is rewritten to a fresh folder;
  nothing may appear there (a shell ran), or nothing may be written there after the evaluation ended and no
  process the attack recorded may be alive (a descendant outlived the evaluation).
- ``# leak-file: PATH``: no line (40+ characters) of that suite file appears in the output.
- ``# secret: seed``: the run's seed does not appear in the output.
- ``# max-log: N``: the JSON's ``log`` is at most N characters.
- ``# suite: copy``: the file gets a private copy of the suite; every run must leave its suite copy unchanged.

``tests/runner/test_adversarial_next.py`` uses the same headers and checks through the Python API.

    .venv/bin/python benchmarks/adversarial_sweep.py --seeds 10 --out benchmarks/adversarial_sweep.json
    # the "before" figures, from another tree of the code (a `git archive` of a commit):
    .venv/bin/python benchmarks/adversarial_sweep.py --seeds 2 --code /tmp/before --out ..._before.json
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ADVERSARIAL_DIRS = (ROOT / "tests" / "runner" / "adversarial", ROOT / "tests" / "runner" / "adversarial_next")
SUITE_PARTS = ("tasks", "rubrics", "references")
CANARY_NAMES = ("OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "ANTHROPIC_API_KEY", "HF_TOKEN",
                "DB_PASSWORD")
"""Secret-looking names the canaries are planted under (values hold ``CANARY``; see proc_environ_log.py)."""
SEEDS = tuple(7_301_245_889_173 + 7_919 * i for i in range(64))
"""Run seeds: long enough that finding one in an output is never a coincidence."""
MARKER_LINE = re.compile(r'^MARKER_DIR = "[^"]*"', re.M)
LATE_SLACK_S = 1.0
"""A marker file written more than this after the evaluation ended proves a descendant outlived it."""
LATE_WAIT_S = 3.0
"""How long to wait after an evaluation before looking for late markers."""


# --------------------------------------------------------------------------------------------- headers


def header(path: Path) -> dict[str, str]:
    """``# key: value`` header lines of an adversarial file (continuation lines start with ``#   ``)."""
    return dict(re.findall(r"^# ([a-z-]+): (.+)$", path.read_text(), re.M))


def expected(spec: dict[str, str]) -> set[str]:
    return {s.strip() for s in spec["expect"].split("|")}


def adversarial_files(dirs: tuple[Path, ...] = ADVERSARIAL_DIRS) -> list[Path]:
    return sorted(p for d in dirs for p in d.glob("*.py") if not p.name.startswith("_"))


# --------------------------------------------------------------------------------------------- canaries


def make_canaries() -> dict[str, str]:
    """Fresh canary values, one per :data:`CANARY_NAMES` name."""
    tag = uuid.uuid4().hex[:12]
    return {name: f"d2kCANARY-{name.lower().replace('_', '')}-{tag}" for name in CANARY_NAMES}


def encodings(value: str) -> list[str]:
    """The forms a leaked value may take in an output: raw, reversed, base64, hex."""
    return [value, value[::-1], base64.b64encode(value.encode()).decode(), value.encode().hex()]


# --------------------------------------------------------------------------------------------- preparation


@dataclass
class Prepared:
    """One run's copy of an adversarial file and what its checks need."""

    path: Path
    spec: dict[str, str]
    marker_dir: Path | None = None
    suite: Path | None = None
    suite_digest: str = ""
    tmp: list[Path] = field(default_factory=list)

    def cleanup(self) -> None:
        for p in self.tmp:
            shutil.rmtree(p, ignore_errors=True)


def suite_digest(suite: Path) -> str:
    h = hashlib.sha256()
    for part in SUITE_PARTS:
        for p in sorted((suite / part).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                h.update(str(p.relative_to(suite)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def copy_suite(source: Path, parent: Path) -> Path:
    """A copy of the suite's tasks, rubrics and references under ``parent``, in a folder whose name holds
    ``d2k-redteam-suite`` (the only suite tamper_reference_file.py writes to)."""
    dest = Path(tempfile.mkdtemp(prefix="d2k-redteam-suite-", dir=parent))
    for part in SUITE_PARTS:
        shutil.copytree(source / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def prepare(path: Path, workdir: Path, *, suite_source: Path = ROOT, shared_suite: Path | None = None) -> Prepared:
    """Copy ``path`` (same file name: some attacks look for it) into a fresh folder under ``workdir``, with its
    ``MARKER_DIR`` line pointing at a fresh world-writable folder (so a kernel host running under another uid
    could write there too), and a private suite copy when the header asks for one."""
    spec = header(path)
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=workdir))
    prep = Prepared(path=run_dir / path.name, spec=spec, tmp=[run_dir])
    source = path.read_text()
    if "marker" in spec:
        prep.marker_dir = Path(tempfile.mkdtemp(prefix="d2k-redteam-markers-"))
        os.chmod(prep.marker_dir, 0o1777)
        prep.tmp.append(prep.marker_dir)
        source = MARKER_LINE.sub(f'MARKER_DIR = "{prep.marker_dir}"', source)
    prep.path.write_text(source)
    if spec.get("suite") == "copy" or shared_suite is None:
        prep.suite = copy_suite(suite_source, run_dir)
    else:
        prep.suite = shared_suite
    prep.suite_digest = suite_digest(prep.suite)
    return prep


# --------------------------------------------------------------------------------------------- checks


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended


def marker_problems(prep: Prepared, ended_at: float) -> list[str]:
    """What the markers say: a shell ran, or a descendant outlived the evaluation."""
    kind, d = prep.spec.get("marker"), prep.marker_dir
    if not kind or d is None:
        return []
    if kind == "never":
        files = sorted(p.name for p in d.rglob("*") if p.is_file())
        return [f"marker files appeared (the attack's command ran): {', '.join(files)}"] if files else []
    delay = ended_at + LATE_WAIT_S - time.time()
    if delay > 0:
        time.sleep(delay)
    out = []
    late = [p.name for p in d.rglob("*") if p.is_file() and p.stat().st_mtime > ended_at + LATE_SLACK_S]
    if late:
        out.append(f"written after the evaluation ended (a descendant outlived it): {', '.join(sorted(late))}")
    for pid_file in d.glob("*.pid"):
        pid = int(pid_file.read_text().strip() or 0)
        if pid and _alive(pid):
            out.append(f"process {pid} the attack started is still alive {LATE_WAIT_S:.0f} s after the evaluation")
    return out


def leak_lines(spec: dict[str, str], suite: Path) -> list[str]:
    rel = spec.get("leak-file")
    if not rel:
        return []
    return [ln.strip() for ln in (suite / rel).read_text().splitlines() if len(ln.strip()) >= 40]


def problems(prep: Prepared, *, status: str | None, texts: list[str], canaries: dict[str, str], seed: int,
             log: str | None, ended_at: float) -> list[str]:
    """Every way this run failed its file's contract (empty: it held)."""
    out = []
    allowed = expected(prep.spec)
    if status is None:
        out.append("no result came back (the evaluator died or hung)")
    elif status == "passed" or status not in allowed:
        out.append(f"status {status}, expected {'|'.join(sorted(allowed))}")
    blob = "\n".join(texts)
    for name, value in canaries.items():
        forms = [f for f in encodings(value) if f in blob]
        if forms:
            out.append(f"canary {name} leaked ({len(forms)} of 4 encodings)")
    if prep.spec.get("secret") == "seed" and str(seed) in blob:
        out.append("the run's seed appears in the output")
    leaked = [ln for ln in leak_lines(prep.spec, prep.suite or ROOT) if ln in blob]
    if leaked:
        out.append(f"{len(leaked)} lines of {prep.spec['leak-file']} appear in the output")
    if "max-log" in prep.spec and log is not None and len(log) > int(prep.spec["max-log"]):
        out.append(f"log of {len(log)} characters, over {prep.spec['max-log']}")
    if prep.suite is not None and suite_digest(prep.suite) != prep.suite_digest:
        out.append("the suite changed on disk during the evaluation")
    return out + marker_problems(prep, ended_at)


# --------------------------------------------------------------------------------------------- one CLI run


@dataclass
class RunResult:
    file: str
    seed: int
    status: str | None
    problems: list[str]
    wall_s: float
    returncode: int | None


def _bash_env(canaries: dict[str, str], code: Path | None) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "USER",
                                                             "VIRTUAL_ENV", "D2KGRADE_CACHE_DIR")}
    if code is not None:
        keep["PYTHONPATH"] = str(code)
    return {**keep, **canaries}


def run_cli(path: Path, seed: int, *, d2kgrade: str, canaries: dict[str, str], workdir: Path,
            suite_source: Path, shared_suite: Path, code: Path | None, timeout_s: float) -> RunResult:
    """One ``d2kgrade eval`` of ``path`` under ``bash -c`` with the canaries exported; checked."""
    prep = prepare(path, workdir, suite_source=suite_source, shared_suite=shared_suite)
    limit = float(prep.spec.get("timeout", 120))
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in canaries.items())
    cmd = (f"export {exports}; {d2kgrade} eval softmax {shlex.quote(str(prep.path))} --device cpu --json "
           f"--seed {seed} --timeout {limit:g} --suite {shlex.quote(str(prep.suite))}")
    t0 = time.monotonic()
    proc = subprocess.Popen(["bash", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", env=_bash_env(canaries, code), cwd=prep.suite,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # our own child's session
        except ProcessLookupError:
            pass
        stdout, stderr = proc.communicate()
    ended = time.time()
    wall = time.monotonic() - t0
    status = log = None
    texts = [stdout, stderr]
    try:
        data = json.loads(stdout)
        status, log = data.get("status"), data.get("log", "")
        texts += [log, data.get("message", ""), *(f.get("message", "") for f in data.get("flags", []))]
    except (json.JSONDecodeError, AttributeError):
        pass
    found = problems(prep, status=status, texts=texts, canaries=canaries, seed=seed, log=log, ended_at=ended)
    if status is None and stderr.strip():
        found.append("stderr: " + stderr.strip().splitlines()[-1][:300])
    try:
        rel = str(path.relative_to(ROOT))
    except ValueError:
        rel = str(path)
    prep.cleanup()
    return RunResult(rel, seed, status, found, round(wall, 2), proc.returncode)


# --------------------------------------------------------------------------------------------- the sweep


def versions(code: Path | None) -> dict[str, Any]:
    """Versions of what evaluated (asked of the same interpreter and code path) and the code's commit."""
    env = {**os.environ, **({"PYTHONPATH": str(code)} if code else {})}
    probe = ("import json, platform, torch, triton, runner; "
             "print(json.dumps({'torch': torch.__version__, 'triton': triton.__version__, "
             "'python': platform.python_version(), 'runner_path': runner.__file__}))")
    try:  # from a neutral folder: `python -c` puts the working folder first on sys.path, before PYTHONPATH
        out = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                                        cwd=tempfile.gettempdir(), timeout=120, check=True).stdout)
    except (subprocess.SubprocessError, json.JSONDecodeError, OSError) as exc:
        out = {"error": str(exc)[:300]}
    tree = code or ROOT
    commit_file = tree / ".commit"
    if commit_file.is_file():
        out["commit"] = commit_file.read_text().strip()
        out["tree"] = "git archive of that commit"
    else:
        git = ["git", "-C", str(tree)]
        out["commit"] = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--", "runner", "d2kgrade"], capture_output=True,
                               text=True).stdout.strip()
        out["tree"] = "working tree with uncommitted changes to runner/ or d2kgrade/" if dirty else "clean"
    out["host"] = platform.platform()
    return out


def default_d2kgrade() -> str:
    local = Path(sys.executable).parent / "d2kgrade"
    return shlex.quote(str(local)) if local.exists() else (shutil.which("d2kgrade") or "d2kgrade")


def sweep(files: list[Path], seeds: list[int], *, jobs: int, d2kgrade: str, code: Path | None,
          timeout_s: float) -> dict[str, Any]:
    canaries = make_canaries()
    suite_source = code or ROOT
    workdir = Path(tempfile.mkdtemp(prefix="d2k-adversarial-sweep-"))
    shared = copy_suite(suite_source, workdir)
    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = [pool.submit(run_cli, f, s, d2kgrade=d2kgrade, canaries=canaries, workdir=workdir,
                                   suite_source=suite_source, shared_suite=shared, code=code, timeout_s=timeout_s)
                       for f in files for s in seeds]
            results = []
            for fut in futures:
                r = fut.result()
                results.append(r)
                mark = "ok  " if not r.problems else "FAIL"
                print(f"{mark} {r.file} seed {r.seed}: {r.status} ({r.wall_s:.1f} s)"
                      + ("" if not r.problems else "  " + "; ".join(r.problems)), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    per_file: dict[str, Any] = {}
    for f in files:
        rel = str(f.relative_to(ROOT)) if f.is_relative_to(ROOT) else str(f)
        rs = [r for r in results if r.file == rel]
        spec = header(f)
        per_file[rel] = {
            "exploit": " ".join(spec.get("exploit", "").split()),
            "expect": spec.get("expect", ""),
            "statuses": {str(r.seed): r.status for r in rs},
            "wall_s": [r.wall_s for r in rs],
            "failures": [{"seed": r.seed, "problems": r.problems} for r in rs if r.problems],
        }
    failed_files = sorted(k for k, v in per_file.items() if v["failures"])
    return {
        "schema": "d2kgrade.adversarial_sweep/1",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in sys.argv),
        "eval_command": f"bash -c 'export <canaries>; {d2kgrade} eval softmax FILE --device cpu --json --seed S "
                        "--timeout T --suite <copy>'",
        "versions": versions(code),
        "seeds": seeds,
        "canary_names": list(CANARY_NAMES),
        "summary": {"files": len(files), "runs": len(results),
                    "runs_failed": sum(1 for r in results if r.problems),
                    "files_failed": len(failed_files), "failed_files": failed_files,
                    "wall_s": round(time.monotonic() - t0, 1)},
        "files": per_file,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10, help="seeds per file (default 10)")
    ap.add_argument("--jobs", type=int, default=1, help="evaluations at once (default 1: the cores are shared)")
    ap.add_argument("--files", nargs="*", type=Path, help="only these files (default: both adversarial folders)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "data" / "adversarial_sweep.json")
    ap.add_argument("--d2kgrade", default=None, help="the command to run (default: the installed console script)")
    ap.add_argument("--code", type=Path, default=None,
                    help="evaluate with this tree of the code instead (put first on PYTHONPATH; its suite is used)")
    ap.add_argument("--timeout", type=float, default=300.0, help="wall limit of one run, seconds (default 300)")
    args = ap.parse_args(argv)
    if not 1 <= args.seeds <= len(SEEDS):
        ap.error(f"--seeds must be 1..{len(SEEDS)}")
    files = [f.resolve() for f in args.files] if args.files else adversarial_files()
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        ap.error(f"no such file: {', '.join(missing)}")
    code = args.code.resolve() if args.code else None
    if code is not None and not (code / "runner" / "evaluate.py").is_file():
        ap.error(f"--code {code}: not a tree of the code (no runner/evaluate.py)")
    report = sweep(files, list(SEEDS[:args.seeds]), jobs=args.jobs, d2kgrade=args.d2kgrade or default_d2kgrade(),
                   code=code, timeout_s=args.timeout)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    s = report["summary"]
    print(f"{s['runs_failed']} of {s['runs']} runs failed ({s['files_failed']} of {s['files']} files) in "
          f"{s['wall_s']:.0f} s; written to {args.out}")
    return 1 if s["runs_failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
