"""The report: one self-contained HTML file that renders in headless Chromium with every image loaded, and a
Markdown twin with the same tables."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile

import pytest
from typer.testing import CliRunner

from d2kgrade.agreement.results import AgreementConfig
from d2kgrade.agreement.study import agreement_study
from d2kgrade.agreement.ratings import read_ratings
from d2kgrade.cli import app
from d2kgrade.metrics import ScoreConfig, load_run_dir, score_runs
from d2kgrade.report import fmt
from d2kgrade.report.build import write_report
from tests.metrics.synthetic import make_run

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
                None)
# CI sets this: there the browser test must run, never skip (scripts/setup.sh installs Debian's chromium)
REQUIRE = os.environ.get("D2KGRADE_REQUIRE_CHROMIUM") == "1"

PROBE_HEAD = ("<script>window.__errs=[];window.addEventListener('error',function(e){"
              "window.__errs.push(String(e.message||('failed to load '+(e.target&&e.target.tagName))))},true);"
              "</script>")
PROBE_TAIL = ("<script>window.addEventListener('load',function(){var im=[].slice.call(document.images);"
              "var d=document.createElement('pre');d.id='d2k-probe';d.textContent=JSON.stringify({"
              "images:im.length,loaded:im.filter(function(i){return i.complete&&i.naturalWidth>0}).length,"
              "widths:im.map(function(i){return i.naturalWidth}),errors:window.__errs,"
              "tables:document.querySelectorAll('table').length,h1:document.querySelector('h1').textContent});"
              "document.body.appendChild(d);});</script>")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    run = make_run(tmp / "run", models=("m1", "m2"), tasks=("ta", "tb", "tc", "td", "te"), seeds=(0, 1), seed=4)
    score = score_runs([load_run_dir(run)], ScoreConfig(resamples=60, seed=1))
    ratings = read_ratings([run / "grades.jsonl"])
    ratings = ratings[~ratings["item_id"].str.endswith("#proposal")]
    agreement = agreement_study(ratings, AgreementConfig(resamples=40))
    html_path, md_path = write_report(tmp / "out" / "report.html", score, agreement, ratings)
    return score, html_path, md_path


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_html_is_self_contained_and_matches_the_markdown_twin(built):
    score, html_path, md_path = built
    html = html_path.read_text()
    srcs = re.findall(r'src="([^"]*)"', html)
    assert len(srcs) >= 5  # bars, scatter, discovery, heatmap, kappa vs AC1 (+ Bland-Altman)
    for s in srcs:
        assert s.startswith("data:image/png;base64,")
        w, h = _png_size(base64.b64decode(s.split(",", 1)[1]))
        assert w > 100 and h > 100
    assert not re.search(r'(src|href)="(https?:)?//', html) and "<link" not in html and "<script" not in html
    md = md_path.read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(links) == len(srcs)
    for link in links:
        assert (md_path.parent / link).is_file()
    assert html.count("<table>") == len(re.findall(r"^\|---", md, flags=re.M))
    # the headline rows of the pooled model carry the scored numbers, one metric a row, with n
    c = next(c for c in score.comparisons if c.model == "all")
    d = c.metrics["correctness"]
    row = (f"| all | guided | Correct | {d.n} | {fmt.value(d.baseline, 'pct')} | {fmt.value(d.treatment, 'pct')} | "
           f"{fmt.delta(d.delta, 'pct')} | {fmt.interval(d.ci_low, d.ci_high, 'pct', signed=True)} |")
    assert row in md
    assert f"<td>{fmt.value(d.baseline, 'pct')}</td><td>{fmt.value(d.treatment, 'pct')}</td>" in html
    assert "– → –" not in md and "(– )" not in md
    # the headline table as LaTeX (booktabs), beside the report
    tex = (html_path.parent / "report_headline.tex").read_text()
    assert "\\begin{tabular}" in tex and "\\toprule" in tex and "$\\Delta$" in tex
    assert tex.count(" \\\\") == 1 + len(score.comparisons) * 6  # header + 6 metrics per comparison
    base_tex = fmt.value(d.baseline, "pct").replace("%", r"\%")
    assert f"all & guided & Correct & {d.n} & {base_tex}" in tex
    assert "Landis &amp; Koch (1977)" in html and "Landis & Koch (1977)" in md


def test_report_renders_in_headless_chromium(built, tmp_path):
    if CHROMIUM is None:
        if REQUIRE:
            pytest.fail("D2KGRADE_REQUIRE_CHROMIUM=1 but no chromium on PATH (scripts/setup.sh installs it)")
        pytest.skip("chromium is not installed (apt-get install chromium, or run scripts/setup.sh)")
    _, html_path, _ = built
    html = html_path.read_text()
    n_img, n_tables = html.count("<img "), html.count("<table>")
    probe = tmp_path / "probe.html"  # the report itself has no script; the probe is added to a copy
    probe.write_text(html.replace("<head>", "<head>" + PROBE_HEAD, 1).replace("</body>", PROBE_TAIL + "</body>"))
    profile = tempfile.mkdtemp(prefix="d2k-chromium-")
    try:
        proc = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
            capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    m = re.search(r'<pre id="d2k-probe">(.*?)</pre>', proc.stdout, flags=re.S)
    assert m, f"no probe in the dumped DOM (rc {proc.returncode}): {proc.stderr[-2000:]}"
    state = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert state["errors"] == []
    assert state["images"] == n_img and state["loaded"] == n_img
    assert all(w > 0 for w in state["widths"])
    assert state["tables"] == n_tables and state["h1"] == "d2kgrade report"


def test_report_cli(tmp_path):
    run = make_run(tmp_path / "run", models=("m1",), tasks=("ta", "tb", "tc"), seed=9)
    out = tmp_path / "r" / "rep.html"
    res = CliRunner().invoke(app, ["report", str(run), "--out", str(out), "--resamples", "30", "--ratings",
                                   str(run / "grades.jsonl")], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert out.is_file() and out.with_suffix(".md").is_file() and (tmp_path / "r" / "rep_files").is_dir()
    html = out.read_text()
    assert "Agreement between raters" in html and "combined vs static" in html
    assert oct(out.stat().st_mode & 0o777) != oct(0o600)


def test_the_ablation_section_names_what_carried_the_speed_per_task(tmp_path):
    """The per-task-and-arm table (d2kgrade.ablate.attribution): implemented properties by slowdown with how many
    episodes found them load-bearing, missing ones priced by the reference."""
    from types import SimpleNamespace

    from d2kgrade.report.render import Document, to_markdown
    from d2kgrade.report.sections import ablation_section
    from d2kgrade.view.data import load_ablations

    def rec(episode, arm, prop, status, slowdown=None, estimated=False):
        return {"schema_version": 1, "task": "softmax", "episode": episode, "arm": arm, "model": "m", "seed": 0,
                "property": prop, "level": "L1", "transform": "t", "present": status != "not_present",
                "status": status, "slowdown": slowdown, "ci_low": slowdown and slowdown - 0.02,
                "ci_high": slowdown and slowdown + 0.02, "noise_pct": 1.0 if slowdown else None,
                "estimated_from_reference": estimated, "message": ""}

    rows = [rec("e1", "guided", "softmax.L1.online", "load_bearing", 1.60),
            rec("e2", "guided", "softmax.L1.online", "not_load_bearing", 1.01),
            rec("e3", "guided", "softmax.L1.online", "load_bearing", 1.50),
            rec("e1", "guided", "softmax.L1.one-pass", "not_present", 2.40, estimated=True),
            rec("e4", "unguided", "softmax.L1.one-pass", "not_present", 2.40, estimated=True),
            rec("e4", "unguided", "softmax.L1.online", "broke_correctness")]
    (tmp_path / "ablations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    doc = Document("r")
    ablation_section(doc, [SimpleNamespace(ablations=load_ablations(tmp_path))])
    md = to_markdown(doc, tmp_path / "fig", "fig")
    line = next(x for x in md.splitlines() if x.startswith("| softmax | guided"))
    assert "softmax.L1.online 1.50x (2/3 load-bearing)" in line, line
    assert "softmax.L1.one-pass 2.40x (lacking in 1)" in line, line
    unguided = next(x for x in md.splitlines() if x.startswith("| softmax | unguided"))
    assert "softmax.L1.online" not in unguided.split("|")[4], unguided  # broke correctness: nothing timed


def test_the_report_carries_the_references_ablation_from_the_committed_json(tmp_path):
    """--reference-ablations: the committed H200 ablation becomes a section, one row per timed property, load-bearing
    first within a task; a file that is not an ablation is one error line naming it and what was expected."""
    from pathlib import Path

    from d2kgrade.errors import UserError

    committed = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "ablation_h200.json"
    doc = json.loads(committed.read_text())
    timed = [r for r in doc["records"] if r["slowdown"] is not None]
    run = make_run(tmp_path / "run", models=("m1",), tasks=("ta", "tb"), seed=3)
    out = tmp_path / "rep.html"
    res = CliRunner().invoke(app, ["report", str(run), "--out", str(out), "--resamples", "20",
                                   "--reference-ablations", str(committed)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    md = out.with_suffix(".md").read_text()
    assert "Expert references: which design properties carry the speed" in md
    rows = [x for x in md.splitlines() if re.match(r"\| [a-z0-9_]+ \| L\d\.", x)]
    assert len(rows) == len(timed)
    top = max((r for r in timed if r["task"] == "gemm_bf16"), key=lambda r: r["slowdown"])
    first = next(x for x in rows if x.startswith("| gemm_bf16 |"))
    assert top["property"].removeprefix("gemm_bf16.") in first and f"{top['slowdown']:.3f}x" in first
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"what": "something else"}))
    res = CliRunner().invoke(app, ["report", str(run), "--out", str(out), "--reference-ablations", str(bad)])
    # a UserError: the console entry point prints it as one line and exits 1
    assert isinstance(res.exception, UserError) and "bad.json: records: missing" in str(res.exception)
