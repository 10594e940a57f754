"""``d2kgrade report``: the score (and agreement) results as a paper-style HTML report and its Markdown twin."""

from __future__ import annotations

import logging
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from d2kgrade import __version__
from d2kgrade.io import atomic_write_text
from d2kgrade.report import fmt, plots
from d2kgrade.report.render import Bullets, Document, Figure, Heading, Para, Table, to_html, to_markdown

if TYPE_CHECKING:
    import pandas as pd

    from d2kgrade.agreement.results import AgreementResult, Stat
    from d2kgrade.metrics.results import ScoreResult

log = logging.getLogger(__name__)

HEADLINE = ("correctness", "perf_score", "geomean_speedup_eager", "geomean_speedup_compiled", "fast_1",
            "impl_score")
ARM_TABLE = ("correctness", "perf_score", "geomean_speedup_eager", "geomean_speedup_compiled", "fast_0", "fast_1",
             "fast_1.5", "fast_2", "roofline_fraction", "impl_score", "impl_L1", "impl_L2", "impl_L3")
TASK_COLUMNS = (("correct", "correct", "pct"), ("perf_score", "perf", "num"), ("speedup_eager", "vs eager", "x"),
                ("speedup_compiled", "vs compile", "x"), ("impl_score", "impl", "score"))


def _stat(s: Stat | None) -> str:
    if s is None or s.value is None:
        return "–"
    ci = f" [{fmt.stat(s.ci_low, 2)}, {fmt.stat(s.ci_high, 2)}]" if s.ci_low is not None else ""
    return f"{fmt.stat(s.value)}{ci}" + (f" ({s.label})" if s.label else "")


def score_section(doc: Document, score: ScoreResult) -> None:
    """Headline, arms, figures, per-task and design tables."""
    from d2kgrade.metrics import metric_registry

    reg = {m.name: m for m in metric_registry(score.config)}
    pct = int(round(100 * score.config.ci))
    doc.add(Heading(2, "Headline: guided vs unguided"),
            Para(f"Each cell: unguided → guided, the difference, and its {pct}% paired bootstrap interval over tasks "
                 f"({score.config.resamples} resamples, seed {score.config.seed}). Speeds count only the tasks "
                 "correct in both arms; model 'all' pools model-task pairs."))
    rows = []
    for c in score.comparisons:
        cells = []
        for name in HEADLINE:
            d, m = c.metrics[name], reg[name]
            cells.append(f"{fmt.value(d.baseline, m.fmt)} → {fmt.value(d.treatment, m.fmt)} "
                         f"({fmt.delta(d.delta, m.fmt)} {fmt.interval(d.ci_low, d.ci_high, m.fmt, signed=True)})")
        rows.append([c.model, c.treatment, str(c.n_pairs), *cells])
    if rows:
        doc.add(Table(["model", "arm", "pairs", *(reg[n].label for n in HEADLINE)], rows))
    else:
        doc.add(Para("No model ran both an unguided and a guided arm: there is no paired comparison."))
    if score.warnings:
        doc.add(Heading(3, "Read these numbers with"), Bullets(list(score.warnings)))

    doc.add(Heading(2, "Per model and arm"),
            Para(f"Means over tasks (seeds aggregated by '{score.config.seed_agg}'), with {pct}% bootstrap intervals "
                 "over tasks; speeds over each arm's own correct tasks."))
    rows = []
    for a in score.arms:
        cells = []
        for name in ARM_TABLE:
            est, m = a.metrics.get(name), reg.get(name)
            if est is None or m is None:
                cells.append("–")
                continue
            ci = fmt.interval(est.ci_low, est.ci_high, m.fmt)
            cells.append(f"{fmt.value(est.value, m.fmt)} {ci}".strip())
        rows.append([a.model, a.arm, str(a.n_tasks), str(a.n_episodes), *cells])
    doc.add(Table(["model", "arm", "tasks", "episodes", *(reg[n].label for n in ARM_TABLE if n in reg)], rows))

    bars = plots.paired_bars(score, [("correctness", "Correct (%)", 100.0), ("perf_score", "Performance Score", 1.0),
                                     ("geomean_speedup_eager", "Geomean speedup vs eager", 1.0),
                                     ("impl_score", "Implementation score", 1.0)])
    if bars:
        doc.add(Figure("paired_bars", bars, f"Per model, each arm with its {pct}% bootstrap interval over tasks."))
    scatter = plots.speedup_scatter(score)
    if scatter:
        doc.add(Figure("speedup_scatter", scatter, "Guided vs unguided speedup over eager per (model, task), tasks "
                                                    "correct in both arms; above the diagonal, guidance helped."))
    else:
        doc.add(Para("No task was correct and timed in both arms: no speedup scatter."))

    doc.add(Heading(2, "Per task"))
    from d2kgrade.metrics.score import arm_order

    arms = sorted(dict.fromkeys(t.arm for t in score.tasks), key=arm_order)
    by = {(t.model, t.arm, t.task): t for t in score.tasks}
    keys = sorted({(t.model, t.task) for t in score.tasks})
    rows = []
    for model, task in keys:
        row = [model, task, fmt.value(score.reference_speedup.get(task), "x")]
        for arm in arms:
            t = by.get((model, arm, task))
            row += [fmt.value(t.values.get(col) if t else None, f) for col, _, f in TASK_COLUMNS]
        rows.append(row)
    doc.add(Table(["model", "task", "reference vs eager",
                   *(f"{arm}: {label}" for arm in arms for _, label, _ in TASK_COLUMNS)], rows,
                  caption="Correct: share of seeds; speeds: geomean over the task's timed workloads (hidden "
                          "excluded) and over correct seeds."))

    doc.add(Heading(2, "Design properties: proposed and implemented"),
            Para(f"Code graded by the '{score.config.rater}' rater, design notes by "
                 f"'{score.proposal_rater or 'none'}'. Shares of each level's properties, averaged over tasks."))
    rows = []
    for a in score.arms:
        for lv in ("L1", "L2", "L3"):
            vals = [a.metrics[f"{r}_{lv}"].value for r in ("proposed", "implemented", "impl_without_proposed",
                                                            "proposed_not_implemented")]
            if any(v is not None for v in vals):
                rows.append([a.model, a.arm, lv, *(fmt.value(v, "pct") for v in vals),
                             fmt.value(a.metrics[f"impl_{lv}"].value, "score")])
    if rows:
        doc.add(Table(["model", "arm", "level", "proposed", "implemented", "implemented, not proposed",
                       "proposed, never implemented", "implementation (% of level points)"], rows))
    disc = plots.discovery_vs_implementation(score)
    if disc:
        doc.add(Figure("discovery_vs_implementation", disc, "Discovery (proposed in the design note) vs "
                                                            "implementation (present in the kernel) per level."))
    heat = plots.property_heatmap(score)
    if heat:
        doc.add(Figure("property_heatmap", heat, "Share of episodes that proposed / implemented each property, "
                                                 "pooled over models."))
    else:
        doc.add(Para("No property grades: no heatmap."))


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


def build_document(score: ScoreResult, agreement: AgreementResult | None = None,
                   ratings: pd.DataFrame | None = None, *, title: str = "d2kgrade report") -> Document:
    """The report's blocks."""
    doc = Document(title)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    doc.add(Para(f"d2kgrade {__version__}, {now}. Runs: {', '.join(score.runs)}."))
    score_section(doc, score)
    if agreement is not None:
        agreement_section(doc, agreement, ratings)
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
    return doc


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_report(out: Path, score: ScoreResult, agreement: AgreementResult | None = None,
                 ratings: pd.DataFrame | None = None) -> tuple[Path, Path]:
    """Write ``out`` (HTML) and its Markdown twin ``out`` with ``.md`` (figures in ``<stem>_files/``)."""
    doc = build_document(score, agreement, ratings)
    md_path = out.with_suffix(".md")
    fig_dir = out.parent / f"{out.stem}_files"
    atomic_write_text(out, to_html(doc))
    atomic_write_text(md_path, to_markdown(doc, fig_dir, fig_dir.name))
    mode = 0o666 & ~_umask()  # atomic writes create 0600 temp files; a report is for sharing
    for p in (out, md_path):
        os.chmod(p, mode)
    log.info("wrote %s and %s", out, md_path)
    return out, md_path
