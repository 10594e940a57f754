"""The agreement result format, and the interpretation scales it names."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

AGREEMENT_RESULT_VERSION = 1

LANDIS_KOCH = "Landis & Koch (1977), Biometrics 33(1):159-174"
"""For kappa-type coefficients (Cohen's and Fleiss' kappa, Gwet's AC1): < 0 poor, 0-.20 slight, .21-.40 fair,
.41-.60 moderate, .61-.80 substantial, .81-1 almost perfect."""
KRIPPENDORFF = "Krippendorff (2004), Content Analysis, 2nd ed., p. 241"
"""For Krippendorff's alpha: >= .800 reliable; .667-.800 tentative conclusions only; below .667 unreliable."""
KOO_LI = "Koo & Li (2016), J Chiropr Med 15(2):155-163"
"""For ICCs: < .5 poor, .5-.75 moderate, .75-.9 good, > .9 excellent."""

# (bound, label, strict): the first band with value < bound (strict) or value <= bound
_BANDS: dict[str, list[tuple[float, str, bool]]] = {
    "kappa": [(0.0, "poor", True), (0.20, "slight", False), (0.40, "fair", False), (0.60, "moderate", False),
              (0.80, "substantial", False)],
    "alpha": [(0.667, "unreliable", True), (0.800, "tentative", True)],
    "icc": [(0.5, "poor", True), (0.75, "moderate", True), (0.9, "good", False)],
}
_TOP = {"kappa": "almost perfect", "alpha": "reliable", "icc": "excellent"}
SCALES = {"kappa": f"Cohen's kappa, Fleiss' kappa, Gwet's AC1: {LANDIS_KOCH}: <0 poor, 0-.20 slight, .21-.40 fair, "
                   ".41-.60 moderate, .61-.80 substantial, .81-1 almost perfect",
          "alpha": f"Krippendorff's alpha: {KRIPPENDORFF}: >= .800 reliable, .667-.800 tentative, < .667 "
                   "unreliable",
          "icc": f"ICC: {KOO_LI}: < .5 poor, .5-.75 moderate, .75-.9 good, > .9 excellent"}


def interpret(value: float | None, scale: str) -> str:
    """The band of ``value`` on the named scale (``kappa``, ``alpha``, ``icc``), or '' when undefined."""
    if value is None or not math.isfinite(value):
        return ""
    for bound, label, strict in _BANDS[scale]:
        if value < bound or (not strict and value == bound):
            return label
    return _TOP[scale]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class AgreementConfig(BaseModel):
    """Settings of an agreement study; recorded in its result."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    resamples: int = Field(default=1000, ge=0)
    """Bootstrap resamples (0: no bootstrap intervals)."""
    seed: int = 0
    """Bootstrap seed."""
    ci: float = Field(default=0.95, gt=0, lt=1)
    """Confidence level."""
    min_task_clusters: int = Field(default=5, ge=2)
    """Resample tasks (clusters of items) when a scope spans at least this many tasks; below it (one property
    belongs to one task) resample items, since a bootstrap over two or three clusters is meaningless."""


class Stat(Record):
    """One coefficient with its interval and its band on the named scale."""

    value: float | None
    """Point estimate (None: undefined, e.g. kappa when both raters never vary)."""
    ci_low: float | None = None
    """Lower end of the interval."""
    ci_high: float | None = None
    """Upper end."""
    ci_method: str = ""
    """``bootstrap over tasks``, ``bootstrap over items``, ``F (McGraw & Wong 1996)``, or '' (none)."""
    label: str = ""
    """Band on the scale this coefficient is read on (see ``scales``)."""


class PairAgreement(Record):
    """Two raters on one scope of binary verdicts."""

    rater_a: str
    """First rater."""
    rater_b: str
    """Second rater."""
    n: int
    """Units both rated."""
    percent_agreement: float | None
    """Share of units with the same verdict."""
    prevalence_a: float | None
    """Share of 'present' among rater a's verdicts on those units."""
    prevalence_b: float | None
    """Same for rater b."""
    kappa: Stat
    """Cohen's kappa (Landis-Koch scale)."""
    ac1: Stat
    """Gwet's AC1 (read on the same scale; robust to skewed prevalence)."""


class BinaryAgreement(Record):
    """Agreement on one property, one level, or all properties pooled (units are item x property)."""

    scope: Literal["property", "level", "all"]
    """What is pooled."""
    scope_id: str
    """Property id, level (L1/L2/L3) or ``all``."""
    n_units: int
    """Units with at least two ratings."""
    raters: list[str]
    """Raters with a rating in this scope."""
    percent_agreement: float | None
    """Mean pairwise agreement over units with two ratings or more."""
    prevalence: float | None
    """Share of 'present' over all ratings."""
    pairs: list[PairAgreement]
    """Every rater pair."""
    krippendorff_alpha: Stat
    """Krippendorff's alpha, nominal; missing ratings allowed."""
    fleiss_kappa: Stat | None
    """Fleiss' kappa over units rated by all raters (three raters or more)."""
    gwet_ac1: Stat
    """Gwet's AC1 over all raters (missing ratings allowed)."""


class ScorePair(Record):
    """Two raters' 0-100 scores."""

    rater_a: str
    """First rater."""
    rater_b: str
    """Second rater."""
    n: int
    """Items both scored."""
    icc2: Stat
    """ICC(2,1) of the pair."""
    icc3: Stat
    """ICC(3,1) of the pair."""
    spearman: float | None
    """Spearman's rho."""
    spearman_p: float | None
    """Its p-value."""
    kendall: float | None
    """Kendall's tau-b."""
    kendall_p: float | None
    """Its p-value."""
    mean_diff: float | None
    """Mean of a - b (bias)."""
    sd_diff: float | None
    """SD of a - b."""
    loa_low: float | None
    """Bland-Altman lower limit of agreement (mean - 1.96 SD)."""
    loa_high: float | None
    """Upper limit (mean + 1.96 SD)."""


class ScoreAgreement(Record):
    """Agreement on implementation scores."""

    raters: list[str]
    """Raters with scores."""
    n_items: int
    """Items scored by every rater (the ICC's items)."""
    n_items_any: int
    """Items scored by at least two raters (Krippendorff's alpha uses these)."""
    icc2: Stat
    """ICC(2,1), all raters: F interval; bootstrap interval in ``icc2_boot``."""
    icc3: Stat
    """ICC(3,1), all raters."""
    icc2_boot: Stat
    """ICC(2,1) with a cluster-bootstrap interval."""
    icc3_boot: Stat
    """ICC(3,1) with a cluster-bootstrap interval."""
    anova: dict[str, float | None]
    """Mean squares (rows = items, columns = raters, error), F and degrees of freedom."""
    krippendorff_alpha: Stat
    """Krippendorff's alpha, interval; missing scores allowed."""
    pairs: list[ScorePair]
    """Every rater pair."""


class GoldStat(Record):
    """One rater against the gold set on one scope ('present' is the positive class)."""

    rater_id: str
    """Rater."""
    scope: Literal["property", "level", "all"]
    """What is pooled."""
    scope_id: str
    """Property id, level or ``all``."""
    n: int
    """Units rated by the rater and in the gold set."""
    tp: int
    """Present in both."""
    fp: int
    """Present for the rater, absent in gold."""
    fn: int
    """Absent for the rater, present in gold."""
    tn: int
    """Absent in both."""
    precision: Stat
    """tp / (tp + fp)."""
    recall: Stat
    """tp / (tp + fn)."""
    f1: Stat
    """Harmonic mean of precision and recall."""


class Consistency(Record):
    """A sampled judge against itself: how its K votes per property split."""

    rater_id: str
    """Rater (an LLM judge with several samples)."""
    scope: Literal["level", "all"]
    """What is pooled."""
    scope_id: str
    """Level or ``all``."""
    n_units: int
    """Item x property units with two votes or more."""
    unanimous: float | None
    """Share of units where every vote agreed."""
    majority_share: float | None
    """Mean share of a unit's votes that went to its majority verdict."""
    fleiss_kappa: Stat
    """Fleiss' kappa with the samples as raters (units with the usual number of votes)."""
    krippendorff_alpha: Stat
    """Krippendorff's alpha (nominal) with the samples as raters."""


class AgreementResult(Record):
    """The output of ``d2kgrade agree``."""

    schema_version: Literal[1] = AGREEMENT_RESULT_VERSION
    """Version of this format."""
    config: AgreementConfig
    """Settings."""
    inputs: list[str]
    """Ratings files (and the gold file)."""
    raters: dict[str, str]
    """Rater id -> rater kind."""
    scales: dict[str, str]
    """Which published scale each kind of coefficient is read on."""
    binary: list[BinaryAgreement]
    """Per property, per level, and pooled."""
    scores: ScoreAgreement | None
    """On 0-100 scores, where two raters or more scored."""
    gold: list[GoldStat]
    """Against the gold set, when one is given."""
    consistency: list[Consistency]
    """Self-consistency of sampled judges, where votes were recorded."""
    warnings: list[str]
    """What a reader of these numbers must know."""
