"""``d2kgrade score RUN_DIR...``: the paper's metrics per model and arm, guided minus unguided with paired CIs."""

from __future__ import annotations

from pathlib import Path

import typer

from d2kgrade.cli._common import JsonOption, print_error, print_json, print_table, print_warning
from d2kgrade.errors import UserError

HEADLINE = ("correctness", "perf_score", "geomean_speedup_eager", "geomean_speedup_compiled", "fast_1",
            "roofline_fraction", "impl_score")


def parse_fast_p(text: str) -> tuple[float, ...]:
    """``"0,1,1.5,2"`` -> (0.0, 1.0, 1.5, 2.0)."""
    try:
        out = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UserError(f"--fast-p: expected comma-separated numbers such as 0,1,1.5,2, got {text!r}") from None
    if not out or any(p < 0 for p in out):
        raise UserError(f"--fast-p: expected non-negative numbers, got {text!r}")
    return out


def score_config(**kw: object):
    """A ScoreConfig from CLI values, with option names in its errors."""
    from pydantic import ValidationError

    from d2kgrade.metrics import ScoreConfig

    try:
        return ScoreConfig(**{k: v for k, v in kw.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        opt = "--" + str(err["loc"][0]).replace("_", "-")
        msg = str(err["msg"]).removeprefix("Value error, ")
        got = "" if "got" in msg else f" (got {err.get('input')!r})"
        raise UserError(f"{opt}: {msg}{got}") from None


def _print_nonempty(table) -> None:
    if table.row_count:
        print_table(table)


def render(result) -> None:
    """Rich tables: arms, comparisons, design rates per level."""
    from rich.table import Table

    from d2kgrade.metrics import metric_registry
    from d2kgrade.report import fmt

    metrics = {m.name: m for m in metric_registry(result.config)}
    t = Table(title="Per model and arm (means over tasks; speeds over each arm's correct tasks)")
    for col in ("model", "arm", "tasks", *(metrics[m].short or m for m in HEADLINE)):
        t.add_column(col, justify="left" if col in ("model", "arm") else "right")
    for a in result.arms:
        t.add_row(a.model, a.arm, str(a.n_tasks),
                  *(fmt.value(a.metrics[m].value, metrics[m].fmt) for m in HEADLINE))
    _print_nonempty(t)
    pct = int(round(100 * result.config.ci))
    t = Table(title=f"Guided minus unguided, paired on tasks ({pct}% bootstrap CI over tasks, "
                    f"{result.config.resamples} resamples)")
    for col in ("model", "arm", "pairs", "metric", "unguided", "guided", "delta", f"{pct}% CI"):
        t.add_column(col, justify="left" if col in ("model", "arm", "metric") else "right")
    for c in result.comparisons:
        for name in HEADLINE:
            d, m = c.metrics[name], metrics[name]
            t.add_row(c.model, c.treatment, str(c.n_pairs), m.short or m.name, fmt.value(d.baseline, m.fmt),
                      fmt.value(d.treatment, m.fmt), fmt.delta(d.delta, m.fmt),
                      fmt.interval(d.ci_low, d.ci_high, m.fmt, signed=True))
    _print_nonempty(t)
    t = Table(title="Design properties per level (share of the level's properties, averaged over tasks)")
    for col in ("model", "arm", "level", "proposed", "implemented", "impl, not prop", "prop, not impl"):
        t.add_column(col, justify="left" if col in ("model", "arm", "level") else "right")
    for a in result.arms:
        for lv in ("L1", "L2", "L3"):
            vals = [a.metrics[f"{r}_{lv}"].value for r in ("proposed", "implemented", "impl_without_proposed",
                                                            "proposed_not_implemented")]
            if any(v is not None for v in vals):
                t.add_row(a.model, a.arm, lv, *(fmt.value(v, "pct") for v in vals))
    _print_nonempty(t)


def score(
    run_dirs: list[Path] = typer.Argument(None, help="Run directories (results.sqlite, or episodes/workloads "
                                                     "CSV/JSONL tables), with their grades.jsonl."),
    reference: list[Path] = typer.Option([], "--reference", help="Run directory whose reference episodes give the "
                                                                 "expert's speed (Performance Score 3). Repeatable."),
    episodes: Path = typer.Option(None, "--episodes", help="Plain episodes table (CSV/JSONL) from elsewhere."),
    workloads: Path = typer.Option(None, "--workloads", help="Plain workloads table (CSV/JSONL)."),
    grades: Path = typer.Option(None, "--grades", help="Grades JSONL for --episodes."),
    rater: str = typer.Option("combined", "--rater", help="Rater of the code grades: static|llm|combined|human."),
    proposal_rater: str = typer.Option(None, "--proposal-rater",
                                       help="Rater of the design-note grades (default: --rater, else llm)."),
    resamples: int = typer.Option(2000, "--resamples", help="Bootstrap resamples of tasks (0: no CIs)."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    ci: float = typer.Option(0.95, "--ci", help="Confidence level."),
    seed_agg: str = typer.Option("mean", "--seed-agg", help="Several seeds per task: mean | best."),
    eager_threshold: float = typer.Option(1.0, "--eager-threshold", help="Performance Score 2: speedup over eager "
                                                                         "above this."),
    reference_fraction: float = typer.Option(0.9, "--reference-fraction",
                                             help="Performance Score 3: at least this fraction of the reference's "
                                                  "speed."),
    fast_p: str = typer.Option("0,1,1.5,2", "--fast-p", help="Thresholds p of fast_p, comma-separated."),
    out: Path = typer.Option(None, "--out", help="Also write the JSON result to this file."),
    as_json: bool = JsonOption,
) -> None:
    """Correctness, Performance Score, speedups, fast_p, roofline and implementation scores per model and arm,
    with guided minus unguided deltas and paired bootstrap CIs (definitions: docs/metrics.md). Episodes that failed
    on the API (or inside d2kgrade) are left out and counted. Exit 1 when nothing can be scored."""
    from d2kgrade.io import write_json
    from d2kgrade.metrics import score_runs
    from d2kgrade.metrics.results import NothingToScore
    from d2kgrade.metrics.tables import load_runs

    cfg = score_config(rater=rater, proposal_rater=proposal_rater, resamples=resamples, seed=seed, ci=ci,
                       seed_agg=seed_agg, eager_threshold=eager_threshold, reference_fraction=reference_fraction,
                       fast_p=parse_fast_p(fast_p))
    runs = load_runs(run_dirs or [], episodes=episodes, workloads=workloads, grades=grades)
    refs = load_runs(reference) if reference else []
    try:
        result = score_runs(runs, cfg, refs)
    except NothingToScore as exc:  # an empty run, or every episode failed on the API: say why, exit 1
        if as_json:
            print_json(exc.result.model_dump(mode="json"))
        print_error(exc)
        for w in exc.result.warnings:
            print_warning(w)
        raise typer.Exit(1) from None
    data = result.model_dump(mode="json")
    if out is not None:
        write_json(out, data)
    if as_json:
        print_json(data)
    else:
        render(result)
    for w in result.warnings:
        print_warning(w)


def register(app: typer.Typer) -> None:
    app.command("score")(score)
