"""The report's figures, drawn with matplotlib (Agg) and returned as PNG bytes. Each returns None when the data
for it is missing (no guided arm, no grades...), and the report says so instead of drawing an empty frame."""

from __future__ import annotations

import io
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from d2kgrade.agreement.results import AgreementResult
    from d2kgrade.metrics.results import ScoreResult

ARM_COLORS = {"unguided": "#8c8c8c", "guided-L1": "#9ecae1", "guided-L1-L2": "#4292c6", "guided": "#08519c",
              "propose": "#e6550d"}
DPI = 110


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def _ok(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def paired_bars(score: ScoreResult, metrics: list[tuple[str, str, float]]) -> tuple[bytes | None, list[str]]:
    """One panel per metric that has a value: a bar per arm for every model, with the arm's bootstrap interval.

    ``metrics``: (metric name, title, scale) where scale multiplies the value (100 for shares). Returns the PNG
    (None when no metric has a value) and the titles of the metrics left out for want of data."""
    arms = [a for a in score.arms if a.arm != "propose"]
    have = [m for m in metrics if any(_ok(a.metrics[m[0]].value) for a in arms if m[0] in a.metrics)]
    left_out = [title for name, title, _ in metrics if (name, title) not in {(n, t) for n, t, _ in have}]
    if not arms or not have:
        return None, left_out
    plt = _plt()
    models = list(dict.fromkeys(a.model for a in arms))
    arm_names = list(dict.fromkeys(a.arm for a in arms))
    fig, axes = plt.subplots(1, len(have), figsize=(3.6 * len(have), 3.4), squeeze=False)
    width = 0.8 / len(arm_names)
    for ax, (name, title, scale) in zip(axes[0], have):
        for j, arm in enumerate(arm_names):
            xs, ys, lo, hi = [], [], [], []
            for i, model in enumerate(models):
                a = next((x for x in arms if x.model == model and x.arm == arm), None)
                est = a.metrics.get(name) if a else None
                if est is None or not _ok(est.value):
                    continue
                xs.append(i + (j - (len(arm_names) - 1) / 2) * width)
                ys.append(est.value * scale)
                lo.append((est.value - est.ci_low) * scale if _ok(est.ci_low) else 0.0)
                hi.append((est.ci_high - est.value) * scale if _ok(est.ci_high) else 0.0)
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=arm, color=ARM_COLORS.get(arm, "#31a354"))
        ax.set_xticks(range(len(models)), models, rotation=30, ha="right")
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(arm_names), fontsize=8, bbox_to_anchor=(0.5, 1.0),
               frameon=False)
    fig.tight_layout()
    return _png(fig), left_out


def level_comparison(score: ScoreResult, model: str) -> bytes | None:
    """The paper's central comparison: per level, the share of properties proposed and implemented, one bar
    per arm, with the bootstrap interval over tasks and n under each bar. None when no arm has a value."""
    arms = [a for a in score.arms if a.model == model]
    series = []
    for what in ("proposed", "implemented"):
        for a in arms:
            ests = [a.metrics.get(f"{what}_{lv}") for lv in ("L1", "L2", "L3")]
            if any(e is not None and _ok(e.value) for e in ests):
                series.append((what, a.arm, ests))
    if not series:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.6), sharey=True)
    for ax, what in zip(axes, ("proposed", "implemented")):
        mine = [s for s in series if s[0] == what]
        ax.set_title(f"{what} (% of the level's properties)", fontsize=10)
        ax.set_xticks(range(3), ["L1 algorithmic", "L2 dataflow", "L3 low-level"], fontsize=8)
        ax.set_ylim(0, 109)
        ax.grid(axis="y", alpha=0.3)
        if not mine:
            ax.text(1, 50, f"no {what} grades", ha="center", va="center", fontsize=9, color="#666")
            continue
        width = 0.8 / len(mine)
        for j, (_, arm, ests) in enumerate(mine):
            xs = [i + (j - (len(mine) - 1) / 2) * width for i in range(3)]
            ys = [100 * e.value if e is not None and _ok(e.value) else 0.0 for e in ests]
            lo = [100 * (e.value - e.ci_low) if e is not None and _ok(e.value) and _ok(e.ci_low) else 0.0
                  for e in ests]
            hi = [100 * (e.ci_high - e.value) if e is not None and _ok(e.value) and _ok(e.ci_high) else 0.0
                  for e in ests]
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=arm, color=ARM_COLORS.get(arm, "#31a354"))
            for x, e in zip(xs, ests):
                ax.text(x, 1.5, f"n={e.n if e is not None else 0}", ha="center", va="bottom", fontsize=6,
                        color="white" if e is not None and _ok(e.value) and e.value > 0.08 else "#444",
                        rotation=90)
        ax.legend(fontsize=7, loc="upper right")
    axes[0].set_ylabel("% of properties (mean over tasks)")
    fig.tight_layout()
    return _png(fig)


PERF_LEVELS = ((0, "0: not correct", "#d9d9d9"), (1, "1: correct, not faster than eager", "#9ecae1"),
               (2, "2: faster than eager", "#4292c6"), (3, "3: near the expert", "#08306b"))


def perf_distribution(counts: dict[str, dict[str, int]]) -> bytes | None:
    """Share of each arm's episodes at each Performance Score (``counts[arm][level or 'untimed']``), stacked,
    with n per arm. None when no arm has an episode."""
    arms = [a for a, c in counts.items() if sum(c.values())]
    if not arms:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.2, 0.55 * len(arms) + 1.6))
    for i, arm in enumerate(arms):
        c, n, left = counts[arm], sum(counts[arm].values()), 0.0
        for level, label, color in (*PERF_LEVELS, ("untimed", "correct, not timed (CPU)", "#fdd0a2")):
            share = 100 * c.get(str(level), 0) / n
            ax.barh(i, share, left=left, color=color, label=label if i == 0 else None, edgecolor="white")
            if share >= 6:
                ax.text(left + share / 2, i, f"{share:.0f}%", ha="center", va="center", fontsize=7,
                        color="white" if level in (2, 3) else "#222")
            left += share
        ax.text(101, i, f"n={n}", va="center", fontsize=8)
    ax.set_yticks(range(len(arms)), arms)
    ax.set_xlim(0, 112)
    ax.set_xlabel("% of the arm's episodes")
    ax.invert_yaxis()
    ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.35 if len(arms) < 3 else -0.2),
              frameon=False)
    fig.tight_layout()
    return _png(fig)


def speedup_scatter(score: ScoreResult) -> bytes | None:
    """Guided vs unguided geomean speedup over eager, one point per (model, task) correct in both arms."""
    by = {(t.model, t.arm, t.task): t.values.get("speedup_eager") for t in score.tasks}
    pts: dict[str, list[tuple[float, float]]] = {}
    names: dict[str, list[str]] = {}
    for (model, arm, task), u in by.items():
        g = by.get((model, "guided", task))
        if arm == "unguided" and _ok(u) and _ok(g):
            pts.setdefault(model, []).append((u, g))  # type: ignore[arg-type]
            names.setdefault(model, []).append(task)
    if not pts:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(4.6, 4.4))
    allv = [v for p in pts.values() for xy in p for v in xy]
    lo, hi = min(allv) / 1.3, max(allv) * 1.3
    ax.plot([lo, hi], [lo, hi], color="#999", lw=1, ls="--", label="no change")
    for model, p in sorted(pts.items()):
        ax.scatter([x for x, _ in p], [y for _, y in p], s=22, alpha=0.8, label=model)
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = [t for t in (1 / 16, 1 / 8, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128) if lo <= t <= hi]
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        axis.set_minor_locator(NullLocator())
    n_pts = sum(len(p) for p in pts.values())
    if n_pts <= 30:  # a paper figure names its points while they are few enough to read
        for model, p in pts.items():
            for (x, y), task in zip(p, names[model]):
                ax.annotate(task, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points", color="#444")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("unguided: geomean speedup vs eager")
    ax.set_ylabel("guided: geomean speedup vs eager")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return _png(fig)


def property_heatmap(score: ScoreResult) -> bytes | None:
    """Properties (rows) x arm and proposed/implemented (columns), pooled over models."""
    rows = [p for p in score.properties if p.arm != "propose" or p.proposed is not None]
    if not rows:
        return None
    import numpy as np

    plt = _plt()
    props = sorted({p.property_id for p in rows}, key=lambda s: (s.split(".")[0], s.split(".")[1], s))
    arms = list(dict.fromkeys(sorted((p.arm for p in rows), key=lambda a: list(ARM_COLORS).index(a)
                                     if a in ARM_COLORS else 9)))
    cols = [(arm, what) for arm in arms for what in ("proposed", "implemented")]
    m = np.full((len(props), len(cols)), np.nan)
    for i, pid in enumerate(props):
        for j, (arm, what) in enumerate(cols):
            vals = [getattr(p, what) for p in rows if p.property_id == pid and p.arm == arm]
            vals = [v for v in vals if v is not None]
            if vals:
                m[i, j] = float(np.mean(vals))
    fig, ax = plt.subplots(figsize=(1.1 * len(cols) + 3.5, 0.24 * len(props) + 1.6))
    im = ax.imshow(np.ma.masked_invalid(m), aspect="auto", cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(cols)), [f"{a}\n{w}" for a, w in cols], fontsize=8)
    ax.set_yticks(range(len(props)), props, fontsize=7)
    fig.colorbar(im, ax=ax, label="share of episodes", shrink=0.6)
    return _png(fig)


def kappa_vs_ac1(agreement: AgreementResult) -> bytes | None:
    """Cohen's kappa and Gwet's AC1 side by side for each rater pair, per level and pooled."""
    rows = [(f"{b.scope_id}\n{p.rater_a} vs {p.rater_b}", p) for b in agreement.binary if b.scope != "property"
            for p in b.pairs]
    if not rows:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(4.5, 1.3 * len(rows) + 1.5), 3.4))
    for j, (key, color) in enumerate((("kappa", "#3182bd"), ("ac1", "#e6550d"))):
        xs = [i + (j - 0.5) * 0.38 for i in range(len(rows))]
        vals = [getattr(p, key).value for _, p in rows]
        ax.bar(xs, [v if _ok(v) else 0 for v in vals], 0.38, color=color,
               label="Cohen's kappa" if key == "kappa" else "Gwet's AC1")
    ax.axhline(0, color="#444", lw=0.8)
    ax.set_xticks(range(len(rows)), [r for r, _ in rows], fontsize=7)
    ax.set_ylim(min(-0.2, ax.get_ylim()[0]), 1.0)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def bland_altman(a: list[float], b: list[float], name_a: str, name_b: str) -> bytes | None:
    """Difference against mean of two raters' scores, with the bias and the 95% limits of agreement."""
    import numpy as np

    x, y = np.asarray(a, float), np.asarray(b, float)
    if len(x) < 3:
        return None
    plt = _plt()
    mean, diff = (x + y) / 2, x - y
    md, sd = diff.mean(), diff.std(ddof=1)
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    ax.scatter(mean, diff, s=16, alpha=0.7)
    for v, style in ((md, "-"), (md - 1.96 * sd, "--"), (md + 1.96 * sd, "--")):
        ax.axhline(v, color="#c0392b", ls=style, lw=1)
    ax.set_xlabel(f"mean of {name_a} and {name_b} (0-100)")
    ax.set_ylabel(f"{name_a} - {name_b}")
    ax.grid(alpha=0.3)
    return _png(fig)
