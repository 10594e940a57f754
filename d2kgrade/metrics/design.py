"""What agents proposed and implemented: implementation scores and per-level rates from a run's grades.

Per episode, from one rater's grades: the 0-100 implementation score of the final kernel (and its per-level
percentage), and per level the share of the level's properties that the design note *proposed*, that the
kernel *implemented*, that the kernel implemented without the note proposing them, and that the note proposed
but the kernel never implemented. A verdict of ``unknown`` counts as not present (the score rule does the same).
The last two shares are over properties graded in both the note and the kernel.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from d2kgrade.metrics.perf import ScoreConfig
from d2kgrade.schema import LEVELS

log = logging.getLogger(__name__)

DESIGN_RATES = ("proposed", "implemented", "impl_without_proposed", "proposed_not_implemented")


def choose_proposal_rater(verdicts: pd.DataFrame, cfg: ScoreConfig) -> str | None:
    """The rater whose design-note grades are used (see :attr:`ScoreConfig.proposal_rater`)."""
    raters = set(verdicts.loc[verdicts["kind"] == "proposal", "rater"])
    if cfg.proposal_rater is not None:
        return cfg.proposal_rater
    if cfg.rater in raters:
        return cfg.rater
    if "llm" in raters:
        return "llm"
    return None


def episode_design(grades: pd.DataFrame, verdicts: pd.DataFrame, cfg: ScoreConfig,
                   proposal_rater: str | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-episode design columns, and per-(episode, property) proposed/implemented flags.

    Returns:
        ``(per_episode, per_property)``: per_episode is indexed by episode key with ``impl_score``,
        ``impl_L1..3`` and ``<rate>_<level>`` for every rate in :data:`DESIGN_RATES`; per_property has
        ``key, property_id, level, proposed, implemented`` (NaN where that side was not graded).
    """
    code = grades[(grades["kind"] == "code") & (grades["rater"] == cfg.rater)].set_index("key")
    per_ep = pd.DataFrame({"impl_score": code["score"].astype(float),
                           **{f"impl_{lv}": code[lv].astype(float) for lv in LEVELS}})
    cv = verdicts[(verdicts["kind"] == "code") & (verdicts["rater"] == cfg.rater)]
    pv = verdicts[(verdicts["kind"] == "proposal") & (verdicts["rater"] == proposal_rater)]
    cv = cv.assign(implemented=(cv["verdict"] == "present").astype(float))[["key", "property_id", "level",
                                                                              "implemented"]]
    pv = pv.assign(proposed=(pv["verdict"] == "present").astype(float))[["key", "property_id", "level", "proposed"]]
    props = cv.merge(pv, on=["key", "property_id"], how="outer", suffixes=("", "_p"))
    props["level"] = props["level"].fillna(props["level_p"])
    props = props.drop(columns=["level_p"])
    both = props["implemented"].notna() & props["proposed"].notna()
    props["impl_without_proposed"] = np.where(both, (props["implemented"] == 1) & (props["proposed"] == 0), np.nan)
    props["proposed_not_implemented"] = np.where(both, (props["proposed"] == 1) & (props["implemented"] == 0),
                                                 np.nan)
    if not props.empty:
        rates = props.groupby(["key", "level"])[list(DESIGN_RATES)].mean().unstack("level")
        rates.columns = [f"{rate}_{lv}" for rate, lv in rates.columns]
        per_ep = per_ep.join(rates, how="outer")
    for rate in DESIGN_RATES:
        for lv in LEVELS:
            if f"{rate}_{lv}" not in per_ep.columns:
                per_ep[f"{rate}_{lv}"] = np.nan
    return per_ep, props[["key", "property_id", "level", "proposed", "implemented"]]
