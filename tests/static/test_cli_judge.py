"""`d2kgrade judge` through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from d2kgrade.cli import app

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_table_output_names_evidence_and_score():
    res = invoke("judge", "--task", "softmax", "--judge", "static", str(CORPUS / "softmax" / "unusual_names.py"))
    assert res.exit_code == 0, res.output
    assert "L1.online-normalizer" in res.output and "present" in res.output
    assert "unusual_names.py:" in res.output  # file:line evidence
    assert "score" in res.output and "L1 " in res.output


def test_json_for_a_directory_and_a_rubric_file():
    res = invoke("judge", "--rubric", str(ROOT / "rubrics" / "softmax.yaml"), "--json", str(CORPUS / "softmax"))
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    files = {Path(d["file"]).name for d in data}
    assert {"expert_all_paths.py", "warp_per_row.cu", "torch_only.py"} <= files
    expert = next(d for d in data if d["file"].endswith("expert_all_paths.py"))
    assert expert["score"] == 100.0 and expert["rater"] == "static"
    assert all(p["evidence"] for p in expert["properties"])
    torch_only = next(d for d in data if d["file"].endswith("torch_only.py"))
    assert torch_only["score"] == 0.0


def test_gating_needs_and_uses_the_task():
    res = invoke("judge", "--task", "softmax", "--gating", "--json", str(CORPUS / "softmax" / "simple_fused_row.py"))
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)[0]["gating"] is True


def test_user_errors(tmp_path):
    from d2kgrade.errors import UserError

    cases = [
        (["--judge", "bogus", str(CORPUS / "softmax" / "torch_only.py")], "--judge must be one of"),
        ([str(tmp_path / "nope.py")], "no such file"),
        ([str(tmp_path)], "no kernel files"),
    ]
    for args, msg in cases:
        res = invoke("judge", "--task", "softmax", *args)
        assert isinstance(res.exception, UserError) and msg in str(res.exception), (args, res.output)
    res = invoke("judge", str(CORPUS / "softmax" / "torch_only.py"))
    assert isinstance(res.exception, UserError) and "exactly one of --rubric" in str(res.exception)


def test_a_user_error_prints_one_line_without_traceback(tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "d2kgrade", "judge", "--task", "softmax", str(tmp_path / "nope.py")],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 1 and "no such file" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


HEAVY = ("pandas", "matplotlib", "openai")


def _console_script() -> Path:
    import sys

    exe = Path(sys.executable).with_name("d2kgrade")
    if not exe.is_file():
        import pytest

        pytest.skip("the d2kgrade console script is not installed beside this interpreter")
    return exe


def test_static_judge_imports_no_heavy_library():
    """The installed console script, run as a user would, grades a kernel with --judge static without importing
    pandas, matplotlib or openai (issue 16, item 7: start-up dominates one call per file). Read from
    ``-X importtime`` of that very process."""
    import subprocess
    import sys

    exe = _console_script()
    proc = subprocess.run([sys.executable, "-X", "importtime", str(exe), "judge", "--task", "softmax", "--judge",
                           "static", "--json", str(ROOT / "references" / "softmax" / "triton.py")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)[0]["score"] == 100.0
    imported = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "d2kgrade" in imported and "pydantic" in imported  # the probe sees the imports
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_cli_start_up_imports_no_models():
    """Every command module is imported at start-up to register its command; none of them (judge included) may
    import the pydantic models there (d2kgrade.schema and d2kgrade.grades were ~0.25 s of a 0.32 s start). Read
    from ``sys.modules`` after ``d2kgrade --version`` in a fresh interpreter."""
    import subprocess
    import sys

    probe = ("import sys; sys.argv = ['d2kgrade', '--version']\nfrom d2kgrade.cli import main\ntry:\n    main()\n"
             "except SystemExit:\n    pass\nprint(' '.join(sorted(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = set(proc.stdout.split())
    assert "d2kgrade.cli.judge" in imported  # every command module was imported
    heavy = {m for m in imported if m.split(".")[0] == "pydantic" or m in ("d2kgrade.schema", "d2kgrade.grades")}
    assert not heavy, sorted(heavy)
