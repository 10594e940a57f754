"""The coverage list: every guidance id decided, the categories read from the reasons, the counts the docs state,
and docs/ablation.md's list equal to what the rubrics say now."""

from __future__ import annotations

import json
import re
from pathlib import Path

from d2kgrade.ablate.coverage import OTHER, categorize, counts, coverage, missing_decisions, render_markdown
from d2kgrade.suite import Suite
from tests.ablate.test_cli import d2k

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
DOC = ROOT / "docs" / "ablation.md"


def test_every_guidance_id_of_the_26_tasks_has_a_decision() -> None:
    assert len(SUITE.task_ids) == 26 and missing_decisions(SUITE) == []
    rows = coverage(SUITE)
    live = [g.id for t in SUITE.task_ids for g in SUITE.load_task(t).guidance if not g.deprecated]
    assert sorted(r.property for r in rows) == sorted(live)


def test_categories_come_from_the_reason_openings() -> None:
    assert categorize("needed for correct results: without it ...") == ("correctness", False)
    assert categorize("a fusion: undoing it needs a second kernel") == ("fusion", True)
    assert categorize("a performance target (read the weights once)") == ("performance model", False)
    assert categorize("B arrives [N, K]; reading it N-major needs a copy") == (OTHER, True)


def test_the_counts_the_docs_state() -> None:
    c = counts(coverage(SUITE))
    assert (c["properties"], c["with_transform"], c["with_mechanism"]) == (207, 121, 180)
    assert {k: c[k] for k in ("correctness", "lowering", "performance model", "absence", "algorithm", "mapping",
                              "fusion", OTHER)} == {"correctness": 20, "lowering": 4, "performance model": 2,
                                                    "absence": 1, "algorithm": 22, "mapping": 19, "fusion": 11,
                                                    OTHER: 7}
    text = DOC.read_text()
    assert "## Coverage: 121 of the 207 properties have a transform" in text
    assert "So of the 180 properties with a code-level mechanism, 121 (67%) get a transform." in text


def test_the_docs_list_is_the_rubrics_list() -> None:
    got = re.search(r"<!-- coverage:begin -->\n(.*)<!-- coverage:end -->", DOC.read_text(), re.DOTALL)
    assert got is not None
    assert got.group(1) == render_markdown(coverage(SUITE)), (
        "docs/ablation.md's list is stale: regenerate it with d2kgrade.ablate.coverage.render_markdown")


def test_the_command() -> None:
    res = d2k("ablate", "--coverage", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["counts"]["with_transform"] == 121 and len(data["properties"]) == 207
    row = next(r for r in data["properties"] if r["property"] == "softmax.L3.exp2-fold")
    assert row["transforms"] == ["exp2_to_exp"] and row["category"] == "transform"
