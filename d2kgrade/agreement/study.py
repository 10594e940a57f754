"""``d2kgrade agree``: inter-rater agreement on property verdicts and implementation scores, against a gold set,
and a sampled judge against itself; every coefficient with a cluster-bootstrap interval and its scale named.

Units of binary agreement are (item, property) pairs: per property, per level (pooled over that level's
properties), and over all properties. Bootstrap intervals resample tasks when a scope spans at least
``min_task_clusters`` tasks (an item's properties, and a task's items, move together), else items (a single
property lives in one task). The draw is seeded and shared by every coefficient of a scope.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from d2kgrade.agreement import interval, nominal
from d2kgrade.agreement.ratings import PROPOSAL_SUFFIX, SCORE
from d2kgrade.agreement.results import (SCALES, AgreementConfig, AgreementResult, BinaryAgreement, Consistency,
                                        GoldStat, PairAgreement, ScoreAgreement, ScorePair, Stat, interpret)
from d2kgrade.errors import UserError
from d2kgrade.metrics import bootstrap

log = logging.getLogger(__name__)


def _f(x: object) -> float | None:
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


class _Boot:
    """Cluster sums and one shared bootstrap draw for a scope."""

    def __init__(self, tasks: np.ndarray, items: np.ndarray, cfg: AgreementConfig) -> None:
        by_task = len(set(tasks.tolist())) >= cfg.min_task_clusters
        labels = tasks if by_task else items
        self.ids, uniq = pd.factorize(pd.Series(labels, dtype=object))
        self.n = len(uniq)
        self.method = ("bootstrap over tasks" if by_task else "bootstrap over items") if cfg.resamples else ""
        self.w = bootstrap.weights(bootstrap.draw(self.n, cfg.resamples, cfg.seed), self.n)
        self.cfg = cfg

    def sums(self, per_unit: np.ndarray) -> np.ndarray:
        """(F, units) -> (F, clusters)."""
        return np.stack([np.bincount(self.ids, weights=row, minlength=self.n) for row in per_unit])

    def stat(self, csum: np.ndarray, fn: Callable[[np.ndarray], np.ndarray], scale: str) -> Stat:
        point = _f(fn(csum.sum(axis=-1)))
        if self.cfg.resamples == 0 or point is None:
            return Stat(value=point, label=interpret(point, scale))
        lo, hi = bootstrap.percentile_ci(np.asarray(fn(bootstrap.resum(csum, self.w)), dtype=float), self.cfg.ci)
        return Stat(value=point, ci_low=_f(lo), ci_high=_f(hi), ci_method=self.method, label=interpret(point, scale))


# ------------------------------------------------------------------------------------------- binary


def binary_scope(df: pd.DataFrame, scope: str, scope_id: str, cfg: AgreementConfig) -> BinaryAgreement | None:
    """Agreement on the binary ratings in ``df`` (rows of the long table), units = (item, property)."""
    piv = df.set_index(["item_id", "property_id", "rater_id"])["value"].unstack("rater_id")
    raters = [r for r in piv.columns if piv[r].notna().any()]
    if len(raters) < 2:
        return None
    x = piv[raters].to_numpy(dtype=float)
    meta = df.groupby(["item_id", "property_id"])["task"].first().reindex(piv.index)
    boot = _Boot(meta.to_numpy(dtype=object), piv.index.get_level_values("item_id").to_numpy(dtype=object), cfg)
    ones, zeros = nominal.counts_from_matrix(x)
    k = len(raters)
    ms = boot.sums(nominal.multi_unit_sums(ones, zeros, k))
    point = {key: _f(v) for key, v in nominal.multi_stats(ms.sum(axis=-1), k).items()}
    pairs = []
    for a, b in itertools.combinations(range(k), 2):
        ps = boot.sums(nominal.pair_unit_counts(x[:, a], x[:, b]))
        p = nominal.pair_stats(ps.sum(axis=-1))
        if not p["n"]:
            continue
        pairs.append(PairAgreement(
            rater_a=raters[a], rater_b=raters[b], n=int(p["n"]), percent_agreement=_f(p["agreement"]),
            prevalence_a=_f(p["prevalence_a"]), prevalence_b=_f(p["prevalence_b"]),
            kappa=boot.stat(ps, lambda s: nominal.pair_stats(s)["kappa"], "kappa"),
            ac1=boot.stat(ps, lambda s: nominal.pair_stats(s)["ac1"], "kappa")))
    return BinaryAgreement(
        scope=scope, scope_id=scope_id, n_units=int(point["n_pairable"] or 0), raters=raters,  # type: ignore[arg-type]
        percent_agreement=point["agreement"], prevalence=point["prevalence"], pairs=pairs,
        krippendorff_alpha=boot.stat(ms, lambda s: nominal.multi_stats(s, k)["alpha"], "alpha"),
        fleiss_kappa=boot.stat(ms, lambda s: nominal.multi_stats(s, k)["fleiss"], "kappa") if k >= 3 else None,
        gwet_ac1=boot.stat(ms, lambda s: nominal.multi_stats(s, k)["ac1"], "kappa"))


def binary_agreement(df: pd.DataFrame, cfg: AgreementConfig) -> list[BinaryAgreement]:
    """Per property, per level, all."""
    props = df[df["property_id"] != SCORE]
    out: list[BinaryAgreement | None] = []
    for pid, g in props.groupby("property_id", sort=True):
        out.append(binary_scope(g, "property", str(pid), cfg))
    for lv, g in props.groupby("level", sort=True):
        if lv:
            out.append(binary_scope(g, "level", str(lv), cfg))
    if not props.empty:
        out.append(binary_scope(props, "all", "all", cfg))
    return [b for b in out if b is not None]


# ------------------------------------------------------------------------------------------- scores


def _icc_stats(x: np.ndarray, cfg: AgreementConfig, boot: _Boot | None) -> tuple[Stat, Stat, Stat, Stat, dict]:
    r = interval.icc(x, cfg.ci)
    f_method = "F (McGraw & Wong 1996)"
    icc2 = Stat(value=_f(r["icc2"]), ci_low=_f(r["icc2_low"]), ci_high=_f(r["icc2_high"]), ci_method=f_method,
                label=interpret(_f(r["icc2"]), "icc"))
    icc3 = Stat(value=_f(r["icc3"]), ci_low=_f(r["icc3_low"]), ci_high=_f(r["icc3_high"]), ci_method=f_method,
                label=interpret(_f(r["icc3"]), "icc"))
    k = x.shape[1]
    if boot is None:
        b2, b3 = Stat(value=icc2.value, label=icc2.label), Stat(value=icc3.value, label=icc3.label)
    else:
        cs = boot.sums(interval.icc_unit_sums(x))
        b2 = boot.stat(cs, lambda s: interval.icc_from_sums(s, k)["icc2"], "icc")
        b3 = boot.stat(cs, lambda s: interval.icc_from_sums(s, k)["icc3"], "icc")
    anova = {key: _f(r[key]) for key in ("ms_rows", "ms_cols", "ms_err", "f", "df1", "df2")}
    return icc2, icc3, b2, b3, anova


def score_agreement(df: pd.DataFrame, cfg: AgreementConfig, warnings: list[str]) -> ScoreAgreement | None:
    """ICCs, Krippendorff's alpha (interval), rank correlations and Bland-Altman on ``score`` rows."""
    sc = df[df["property_id"] == SCORE]
    if sc.empty:
        return None
    piv = sc.set_index(["item_id", "rater_id"])["value"].unstack("rater_id")
    raters = [r for r in piv.columns if piv[r].notna().any()]
    if len(raters) < 2:
        return None
    piv = piv[raters]
    tasks = df.groupby("item_id")["task"].agg(lambda s: next((t for t in s if t), "")).reindex(piv.index)
    x = piv.to_numpy(dtype=float)
    items = piv.index.to_numpy(dtype=object)
    complete = np.isfinite(x).all(axis=1)
    anyp = np.isfinite(x).sum(axis=1) >= 2
    nan = Stat(value=None)
    if complete.sum() >= 2:
        bc = _Boot(tasks.to_numpy(dtype=object)[complete], items[complete], cfg)
        icc2, icc3, b2, b3, anova = _icc_stats(x[complete], cfg, bc if cfg.resamples else None)
    else:
        warnings.append(f"only {int(complete.sum())} item(s) scored by all {len(raters)} raters: no ICC over all "
                        "raters (see the pairs)")
        icc2 = icc3 = b2 = b3 = nan
        anova = {}
    ba = _Boot(tasks.to_numpy(dtype=object)[anyp], items[anyp], cfg)
    alpha = ba.stat(ba.sums(interval.interval_unit_sums(x[anyp])), interval.interval_alpha_from_sums, "alpha")
    pairs = []
    for a, b in itertools.combinations(range(len(raters)), 2):
        both = np.isfinite(x[:, a]) & np.isfinite(x[:, b])
        if both.sum() < 2:
            continue
        xp = x[both][:, [a, b]]
        p2, p3, _, _, _ = _icc_stats(xp, cfg, None)
        ps = interval.pair_scores(xp[:, 0], xp[:, 1])
        pairs.append(ScorePair(rater_a=raters[a], rater_b=raters[b], n=int(both.sum()), icc2=p2, icc3=p3,
                               spearman=_f(ps["spearman"]), spearman_p=_f(ps["spearman_p"]),
                               kendall=_f(ps["kendall"]), kendall_p=_f(ps["kendall_p"]),
                               mean_diff=_f(ps["mean_diff"]), sd_diff=_f(ps["sd_diff"]), loa_low=_f(ps["loa_low"]),
                               loa_high=_f(ps["loa_high"])))
    return ScoreAgreement(raters=raters, n_items=int(complete.sum()), n_items_any=int(anyp.sum()), icc2=icc2,
                          icc3=icc3, icc2_boot=b2, icc3_boot=b3, anova=anova, krippendorff_alpha=alpha, pairs=pairs)


# ------------------------------------------------------------------------------------------- gold


def gold_verdicts(gold: pd.DataFrame, warnings: list[str]) -> pd.DataFrame:
    """One gold verdict per (item, property): the majority of the gold raters; ties are left out."""
    g = gold[(gold["property_id"] != SCORE) & gold["value"].notna()]
    m = g.groupby(["item_id", "property_id"])["value"].mean()
    ties = int((m == 0.5).sum())
    if ties:
        warnings.append(f"{ties} gold unit(s) are split evenly between gold raters and left out")
    return (m[m != 0.5] > 0.5).astype(float).rename("gold").reset_index()


def _prf(s: np.ndarray) -> dict[str, np.ndarray]:
    tp, fp, fn = s[0], s[1], s[2]
    p = nominal._div(tp, tp + fp)
    r = nominal._div(tp, tp + fn)
    return {"precision": p, "recall": r, "f1": nominal._div(2 * tp, 2 * tp + fp + fn)}


def gold_agreement(df: pd.DataFrame, gold: pd.DataFrame, cfg: AgreementConfig,
                   warnings: list[str]) -> list[GoldStat]:
    """Precision, recall and F1 of every rater against the gold verdicts, per property, level and all."""
    gv = gold_verdicts(gold, warnings)
    props = df[(df["property_id"] != SCORE) & df["value"].notna()]
    j = props.merge(gv, on=["item_id", "property_id"])
    if j.empty:
        warnings.append("the gold set shares no (item, property) with the ratings: check item ids (annotate "
                        "import --key maps blind ids back to episode ids)")
        return []
    out = []
    for rater, g in j.groupby("rater_id", sort=True):
        scopes = [("property", pid, gg) for pid, gg in g.groupby("property_id", sort=True)]
        scopes += [("level", lv, gg) for lv, gg in g.groupby("level", sort=True) if lv]
        scopes.append(("all", "all", g))
        for scope, sid, gg in scopes:
            v, t = gg["value"].to_numpy(), gg["gold"].to_numpy()
            unit = np.stack([(v == 1) & (t == 1), (v == 1) & (t == 0), (v == 0) & (t == 1),
                             (v == 0) & (t == 0)]).astype(float)
            boot = _Boot(gg["task"].to_numpy(dtype=object), gg["item_id"].to_numpy(dtype=object), cfg)
            cs = boot.sums(unit)
            tp, fp, fn, tn = (int(c) for c in cs.sum(axis=-1))
            stats = {k: boot.stat(cs, lambda s, k=k: _prf(s)[k], "kappa") for k in ("precision", "recall", "f1")}
            for st in stats.values():
                st.label = ""  # no published bands for these
            out.append(GoldStat(rater_id=str(rater), scope=scope, scope_id=str(sid), n=len(gg), tp=tp, fp=fp, fn=fn,
                                tn=tn, **stats))
    return out


# ------------------------------------------------------------------------------------------- self-consistency


def self_consistency(df: pd.DataFrame, cfg: AgreementConfig) -> list[Consistency]:
    """How a sampled judge's votes split, per rater, per level and overall."""
    v = df[(df["property_id"] != SCORE) & (df["votes_present"].fillna(0) + df["votes_absent"].fillna(0) >= 2)]
    out = []
    for rater, g in v.groupby("rater_id", sort=True):
        scopes = [("level", lv, gg) for lv, gg in g.groupby("level", sort=True) if lv] + [("all", "all", g)]
        for scope, sid, gg in scopes:
            ones, zeros = gg["votes_present"].fillna(0).to_numpy(), gg["votes_absent"].fillna(0).to_numpy()
            m = ones + zeros
            k = int(pd.Series(m).mode().iloc[0])
            boot = _Boot(gg["task"].to_numpy(dtype=object), gg["item_id"].to_numpy(dtype=object), cfg)
            ms = boot.sums(nominal.multi_unit_sums(ones, zeros, k))
            out.append(Consistency(
                rater_id=str(rater), scope=scope, scope_id=str(sid), n_units=len(gg),
                unanimous=_f(np.mean((ones == 0) | (zeros == 0))),
                majority_share=_f(np.mean(np.maximum(ones, zeros) / m)),
                fleiss_kappa=boot.stat(ms, lambda s, k=k: nominal.multi_stats(s, k)["fleiss"], "kappa"),
                krippendorff_alpha=boot.stat(ms, lambda s, k=k: nominal.multi_stats(s, k)["alpha"], "alpha")))
    return out


# ------------------------------------------------------------------------------------------- the study


def agreement_study(df: pd.DataFrame, cfg: AgreementConfig, *, gold: pd.DataFrame | None = None,
                    inputs: list[str] | None = None) -> AgreementResult:
    """Every statistic of ``d2kgrade agree`` on a long ratings table (and optionally a gold table)."""
    warnings: list[str] = []
    if df.empty:
        raise UserError("no ratings to compare")
    raters = dict(df.groupby("rater_id")["rater_kind"].first())
    binary = binary_agreement(df, cfg)
    scores = score_agreement(df, cfg, warnings)
    if not binary and scores is None:
        warnings.append("fewer than two raters rated the same property: no agreement to compute")
    for b in binary:
        for p in b.pairs:
            if p.kappa.value is None and p.percent_agreement is not None and b.scope != "property":
                warnings.append(f"{b.scope} {b.scope_id}: kappa of {p.rater_a} vs {p.rater_b} is undefined (both "
                                "raters gave one verdict throughout); read AC1 and percent agreement")
    gold_stats = gold_agreement(df, gold, cfg, warnings) if gold is not None else []
    return AgreementResult(config=cfg, inputs=inputs or [], raters={str(k): str(v) for k, v in raters.items()},
                           scales=SCALES, binary=binary, scores=scores, gold=gold_stats,
                           consistency=self_consistency(df, cfg), warnings=warnings)


def select_kind(df: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Keep kernel items (``code``), design-note items (``proposal``, ids ending ``#proposal``) or ``all``."""
    if kind == "all":
        return df
    if kind not in ("code", "proposal"):
        raise UserError(f"--kind: expected code, proposal or all, got {kind!r}")
    is_prop = df["item_id"].str.endswith(PROPOSAL_SUFFIX)
    return df[is_prop if kind == "proposal" else ~is_prop]


def load_ratings(ratings: list[Path], *, kind: str = "code", rubrics_from: Path | None = None,
                 notes: list[str] | None = None) -> pd.DataFrame:
    """Read ratings, keep one kind of item, and derive people's scores from their property ratings where the
    suite at ``rubrics_from`` has the task's rubric."""
    from d2kgrade.agreement.ratings import add_derived_scores, read_ratings

    df = select_kind(read_ratings(ratings, notes), kind)
    if df.empty:
        raise UserError(f"no ratings of {kind} items in {', '.join(str(p) for p in ratings)} (see --kind)")
    rubrics = {}
    if rubrics_from is not None:
        from d2kgrade.suite import Suite

        suite = Suite(rubrics_from)
        for task in sorted(set(df["task"]) & set(suite.task_ids)):
            rubrics[task] = suite.load_rubric(task)
    return add_derived_scores(df, rubrics)


def run_agreement(ratings: list[Path], cfg: AgreementConfig, *, gold: Path | None = None,
                  rubrics_from: Path | None = None, kind: str = "code",
                  table: list[pd.DataFrame] | None = None) -> AgreementResult:
    """Read ratings (and gold) with :func:`load_ratings` and run the study; the ratings table is appended to
    ``table`` when given (the report draws from it)."""
    from d2kgrade.agreement.ratings import read_ratings

    notes: list[str] = []
    df = load_ratings(ratings, kind=kind, rubrics_from=rubrics_from, notes=notes)
    if table is not None:
        table.append(df)
    gold_df = select_kind(read_ratings([gold]), kind) if gold is not None else None
    inputs = [str(p) for p in ratings] + ([f"gold: {gold}"] if gold is not None else [])
    result = agreement_study(df, cfg, gold=gold_df, inputs=inputs)
    result.warnings[:0] = notes
    return result
