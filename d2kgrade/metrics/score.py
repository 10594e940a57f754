"""``d2kgrade score``: per model and arm, the paper's metrics, and guided minus unguided with paired bootstrap CIs.

Pipeline: episodes -> per-episode speed, Performance Score and design rates (:mod:`.perf`, :mod:`.design`) ->
one row per (model, arm, task) with seeds aggregated (``mean``: the expected single attempt; ``best``: the best
seed, metric by metric) -> means over tasks. Pooled rows (model ``all``) average over model-task pairs.

Intervals resample tasks with replacement (all of a task's model pairs move together), so they reflect that a
different draw of tasks could have given different numbers. In a comparison both arms use the same draw; speed
metrics (geomean speedups, roofline fraction) only count tasks correct in both arms, every other metric counts
the tasks graded in both.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from d2kgrade.metrics import bootstrap
from d2kgrade.metrics.design import DESIGN_RATES, choose_proposal_rater, episode_design
from d2kgrade.metrics.perf import ScoreConfig, episode_performance, reference_speeds
from d2kgrade.metrics.results import (ArmSummary, Comparison, Delta, Estimate, Metric, NothingToScore, PropertyRow,
                                      ScoreResult, StatusCount, TaskRow, metric_registry)
from d2kgrade.metrics.tables import Combined, RunTables, combine
from d2kgrade.runstore import UNSCORED_STATUSES
from d2kgrade.schema import LEVELS

log = logging.getLogger(__name__)

BASELINE_ARM = "unguided"
GEOMETRIC = ("speedup_eager", "speedup_compiled", "ref_ratio")
POOLED = "all"


def condition(arm: str, guidance: str) -> str:
    """Arm label: ``guided`` means all guidance; a partial level set is ``guided-L1`` or ``guided-L1-L2``."""
    if arm != "guided" or guidance == "all":
        return arm
    return f"guided-{guidance}"


def _none(x: float) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def _geo(s: pd.Series) -> float:
    s = s.astype(float)
    s = s[np.isfinite(s) & (s > 0)]
    return float(np.exp(np.log(s).mean())) if len(s) else math.nan


def task_table(ep: pd.DataFrame, cfg: ScoreConfig) -> pd.DataFrame:
    """Aggregate seeds: one row per (model, arm, task). NaN values (a wrong seed's speed, an ungraded seed's
    score) are skipped; speeds of several correct seeds average geometrically under ``mean``."""
    keys = ["model", "arm", "task"]
    value_cols = [c for c in ep.columns if c not in ("key", "model", "arm", "task", "seed")]
    frame = ep[keys + value_cols].copy()
    frame["correct"] = frame["correct"].astype(float)
    for col in value_cols:
        frame[col] = frame[col].astype(float)
    if cfg.seed_agg == "best":
        out = frame.groupby(keys).max()
    else:
        for col in GEOMETRIC:
            v = frame[col]
            frame[col] = np.log(v.where(np.isfinite(v) & (v > 0)))
        out = frame.groupby(keys).mean()
        for col in GEOMETRIC:
            out[col] = np.exp(out[col])
    out["n_seeds"] = frame.groupby(keys).size()
    return out.reset_index()


def _sums(tt: pd.DataFrame, metric: Metric, tasks: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per-task sum and count of a metric's column (logs for geometric means)."""
    v = tt[metric.column].astype(float).to_numpy()
    ok = np.isfinite(v) & ((v > 0) if metric.kind == "geomean" else True)
    vals = np.where(ok, np.log(np.where(ok, v, 1.0)) if metric.kind == "geomean" else v, 0.0)
    pos = pd.Index(tasks).get_indexer(tt["task"])
    num, den = np.zeros(len(tasks)), np.zeros(len(tasks))
    np.add.at(num, pos, vals)
    np.add.at(den, pos, ok.astype(float))
    return num, den


def _finish(metric: Metric, x: np.ndarray) -> np.ndarray:
    return np.exp(x) if metric.kind == "geomean" else x


def summarize_arm(tt: pd.DataFrame, model: str, arm: str, n_episodes: int, metrics: list[Metric],
                  cfg: ScoreConfig) -> ArmSummary:
    """Metrics of one (model or pooled) arm, each with a bootstrap interval over tasks."""
    tasks = sorted(tt["task"].unique())
    idx = bootstrap.weights(bootstrap.draw(len(tasks), cfg.resamples, cfg.seed), len(tasks))
    out = {}
    for m in metrics:
        num, den = _sums(tt, m, tasks)
        point = _finish(m, bootstrap.safe_div(np.array(num.sum()), np.array(den.sum())))
        boot = _finish(m, bootstrap.safe_div(bootstrap.resum(num, idx), bootstrap.resum(den, idx)))
        lo, hi = bootstrap.percentile_ci(boot, cfg.ci)
        out[m.name] = Estimate(value=_none(point), ci_low=_none(lo), ci_high=_none(hi), n=int(den.sum()))
    return ArmSummary(model=model, arm=arm, n_tasks=len(tasks), n_episodes=n_episodes, metrics=out)


def compare(tt: pd.DataFrame, model: str, treatment: str, metrics: list[Metric], cfg: ScoreConfig) -> Comparison:
    """Treatment arm minus the unguided arm over the model-task pairs run in both, with paired intervals."""
    base = tt[tt["arm"] == BASELINE_ARM].set_index(["model", "task"])
    trt = tt[tt["arm"] == treatment].set_index(["model", "task"])
    common = base.index.intersection(trt.index)
    base, trt = base.loc[common].reset_index(), trt.loc[common].reset_index()
    tasks = sorted(base["task"].unique())
    idx = bootstrap.weights(bootstrap.draw(len(tasks), cfg.resamples, cfg.seed), len(tasks))
    both_correct = (np.isfinite(base["speedup_eager"].astype(float)) & np.isfinite(trt["speedup_eager"].astype(float))
                    ).to_numpy()
    out = {}
    for m in metrics:
        b = base[m.column].astype(float).to_numpy()
        t = trt[m.column].astype(float).to_numpy()
        mask = np.isfinite(b) & np.isfinite(t)
        if m.paired_on_correct:
            mask &= both_correct
        nb, db = _sums(base.assign(**{m.column: np.where(mask, b, np.nan)}), m, tasks)
        nt, dt = _sums(trt.assign(**{m.column: np.where(mask, t, np.nan)}), m, tasks)
        pb = _finish(m, bootstrap.safe_div(np.array(nb.sum()), np.array(db.sum())))
        pt = _finish(m, bootstrap.safe_div(np.array(nt.sum()), np.array(dt.sum())))
        boot = (_finish(m, bootstrap.safe_div(bootstrap.resum(nt, idx), bootstrap.resum(dt, idx)))
                - _finish(m, bootstrap.safe_div(bootstrap.resum(nb, idx), bootstrap.resum(db, idx))))
        lo, hi = bootstrap.percentile_ci(boot, cfg.ci)
        out[m.name] = Delta(baseline=_none(pb), treatment=_none(pt), delta=_none(pt - pb), ci_low=_none(lo),
                            ci_high=_none(hi), n=int(mask.sum()))
    return Comparison(model=model, baseline=BASELINE_ARM, treatment=treatment, n_pairs=len(common), metrics=out)


def _warn_duplicates(ep: pd.DataFrame, warnings: list[str]) -> None:
    dup = ep.duplicated(subset=["model", "arm", "task", "seed"], keep=False)
    if dup.any():
        r = ep[dup].iloc[0]
        warnings.append(f"{int(dup.sum())} episodes share (model, arm, task, seed) with another (e.g. {r['model']}, "
                        f"{r['arm']}, {r['task']}, seed {r['seed']}): were the same runs given twice? They are "
                        "averaged as extra seeds")


def score_tables(combined: Combined, cfg: ScoreConfig, *, reference_runs: set[int] | None = None) -> ScoreResult:
    """Score joined runs. Episodes of runs in ``reference_runs`` only supply the expert reference's speed.

    Episodes with a status in :data:`~d2kgrade.runstore.UNSCORED_STATUSES` are left out and counted.

    Raises:
        NothingToScore: no agent episode left to score (its ``result`` holds the status counts).
    """
    warnings = list(combined.warnings)
    E, W = combined.episodes, combined.workloads
    refs = reference_speeds(E, W)
    agent_ep = E[(E["agent"] != "reference") & ~E["run"].isin(reference_runs or set())].copy()
    agent_ep["arm"] = [condition(a, g) for a, g in zip(agent_ep["arm"], agent_ep["guidance"])]
    statuses = status_counts(agent_ep)
    unscored = agent_ep["status"].isin(UNSCORED_STATUSES)
    if unscored.any():
        n = agent_ep.loc[unscored, "status"].value_counts()
        what = {"api_failed": "failed on the API", "failed": "failed inside d2kgrade"}
        warnings.append(", ".join(f"{int(v)} episode(s) {what.get(k, k)} (status {k})" for k, v in n.items())
                        + ": left out of every metric (not counted as wrong kernels); rerun the same `d2kgrade run` "
                        "command to retry them")
        agent_ep = agent_ep[~unscored].copy()
    if agent_ep.empty:
        raise _nothing_to_score(combined, cfg, refs, statuses, warnings)
    _warn_duplicates(agent_ep, warnings)
    perf = episode_performance(agent_ep, W, refs, cfg)
    prater = choose_proposal_rater(combined.verdicts, cfg)
    design, props = episode_design(combined.grades, combined.verdicts, cfg, prater)
    ep = (agent_ep[["key", "model", "arm", "task", "seed"]].merge(perf, on="key")
          .merge(design, left_on="key", right_index=True, how="left"))
    for col in ["impl_score", *(f"impl_{lv}" for lv in LEVELS),
                *(f"{r}_{lv}" for r in DESIGN_RATES for lv in LEVELS)]:
        if col not in ep.columns:
            ep[col] = np.nan
    # the propose arm writes a design and no kernel: its performance is undefined, not zero
    perf_cols = [c for c in perf.columns if c not in ("key", "n_timed", "has_reference")]
    ep["correct"] = ep["correct"].astype(float)
    ep.loc[ep["arm"] == "propose", perf_cols] = np.nan

    # what a reader must know
    untimed = int(((ep["correct"] == 1) & (ep["n_timed"] == 0)).sum())
    if untimed:
        warnings.append(f"{untimed} correct episode(s) have no timed workload (CPU run?): their Performance "
                        "Score, speedups and fast_p (p > 0) are undefined and left out")
    no_ref = sorted(set(ep["task"]) - set(refs["task"]))
    if no_ref:
        warnings.append(f"no correct expert reference run for {len(no_ref)} task(s) ({', '.join(no_ref[:5])}"
                        f"{', ...' if len(no_ref) > 5 else ''}): Performance Score 3 cannot be reached there; "
                        "pass --reference RUN_DIR")
    n_graded = int(ep["impl_score"].notna().sum())
    if n_graded == 0:
        have = sorted(set(combined.grades.loc[combined.grades["kind"] == "code", "rater"]))
        warnings.append(f"no code grades by rater {cfg.rater!r}" + (f" (grades exist by: {', '.join(have)}; "
                        "choose one with --rater)" if have else " (no grades.jsonl)") +
                        ": implementation scores are undefined")
    elif n_graded < (n_code := int((ep["arm"] != "propose").sum())):
        warnings.append(f"only {n_graded} of {n_code} episodes have a {cfg.rater} code grade; implementation "
                        "scores average the graded ones")
    if prater is not None and prater != (cfg.proposal_rater or cfg.rater):
        warnings.append(f"no proposal grades by {cfg.rater!r}; proposed rates use the {prater!r} rater")

    tt = task_table(ep.drop(columns=["has_reference", "n_timed"]), cfg)
    metrics = metric_registry(cfg)
    models = sorted(tt["model"].unique())
    groups = [(m, tt[tt["model"] == m]) for m in models] + ([(POOLED, tt)] if len(models) > 1 else [])
    arms, comparisons = [], []
    for model, g in groups:
        for arm in sorted(g["arm"].unique(), key=arm_order):
            n_eps = int(((ep["arm"] == arm) & ((ep["model"] == model) | (model == POOLED))).sum())
            arms.append(summarize_arm(g[g["arm"] == arm], model, arm, n_eps, metrics, cfg))
        if BASELINE_ARM in set(g["arm"]):
            for arm in sorted(set(g["arm"]) - {BASELINE_ARM, "propose"}, key=arm_order):
                comparisons.append(compare(g, model, arm, metrics, cfg))

    task_rows = [TaskRow(model=r["model"], arm=r["arm"], task=r["task"], n_seeds=int(r["n_seeds"]),
                         values={k: _none(v) for k, v in r.items() if k not in ("model", "arm", "task", "n_seeds")})
                 for r in tt.to_dict("records")]
    prop_rows = []
    if not props.empty:
        pj = props.merge(ep[["key", "model", "arm", "task"]], on="key")
        for (model, arm, task, pid, lv), g in pj.groupby(["model", "arm", "task", "property_id", "level"]):
            prop_rows.append(PropertyRow(model=model, arm=arm, task=task, property_id=pid, level=lv,
                                         proposed=_none(g["proposed"].mean()),
                                         implemented=_none(g["implemented"].mean()), n=len(g)))
    return ScoreResult(config=cfg, runs=combined.sources, proposal_rater=prater, arms=arms, comparisons=comparisons,
                       tasks=task_rows, properties=prop_rows, reference_speedup=_reference_speedup(refs),
                       warnings=warnings, episode_statuses=statuses)


def status_counts(agent_ep: pd.DataFrame) -> list[StatusCount]:
    """Episodes per (model, arm, status), the unscored statuses included."""
    if agent_ep.empty:
        return []
    counts = agent_ep.groupby(["model", "arm", "status"], sort=True).size()
    return [StatusCount(model=m, arm=a, status=st, n=int(n), scored=st not in UNSCORED_STATUSES)
            for (m, a, st), n in counts.items()]


def _reference_speedup(refs: pd.DataFrame) -> dict[str, float]:
    return {} if refs.empty else {task: _geo(g["ref_speedup"]) for task, g in refs.groupby("task")}


def _nothing_to_score(combined: Combined, cfg: ScoreConfig, refs: pd.DataFrame, statuses: list[StatusCount],
                      warnings: list[str]) -> NothingToScore:
    """The error saying in one sentence why nothing can be scored, carrying the armless result."""
    where = ", ".join(combined.sources)
    if statuses:
        told = "; ".join(f"{c.model} {c.arm}: {c.n} {c.status}" for c in statuses)
        why = f"nothing to score in {where}: no agent episode has an outcome to score ({told})"
    elif len(combined.episodes):
        why = f"nothing to score in {where}: it holds only expert reference episodes"
    else:
        why = f"nothing to score in {where}: no episode has ended yet (an empty or just-started run)"
    result = ScoreResult(config=cfg, runs=combined.sources, proposal_rater=None, arms=[], comparisons=[], tasks=[],
                         properties=[], reference_speedup=_reference_speedup(refs), warnings=warnings,
                         episode_statuses=statuses)
    return NothingToScore(why, result)


def arm_order(arm: str) -> tuple[int, str]:
    order = {"unguided": 0, "guided-L1": 1, "guided-L1-L2": 2, "guided": 3, "propose": 4}
    return order.get(arm, 9), arm


def score_runs(runs: list[RunTables], cfg: ScoreConfig, references: list[RunTables] | None = None) -> ScoreResult:
    """Score runs; ``references`` are runs whose reference episodes give the expert's speed (their agent
    episodes, if any, are not scored)."""
    references = references or []
    combined = combine(runs + references)
    return score_tables(combined, cfg, reference_runs=set(range(len(runs), len(runs) + len(references))))
