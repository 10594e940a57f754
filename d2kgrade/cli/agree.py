"""``d2kgrade agree RATINGS... [--gold FILE]``: inter-rater agreement, with the scale each coefficient is read on."""

from __future__ import annotations

from pathlib import Path

import typer

from d2kgrade.cli._common import JsonOption, SuiteOption, console, print_error, print_json, print_table, print_warning


def _stat(s) -> str:
    from d2kgrade.report import fmt

    if s is None or s.value is None:
        return "–"
    ci = f" [{fmt.stat(s.ci_low, 2)}, {fmt.stat(s.ci_high, 2)}]" if s.ci_low is not None else ""
    return f"{fmt.stat(s.value)}{ci}" + (f" {s.label}" if s.label else "")


def render(result, *, per_property: bool) -> None:
    """Rich tables of an AgreementResult."""
    from rich.table import Table

    from d2kgrade.report import fmt

    for key, text in result.scales.items():
        console.print(f"[dim]{key}: {text}[/dim]")
    t = Table(title="Binary verdicts: pairs (Cohen's kappa with Gwet's AC1 beside it)")
    for col in ("scope", "raters", "n", "agree", "prev a/b", "kappa", "AC1"):
        t.add_column(col)
    for b in result.binary:
        if b.scope == "property" and not per_property:
            continue
        for p in b.pairs:
            t.add_row(b.scope_id, f"{p.rater_a} vs {p.rater_b}", str(p.n), fmt.value(p.percent_agreement, "pct"),
                      f"{fmt.value(p.prevalence_a, 'pct')}/{fmt.value(p.prevalence_b, 'pct')}", _stat(p.kappa),
                      _stat(p.ac1))
    print_table(t)
    t = Table(title="Binary verdicts: all raters (Krippendorff's alpha nominal, missing allowed)")
    for col in ("scope", "raters", "units", "agree", "prevalence", "alpha", "Fleiss kappa", "AC1"):
        t.add_column(col)
    for b in result.binary:
        if b.scope == "property" and not per_property:
            continue
        t.add_row(b.scope_id, str(len(b.raters)), str(b.n_units), fmt.value(b.percent_agreement, "pct"),
                  fmt.value(b.prevalence, "pct"), _stat(b.krippendorff_alpha), _stat(b.fleiss_kappa),
                  _stat(b.gwet_ac1))
    print_table(t)
    s = result.scores
    if s is not None:
        console.print(f"Scores (0-100), {len(s.raters)} raters, {s.n_items} items scored by all: "
                      f"ICC(2,1) {_stat(s.icc2)}; ICC(3,1) {_stat(s.icc3)}; Krippendorff's alpha (interval) "
                      f"{_stat(s.krippendorff_alpha)}")
        t = Table(title="Scores: pairs")
        for col in ("raters", "n", "ICC(2,1)", "ICC(3,1)", "Spearman", "Kendall", "mean diff", "limits of agreement"):
            t.add_column(col)
        for p in s.pairs:
            t.add_row(f"{p.rater_a} vs {p.rater_b}", str(p.n), _stat(p.icc2), _stat(p.icc3), fmt.stat(p.spearman),
                      fmt.stat(p.kendall), fmt.stat(p.mean_diff, 1),
                      f"[{fmt.stat(p.loa_low, 1)}, {fmt.stat(p.loa_high, 1)}]")
        print_table(t)
    if result.gold:
        t = Table(title="Against the gold set ('present' is positive)")
        for col in ("rater", "scope", "n", "precision", "recall", "F1"):
            t.add_column(col)
        for g in result.gold:
            if g.scope == "property" and not per_property:
                continue
            t.add_row(g.rater_id, g.scope_id, str(g.n), _stat(g.precision), _stat(g.recall), _stat(g.f1))
        print_table(t)
    if result.consistency:
        t = Table(title="Judge self-consistency across samples")
        for col in ("rater", "scope", "units", "unanimous", "majority share", "Fleiss kappa", "alpha"):
            t.add_column(col)
        for c in result.consistency:
            t.add_row(c.rater_id, c.scope_id, str(c.n_units), fmt.value(c.unanimous, "pct"),
                      fmt.value(c.majority_share, "pct"), _stat(c.fleiss_kappa), _stat(c.krippendorff_alpha))
        print_table(t)


def agree(
    ratings: list[Path] = typer.Argument(..., help="FileGrade JSONL (judge outputs, grades.jsonl) or CSV/JSONL "
                                                   "long tables (item_id, property_id, rater_id, value, ...)."),
    gold: Path = typer.Option(None, "--gold", help="Gold ratings (same formats); majority of its raters per unit."),
    kind: str = typer.Option("code", "--kind", help="Items to compare: code | proposal | all."),
    resamples: int = typer.Option(1000, "--resamples", help="Bootstrap resamples (0: none)."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    ci: float = typer.Option(0.95, "--ci", help="Confidence level."),
    per_property: bool = typer.Option(False, "--per-property", help="Show every property in the tables (always in "
                                                                    "--json)."),
    out: Path = typer.Option(None, "--out", help="Also write the JSON result to this file."),
    suite: Path = SuiteOption,
    as_json: bool = JsonOption,
) -> None:
    """Agreement between raters: per property and level (percent agreement, prevalence, Cohen's kappa and Gwet's
    AC1 per pair, Krippendorff's alpha, Fleiss' kappa), on 0-100 scores (ICC(2,1), ICC(3,1), alpha, Spearman,
    Kendall, Bland-Altman), against a gold set, and a sampled judge against itself."""
    from pydantic import ValidationError

    from d2kgrade.agreement.results import AgreementConfig
    from d2kgrade.agreement.study import run_agreement
    from d2kgrade.config import load_settings
    from d2kgrade.errors import UserError
    from d2kgrade.io import write_json

    try:
        cfg = AgreementConfig(resamples=resamples, seed=seed, ci=ci)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UserError(f"--{err['loc'][0]}: {err['msg']} (got {err.get('input')!r})") from None
    result = run_agreement(list(ratings), cfg, gold=gold, rubrics_from=load_settings(suite=suite).suite, kind=kind)
    data = result.model_dump(mode="json")
    if out is not None:
        write_json(out, data)
    nothing = not (result.binary or result.scores or result.gold or result.consistency)
    if as_json:
        print_json(data)
    elif not nothing:
        render(result, per_property=per_property)
    for w in result.warnings:
        print_warning(w)
    if nothing:  # one rater and no gold set: the thing asked for cannot be computed
        print_error(f"no agreement to compute from {', '.join(map(str, ratings))}: it needs two raters of the same "
                    "properties, a --gold set, or a judge's repeated samples")
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("agree")(agree)
