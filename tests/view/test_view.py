"""The viewer site without a browser: self-contained pages, what each section shows from the run's records, and
a sentence wherever a record is missing."""

from __future__ import annotations

import json
import re
from html import escape as html_escape
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from d2kgrade.cli import app
from d2kgrade.view.data import load_ablations
from d2kgrade.view.html import code_block, diff_block, fold
from tests.metrics.synthetic import make_run
from tests.view.conftest import PairedRun


def _pages(site: Path) -> list[Path]:
    return [site / "index.html", *sorted((site / "e").rglob("*.html"))]


def test_site_is_self_contained_and_every_relative_link_resolves(paired: PairedRun):
    pages = _pages(paired.site)
    assert len(pages) == 5
    for p in pages:
        html = p.read_text()
        refs = re.findall(r'(?:src|href)="([^"#]*)(?:#[^"]*)?"', html)
        assert not [r for r in refs if re.match(r"(https?:)?//", r)], p
        for r in filter(None, refs):
            assert (p.parent / r).resolve().is_file(), f"{p}: {r}"
    data = (paired.site / "data" / "episodes.js").read_text()
    rows = json.loads(data.split("window.D2K_EPISODES = ", 1)[1].rstrip().rstrip(";"))
    assert sorted((r["task"], r["arm"], r["status"]) for r in rows) == [
        ("layernorm", "guided", "finished"), ("layernorm", "unguided", "no_submission"),
        ("softmax", "guided", "finished"), ("softmax", "unguided", "finished")]
    assert all((paired.site / r["page"]).is_file() for r in rows)


def test_episode_pages_show_the_records(paired: PairedRun):
    site = paired.site
    guided = next(site.glob("e/*/softmax.guided-all.s0.html")).read_text()
    # every kernel version with a diff against the previous one, each with its evaluations
    assert guided.count('class="version"') == 2 and "d-del" in guided and "test: " in guided
    # evaluation: excluded baselines with why, the best one, the expert's H200 figures
    assert "out of tolerance: 3 of 32768 elements" in guided and "autotuning disabled" in guided
    assert ">best<" in guided and "benchmarks/data/references_h200.json (NVIDIA H200)" in guided
    # grades: the fused verdict with its agreement, the judge's reasoning, per property
    grades = [json.loads(x) for x in (paired.run / "grades.jsonl").read_text().splitlines()]
    fused = next(g for g in grades if g["item"] == "softmax.guided-all.s0" and g["rater"] == "combined"
                 and g["kind"] == "code")
    for p in fused["properties"]:
        assert f'data-pid="{p["property_id"]}"' in guided and f">{p['details']['agreement']}<" in guided
    judge = next(g for g in grades if g["item"] == "softmax.guided-all.s0" and g["rater"] == "llm"
                 and g["kind"] == "code")
    assert all(html_escape(p["details"]["samples"][0]["reasoning"]) in guided for p in judge["properties"])
    # ablations from RUN_DIR/ablations.jsonl
    assert 'class="ablations"' in guided and "load_bearing" in guided and "remove-" in guided
    silent = next(site.glob("e/*/layernorm.unguided.s0.html")).read_text()
    assert "No per-workload results: this episode never submitted a kernel." in silent
    assert "No final kernel" in silent
    wrong = next(site.glob("e/*/layernorm.guided-all.s0.html")).read_text()
    assert "timing.hidden_work" in wrong and "211 of 32768 elements out of tolerance" in wrong


def test_plain_tables_get_sentences_not_empty_sections(tmp_path: Path):
    run = make_run(tmp_path / "plain", models=("m1",), tasks=("ta",), seed=2)
    res = CliRunner().invoke(app, ["view", str(run)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    page = next((run / "view" / "e").rglob("m1-ta-guided-0.html")).read_text()
    assert "No transcript: plain episode tables carry no transcript." in page
    assert "No per-workload results" in page and "No ablations: " in page.replace("no ablations", "No ablations")


def test_an_unreadable_ablations_file_is_a_sentence(tmp_path: Path):
    assert "run `d2kgrade ablate`" in load_ablations(tmp_path).note
    (tmp_path / "ablations.jsonl").write_text('{"task": "t", "episode": "e", "property": "p", "status": "untimed"}\n'
                                              "not json\n")
    ab = load_ablations(tmp_path)  # d2kgrade.ablate's loader refuses the file: the pages say why
    assert ab.rows == [] and ab.note.startswith("ablations not shown: ") and "line 1" in ab.note


def test_html_pieces():
    folded = fold("\n".join(f"line {i}" for i in range(100)))
    assert "show all 100 lines" in folded and folded.count("line 99") == 1
    block = code_block("\nx = 1\ny = 2\n", "k", marks={3: ["p.L1.a"]})
    assert 'id="k-L3" data-props="p.L1.a"' in block and 'class="ln ev"' in block  # a leading blank line counts
    assert block.count('class="ln') == 3
    assert "No change" in diff_block("a\n", "a\n", "v1", "v2")
    assert "+1 / -1 lines" in diff_block("a\nb\n", "a\nc\n", "v1", "v2")


def test_view_cli_needs_out_for_several_runs(tmp_path: Path):
    a = make_run(tmp_path / "a", models=("m1",), tasks=("ta",))
    b = make_run(tmp_path / "b", models=("m1",), tasks=("ta",))
    proc = subprocess.run([sys.executable, "-m", "d2kgrade", "view", str(a), str(b)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1 and "--out DIR is needed" in proc.stderr and "Traceback" not in proc.stderr
    res = CliRunner().invoke(app, ["view", str(a), str(b), "--out", str(tmp_path / "site")],
                             catch_exceptions=False)
    assert res.exit_code == 0
    assert {p.parent.name for p in (tmp_path / "site" / "e").rglob("*.html")} == {"r0", "r0-2"}  # both runs call themselves r0
