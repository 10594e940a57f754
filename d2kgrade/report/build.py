"""``d2kgrade report``: the score (and agreement) results as a paper-style HTML report and its Markdown twin."""

from __future__ import annotations

import logging
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from d2kgrade import __version__
from d2kgrade.io import atomic_write_text
from d2kgrade.report import fmt, plots
from d2kgrade.report.render import (Bullets, Cell, Document, Figure, Heading, Para, Table, to_html, to_latex,
                                    to_markdown)
from d2kgrade.report.sections import viewer_link

if TYPE_CHECKING:
    import pandas as pd

    from d2kgrade.agreement.results import AgreementResult, Stat
    from d2kgrade.metrics.results import ScoreResult
    from d2kgrade.view.data import Run

log = logging.getLogger(__name__)

HEADLINE = ("correctness", "perf_score", "geomean_speedup_eager", "geomean_speedup_compiled", "fast_1",
            "impl_score")
ARM_TABLE = ("correctness", "perf_score", "geomean_speedup_eager", "geomean_speedup_compiled", "fast_0", "fast_1",
             "fast_1.5", "fast_2", "roofline_fraction", "impl_score", "impl_L1", "impl_L2", "impl_L3")
TASK_COLUMNS = (("correct", "correct", "pct"), ("perf_score", "perf", "num"), ("speedup_eager", "vs eager", "x"),
                ("impl_score", "impl", "score"))
UNDEFINED = {True: "undefined: no task correct in both arms", False: "undefined: no task graded in both arms"}


def _stat(s: Stat | None) -> str:
    if s is None or s.value is None:
        return "–"
    ci = f" [{fmt.stat(s.ci_low, 2)}, {fmt.stat(s.ci_high, 2)}]" if s.ci_low is not None else ""
    return f"{fmt.stat(s.value)}{ci}" + (f" ({s.label})" if s.label else "")


def _bare(x: float | None, f: str) -> str:
    """An interval end without its unit (the value beside it carries the unit)."""
    return fmt.value(x, f).rstrip("%x") if f in ("pct", "x") else fmt.value(x, f)


def _estimate(est, f: str) -> str:
    """``value [lo, hi] n=N``; '–' when undefined (n carries why: no task had a value)."""
    if est is None or est.value is None:
        return f"– n={est.n if est is not None else 0}"
    ci = f" [{_bare(est.ci_low, f)}, {_bare(est.ci_high, f)}]" if est.ci_low is not None else ""
    return f"{fmt.value(est.value, f)}{ci} n={est.n}"


def headline_table(score: ScoreResult, reg: dict) -> Table:
    """One row per (model, guided arm, metric): both arms on the paired tasks, the difference and its interval,
    with n. A metric no pair defines says why instead of printing empty arrows."""
    pct = int(round(100 * score.config.ci))
    rows: list[list[Cell]] = []
    for c in score.comparisons:
        for name in HEADLINE:
            d, m = c.metrics[name], reg[name]
            if d.baseline is None and d.treatment is None:
                rows.append([c.model, c.treatment, m.label, str(d.n), "–", "–", UNDEFINED[m.paired_on_correct], ""])
                continue
            rows.append([c.model, c.treatment, m.label, str(d.n), fmt.value(d.baseline, m.fmt),
                         fmt.value(d.treatment, m.fmt), fmt.delta(d.delta, m.fmt),
                         fmt.interval(d.ci_low, d.ci_high, m.fmt, signed=True) or "–"])
    return Table(["model", "guided arm", "metric", "n", "unguided", "guided", "Δ guided − unguided", f"{pct}% CI"],
                 rows, caption=f"n: model-task pairs in both arms (speeds: correct in both). Paired bootstrap over "
                               f"tasks, {score.config.resamples} resamples, seed {score.config.seed}.",
                 latex="headline")


def score_section(doc: Document, score: ScoreResult, table: pd.DataFrame | None = None,
                  viewer: str | None = None) -> None:
    """Headline, the level figure, Performance Score distribution, speedups, per-arm, per-task and design."""
    from d2kgrade.metrics import metric_registry
    from d2kgrade.metrics.score import arm_order

    reg = {m.name: m for m in metric_registry(score.config)}
    pct = int(round(100 * score.config.ci))
    doc.add(Heading(2, "Headline: guided vs unguided"))
    if score.comparisons:
        doc.add(headline_table(score, reg))
    else:
        doc.add(Para("No model ran both an unguided and a guided arm: there is no paired comparison."))
    if score.warnings:
        doc.add(Heading(3, "Read these numbers with"), Bullets(list(score.warnings)))

    doc.add(Heading(2, "Design properties proposed and implemented, per level"))
    models = list(dict.fromkeys(a.model for a in score.arms))
    focus = "all" if "all" in models else (models[0] if models else None)
    fig = plots.level_comparison(score, focus) if focus else None
    if fig:
        doc.add(Figure("level_comparison", fig, f"Model {focus}: share of each level's properties the design note "
                                                f"proposed and the kernel implemented, per arm, with {pct}% "
                                                "bootstrap intervals over tasks; n = tasks with a grade."))
    else:
        doc.add(Para("No design-note or kernel grades: run `d2kgrade judge --run RUN_DIR` to grade what was "
                     "proposed and implemented."))
    rows: list[list[Cell]] = []
    for a in score.arms:
        for lv in ("L1", "L2", "L3"):
            ests = [a.metrics[f"{r}_{lv}"] for r in ("proposed", "implemented", "impl_without_proposed",
                                                       "proposed_not_implemented")]
            if any(e.value is not None for e in ests):
                rows.append([a.model, a.arm, lv, *(_estimate(e, "pct") for e in ests),
                             _estimate(a.metrics[f"impl_{lv}"], "score")])
    if rows:
        doc.add(Table(["model", "arm", "level", "proposed", "implemented", "implemented, not proposed",
                       "proposed, never implemented", "implementation (% of level points)"], rows,
                      caption=f"Code graded by the '{score.config.rater}' rater, design notes by "
                              f"'{score.proposal_rater or 'none'}'; means over tasks with {pct}% intervals."))

    if table is not None:
        from d2kgrade.report.sections import perf_section

        perf_section(doc, table)

    doc.add(Heading(2, "Speedups"))
    scatter = plots.speedup_scatter(score)
    if scatter:
        doc.add(Figure("speedup_scatter", scatter, "Guided vs unguided geomean speedup over eager per (model, "
                                                    "task), tasks correct in both arms; log axes; above the "
                                                    "diagonal, guidance helped."))
    else:
        doc.add(Para("No task was correct and timed in both arms: no speedup scatter."))
    bars, left_out = plots.paired_bars(score, [("correctness", "Correct (%)", 100.0),
                                               ("perf_score", "Performance Score", 1.0),
                                               ("geomean_speedup_eager", "Geomean speedup vs eager", 1.0),
                                               ("impl_score", "Implementation score", 1.0)])
    if bars:
        doc.add(Figure("paired_bars", bars, f"Per model, each arm with its {pct}% bootstrap interval over tasks."
                       + (f" Not drawn, no value in any arm: {', '.join(left_out)}." if left_out else "")))
    else:
        doc.add(Para("No arm has a value for any headline metric: no per-arm bars."))

    doc.add(Heading(2, "Per model and arm"),
            Para(f"Means over tasks (seeds aggregated by '{score.config.seed_agg}') with {pct}% bootstrap "
                 "intervals and n (tasks with a value); speeds over each arm's own correct tasks."))
    for model in models:
        arms = [a for a in score.arms if a.model == model]
        rows = [[reg[name].label, *(_estimate(a.metrics.get(name), reg[name].fmt) for a in arms)]
                for name in ARM_TABLE if name in reg]
        rows.insert(0, ["tasks / episodes", *(f"{a.n_tasks} / {a.n_episodes}" for a in arms)])
        doc.add(Table(["metric", *(a.arm for a in arms)], rows, caption=f"Model {model}."))

    doc.add(Heading(2, "Per task"))
    arms_all = sorted(dict.fromkeys(t.arm for t in score.tasks), key=arm_order)
    by = {(t.model, t.arm, t.task): t for t in score.tasks}
    rows = []
    for model, task in sorted({(t.model, t.task) for t in score.tasks}):
        row: list[Cell] = [model, viewer_link(viewer, task, task=task, model=model),
                           fmt.value(score.reference_speedup.get(task), "x")]
        for arm in arms_all:
            t = by.get((model, arm, task))
            row += [fmt.value(t.values.get(col) if t else None, f) for col, _, f in TASK_COLUMNS]
        rows.append(row)
    doc.add(Table(["model", "task", "expert vs eager",
                   *(f"{arm}: {label}" for arm in arms_all for _, label, _ in TASK_COLUMNS)], rows,
                  caption="Correct: share of seeds; speeds: geomean over the task's timed workloads (hidden "
                          "excluded) and over correct seeds." + (" Each task links to its episodes in the viewer."
                                                                  if viewer else "")))
    heat = plots.property_heatmap(score)
    if heat:
        doc.add(Figure("property_heatmap", heat, "Share of episodes that proposed / implemented each property, "
                                                 "pooled over models."))
    else:
        doc.add(Para("No property grades: no per-property heatmap."))


def agreement_section(doc: Document, agr: AgreementResult, ratings: pd.DataFrame | None) -> None:
    """Scales, binary agreement, scores, gold and self-consistency."""
    doc.add(Heading(2, "Agreement between raters"), Para("Interpretation scales:"),
            Bullets([f"{k}: {v}" for k, v in agr.scales.items()]))
    rows = [[b.scope_id, f"{p.rater_a} vs {p.rater_b}", str(p.n), fmt.value(p.percent_agreement, "pct"),
             f"{fmt.value(p.prevalence_a, 'pct')} / {fmt.value(p.prevalence_b, 'pct')}", _stat(p.kappa),
             _stat(p.ac1)] for b in agr.binary if b.scope != "property" for p in b.pairs]
    if rows:
        doc.add(Table(["scope", "raters", "n", "agreement", "prevalence", "Cohen's kappa", "Gwet's AC1"], rows,
                      caption="Binary verdicts per rater pair, per level and pooled (units: item x property)."))
    rows = [[b.scope_id, str(len(b.raters)), str(b.n_units), fmt.value(b.percent_agreement, "pct"),
             fmt.value(b.prevalence, "pct"), _stat(b.krippendorff_alpha), _stat(b.fleiss_kappa), _stat(b.gwet_ac1)]
            for b in agr.binary]
    if rows:
        doc.add(Table(["scope", "raters", "units", "agreement", "prevalence", "Krippendorff's alpha (nominal)",
                       "Fleiss' kappa", "Gwet's AC1"], rows, caption="All raters, per property, level and pooled."))
    fig = plots.kappa_vs_ac1(agr)
    if fig:
        doc.add(Figure("kappa_vs_ac1", fig, "Cohen's kappa beside Gwet's AC1: where prevalence is skewed, kappa "
                                            "falls although the raters agree (the kappa paradox)."))
    s = agr.scores
    if s is not None:
        doc.add(Heading(3, "Implementation scores (0-100)"),
                Para(f"{len(s.raters)} raters, {s.n_items} items scored by all. ICC(2,1) {_stat(s.icc2)}; "
                     f"ICC(3,1) {_stat(s.icc3)} (F intervals); bootstrap: ICC(2,1) {_stat(s.icc2_boot)}, "
                     f"ICC(3,1) {_stat(s.icc3_boot)}; Krippendorff's alpha (interval) {_stat(s.krippendorff_alpha)}."))
        rows = [[f"{p.rater_a} vs {p.rater_b}", str(p.n), _stat(p.icc2), _stat(p.icc3), fmt.stat(p.spearman),
                 fmt.stat(p.kendall), fmt.stat(p.mean_diff, 1),
                 f"[{fmt.stat(p.loa_low, 1)}, {fmt.stat(p.loa_high, 1)}]"]
                for p in s.pairs]
        doc.add(Table(["raters", "n", "ICC(2,1)", "ICC(3,1)", "Spearman", "Kendall", "mean difference",
                       "Bland-Altman limits"], rows))
        if ratings is not None and s.pairs:
            p = s.pairs[0]
            sc = ratings[ratings["property_id"] == "score"].pivot_table(index="item_id", columns="rater_id",
                                                                        values="value")
            if p.rater_a in sc and p.rater_b in sc:
                both = sc[[p.rater_a, p.rater_b]].dropna()
                ba = plots.bland_altman(both[p.rater_a].tolist(), both[p.rater_b].tolist(), p.rater_a, p.rater_b)
                if ba:
                    doc.add(Figure("bland_altman", ba, f"Bland-Altman: {p.rater_a} vs {p.rater_b}; bias and 95% "
                                                       "limits of agreement."))
    if agr.gold:
        rows = [[g.rater_id, g.scope_id, str(g.n), f"{g.tp}/{g.fp}/{g.fn}/{g.tn}", _stat(g.precision),
                 _stat(g.recall), _stat(g.f1)] for g in agr.gold if g.scope != "property"]
        doc.add(Heading(3, "Against the gold set"),
                Table(["rater", "scope", "n", "tp/fp/fn/tn", "precision", "recall", "F1"], rows))
    if agr.consistency:
        rows = [[c.rater_id, c.scope_id, str(c.n_units), fmt.value(c.unanimous, "pct"),
                 fmt.value(c.majority_share, "pct"), _stat(c.fleiss_kappa), _stat(c.krippendorff_alpha)]
                for c in agr.consistency]
        doc.add(Heading(3, "Judge self-consistency across samples"),
                Table(["rater", "scope", "units", "unanimous", "majority share", "Fleiss' kappa", "alpha"], rows))
    if agr.warnings:
        doc.add(Bullets(list(agr.warnings)))


def method_section(doc: Document, score: ScoreResult) -> None:
    doc.add(Heading(2, "Method"), Bullets([
        "Performance Score per episode: 0 not correct; 1 correct, geomean speedup vs eager <= "
        f"{score.config.eager_threshold:g}; 2 faster; 3 at least {score.config.reference_fraction:g}x the expert "
        "reference's speed (geomean over shared workloads of the ratio of speedups over eager). Averaged over tasks.",
        f"fast_p: share of tasks correct with geomean speedup vs eager > p (KernelBench), p in "
        f"{', '.join(f'{p:g}' for p in score.config.fast_p)}.",
        f"Seeds: '{score.config.seed_agg}' (mean: expected single attempt; best: best seed per metric).",
        "Intervals: percentile bootstrap over tasks; comparisons resample the same tasks in both arms.",
        "Definitions in full: docs/metrics.md.",
        f"Settings: {score.config.model_dump_json()}"]))


def _provenance(doc: Document, sources: list[str], viewer: str | None) -> None:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    doc.add(Para(f"d2kgrade {__version__}, {now}. Runs: {', '.join(sources)}."))
    if viewer is not None:
        doc.add(Table(["viewer"], [[viewer_link(viewer, "every episode, with transcripts, kernels and grades")]]))


def build_document(score: ScoreResult, agreement: AgreementResult | None = None,
                   ratings: pd.DataFrame | None = None, *, title: str = "d2kgrade report",
                   episodes: pd.DataFrame | None = None, runs: list[Run] | None = None,
                   viewer: str | None = None, reference_ablations: tuple[str, list[Any]] | None = None
                   ) -> Document:
    """The report's blocks. ``episodes`` (:func:`d2kgrade.view.data.episode_table`) adds the statuses and the
    Performance Score distribution; ``runs`` the ablations; ``viewer`` (a URL prefix ending in ``/``) links rows
    into a ``d2kgrade view`` site; ``reference_ablations`` (its source, its :class:`AblationRecord` list) the expert
    references' ablation."""
    from d2kgrade.report.sections import ablation_section, reference_ablation_section, runs_section

    doc = Document(title)
    _provenance(doc, score.runs, viewer)
    if episodes is not None:
        runs_section(doc, episodes, viewer)
    score_section(doc, score, episodes, viewer)
    if runs is not None:
        ablation_section(doc, runs)
    if reference_ablations is not None:
        reference_ablation_section(doc, reference_ablations[1], reference_ablations[0])
    if agreement is not None:
        agreement_section(doc, agreement, ratings)
    method_section(doc, score)
    return doc


def missing_report(runs: list[Run], episodes: pd.DataFrame, reason: str, *,
                   title: str = "d2kgrade report") -> Document:
    """The report of runs that cannot be scored (empty, every episode failed): what they hold, what is missing."""
    from d2kgrade.report.sections import missing_document

    doc = Document(title)
    _provenance(doc, [str(r.root) for r in runs], None)
    missing_document(doc, runs, episodes, reason)
    return doc


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_document(out: Path, doc: Document) -> tuple[Path, Path]:
    """Write ``out`` (HTML), its Markdown twin ``out`` with ``.md`` (figures in ``<stem>_files/``) and each
    table marked for LaTeX as ``<stem>_<name>.tex``."""
    md_path = out.with_suffix(".md")
    fig_dir = out.parent / f"{out.stem}_files"
    atomic_write_text(out, to_html(doc))
    atomic_write_text(md_path, to_markdown(doc, fig_dir, fig_dir.name))
    written = [out, md_path]
    for b in doc.blocks:
        if isinstance(b, Table) and b.latex:
            tex = out.parent / f"{out.stem}_{b.latex}.tex"
            atomic_write_text(tex, to_latex(b))
            written.append(tex)
    mode = 0o666 & ~_umask()  # atomic writes create 0600 temp files; a report is for sharing
    for p in written:
        os.chmod(p, mode)
    log.info("wrote %s", ", ".join(map(str, written)))
    return out, md_path


def write_report(out: Path, score: ScoreResult, agreement: AgreementResult | None = None,
                 ratings: pd.DataFrame | None = None, *, episodes: pd.DataFrame | None = None,
                 runs: list[Run] | None = None, viewer: str | None = None,
                 reference_ablations: tuple[str, list[Any]] | None = None) -> tuple[Path, Path]:
    """Build the report (:func:`build_document`) and write it (:func:`write_document`)."""
    return write_document(out, build_document(score, agreement, ratings, episodes=episodes, runs=runs,
                                              viewer=viewer, reference_ablations=reference_ablations))
