"""``d2kgrade ablate`` through the installed console script, the rubric field, and what importing costs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from d2kgrade.ablate.registry import TRANSFORM_NAMES, transform_args_problem
from d2kgrade.schema import AblationSpec
from d2kgrade.suite import Suite

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).with_name("d2kgrade")


def d2k(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, "D2KGRADE_SUITE": str(ROOT)})


def test_list_and_user_mistakes() -> None:
    res = d2k("ablate", "--list", "--json")
    assert res.returncode == 0 and {row["transform"] for row in json.loads(res.stdout)} == TRANSFORM_NAMES
    for args, msg in ((("ablate",), "give TASK FILE"),
                      (("ablate", "swiglu", "references/swiglu/triton.py", "-p", "L9.x"), "not a property of swiglu")):
        res = d2k(*args)
        assert res.returncode == 1 and msg in res.stderr and "Traceback" not in res.stderr, (args, res.stderr)


def test_end_to_end_on_cpu(tmp_path: Path) -> None:
    """The reference through the real sandboxed evaluator: one property removed and checked, one without a
    transform; --out appends the records, --keep keeps the variant."""
    out = tmp_path / "ablations.jsonl"
    res = d2k("ablate", "swiglu", "references/swiglu/triton.py", "-p", "L3.sigmoid-exp2", "-p", "single-pass-fusion",
              "--device", "cpu", "--seed", "3", "--json", "--out", str(out), "--keep", str(tmp_path / "v"))
    assert res.returncode == 0, res.stderr
    recs = {r["property"]: r for r in json.loads(res.stdout)}
    sig, fusion = recs["swiglu.L3.sigmoid-exp2"], recs["swiglu.L1.single-pass-fusion"]
    assert sig["status"] == "untimed" and sig["transform"] == "exp2_to_exp+exact_division" and sig["device"] == "cpu"
    assert sig["episode"] == "reference:swiglu" and sig["arm"] == "reference" and "passes the evaluator" in sig["message"]
    assert fusion["status"] == "no_transform" and fusion["transform"] is None
    assert len(out.read_text().splitlines()) == 2
    kept = (tmp_path / "v" / "swiglu_L3_sigmoid_exp2.py").read_text()
    assert "tl.exp(-g)" in kept and "tl.fdiv" not in kept


def test_every_rubric_ablation_fits_its_transform() -> None:
    suite = Suite(ROOT)
    for task in suite.task_ids:
        for p in suite.load_rubric(task).properties:
            for t in p.ablation.transforms:  # type: ignore[union-attr]
                assert transform_args_problem(t.transform, t.args) is None, (p.id, t.transform)


def test_the_rubric_field_validates() -> None:
    assert AblationSpec(none="the algorithm itself").none
    with pytest.raises(ValidationError, match="unknown ablation transform 'strip_all'"):
        AblationSpec(transforms=[{"transform": "strip_all"}])
    with pytest.raises(ValidationError, match="either transforms or none"):
        AblationSpec()
    with pytest.raises(ValidationError, match="either transforms or none"):
        AblationSpec(transforms=[{"transform": "exp2_to_exp"}], none="both")


def test_loading_rubrics_does_not_import_libcst_or_torch() -> None:
    code = ("import sys; from pathlib import Path; from d2kgrade.suite import Suite; s = Suite(Path(sys.argv[1]));"
            "[s.load_rubric(t) for t in s.task_ids]; import d2kgrade.ablate.results, d2kgrade.cli;"
            "print(sorted(m for m in ('libcst', 'torch', 'triton') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code, str(ROOT)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stderr
