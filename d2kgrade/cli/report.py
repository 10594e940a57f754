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
    suite: Path = SuiteOption,
) -> None:
    """The paper-style report: headline table, per-arm and per-task tables, paired bars, speedup scatter,
    discovery vs implementation, property heatmap, and the agreement section when --ratings are given."""
    from d2kgrade.metrics import score_runs
    from d2kgrade.metrics.tables import load_runs
    from d2kgrade.report.build import write_report

    cfg = score_config(rater=rater, proposal_rater=proposal_rater, resamples=resamples, seed=seed, ci=ci,
                       seed_agg=seed_agg, fast_p=parse_fast_p(fast_p))
    runs = load_runs(run_dirs or [], episodes=episodes, workloads=workloads, grades=grades)
    result = score_runs(runs, cfg, load_runs(reference) if reference else [])
    agreement, table = None, None
    if ratings:
        from d2kgrade.agreement.results import AgreementConfig
        from d2kgrade.agreement.study import run_agreement
        from d2kgrade.config import load_settings

        tables: list = []
        agreement = run_agreement(list(ratings), AgreementConfig(resamples=min(resamples, 1000), seed=seed, ci=ci),
                                  gold=gold, rubrics_from=load_settings(suite=suite).suite, table=tables)
        table = tables[0]
    html_path, md_path = write_report(out, result, agreement, table)
    err_console.print(f"wrote {html_path} and {md_path}")
    for w in result.warnings:
        err_console.print(f"[yellow]warning:[/yellow] {w}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
