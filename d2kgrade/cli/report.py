"""``d2kgrade report RUN_DIR... --out report.html``: one self-contained HTML report and a Markdown twin."""

from __future__ import annotations

from pathlib import Path

import typer

from d2kgrade.cli._common import SuiteOption, err_console
from d2kgrade.cli.score import parse_fast_p, score_config


def report(
    run_dirs: list[Path] = typer.Argument(None, help="Run directories (with their grades.jsonl)."),
    out: Path = typer.Option(Path("report.html"), "--out", help="HTML file; the Markdown twin goes beside it "
                                                                 "(.md, figures in <stem>_files/)."),
    reference: list[Path] = typer.Option([], "--reference", help="Run directory with expert reference episodes."),
    episodes: Path = typer.Option(None, "--episodes", help="Plain episodes table (CSV/JSONL)."),
    workloads: Path = typer.Option(None, "--workloads", help="Plain workloads table (CSV/JSONL)."),
    grades: Path = typer.Option(None, "--grades", help="Grades JSONL for --episodes."),
    ratings: list[Path] = typer.Option([], "--ratings", help="Ratings for the agreement section (FileGrade JSONL or "
                                                             "long tables). Repeatable."),
    gold: Path = typer.Option(None, "--gold", help="Gold ratings for the agreement section."),
    rater: str = typer.Option("combined", "--rater", help="Rater of the code grades."),
    proposal_rater: str = typer.Option(None, "--proposal-rater", help="Rater of the design-note grades."),
    resamples: int = typer.Option(2000, "--resamples", help="Bootstrap resamples."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    ci: float = typer.Option(0.95, "--ci", help="Confidence level."),
    seed_agg: str = typer.Option("mean", "--seed-agg", help="mean | best."),
    fast_p: str = typer.Option("0,1,1.5,2", "--fast-p", help="Thresholds p of fast_p."),
    viewer: Path = typer.Option(None, "--viewer", help="A `d2kgrade view` site to link rows into (default: "
                                                       "RUN_DIR/view of the first run, when it exists)."),
    reference_ablations: Path = typer.Option(None, "--reference-ablations", help="The expert references' "
                                             "ablation (benchmarks/data/ablation_h200.json, or an ablations JSONL) "
                                             "for its section."),
    suite: Path = SuiteOption,
) -> None:
    """The paper-style report: statuses and failure reasons per arm, the headline table (also as LaTeX),
    proposed and implemented per level, the Performance Score distribution, the speedup scatter, per-arm and
    per-task tables linked into the viewer, ablations, and the agreement section when --ratings are given.
    A run with nothing to score gets a report that says what it holds and what is missing."""
    from d2kgrade.errors import UserError
    from d2kgrade.metrics import score_tables
    from d2kgrade.metrics.tables import load_runs
    from d2kgrade.report.build import missing_report, write_document, write_report
    from d2kgrade.view.data import combined, episode_table, runs_from_tables

    cfg = score_config(rater=rater, proposal_rater=proposal_rater, resamples=resamples, seed=seed, ci=ci,
                       seed_agg=seed_agg, fast_p=parse_fast_p(fast_p))
    ref_ablations = None
    if reference_ablations is not None:
        from d2kgrade.ablate.results import read_ablation_file

        ref_ablations = (str(reference_ablations), read_ablation_file(reference_ablations))
    runs = load_runs(run_dirs or [], episodes=episodes, workloads=workloads, grades=grades)
    refs = load_runs(reference) if reference else []
    view_runs = runs_from_tables(runs)
    table = episode_table(view_runs, cfg)
    try:
        result = score_tables(combined(runs + refs), cfg,
                              reference_runs=set(range(len(runs), len(runs) + len(refs))))
    except UserError as exc:  # nothing to score: say so, and still write a report of what the runs hold
        html_path, md_path = write_document(out, missing_report(view_runs, table, str(exc)))
        err_console.print(f"nothing to score ({exc}); wrote {html_path} and {md_path}, which say what is missing",
                          highlight=False, soft_wrap=True)
        return
    link = _viewer_prefix(viewer, run_dirs or [], out)
    agreement, ratings_table = None, None
    if ratings:
        from d2kgrade.agreement.results import AgreementConfig
        from d2kgrade.agreement.study import run_agreement
        from d2kgrade.config import load_settings

        tables: list = []
        agreement = run_agreement(list(ratings), AgreementConfig(resamples=min(resamples, 1000), seed=seed, ci=ci),
                                  gold=gold, rubrics_from=load_settings(suite=suite).suite, table=tables)
        ratings_table = tables[0]
    html_path, md_path = write_report(out, result, agreement, ratings_table, episodes=table, runs=view_runs,
                                      viewer=link, reference_ablations=ref_ablations)
    err_console.print(f"wrote {html_path} and {md_path}")
    for w in result.warnings:
        err_console.print(f"[yellow]warning:[/yellow] {w}", highlight=False, soft_wrap=True)


def _viewer_prefix(viewer: Path | None, run_dirs: list[Path], out: Path) -> str | None:
    """The viewer site's folder as a URL prefix relative to the report (so links work from file://)."""
    import os

    from d2kgrade.errors import UserError

    site = viewer if viewer is not None else (run_dirs[0] / "view" if run_dirs else None)
    if site is None or not (site / "index.html").is_file():
        if viewer is not None:
            raise UserError(f"--viewer {viewer}: no index.html there (make the site with `d2kgrade view`)")
        return None
    rel = os.path.relpath(site.resolve(), out.resolve().parent)
    return Path(rel).as_posix().rstrip("/") + "/"


def register(app: typer.Typer) -> None:
    app.command("report")(report)
