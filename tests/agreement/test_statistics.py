"""Agreement statistics against hand-computed cases, published examples and the libraries that define them."""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

from d2kgrade.agreement import interval, nominal
from d2kgrade.agreement.results import interpret

NAN = math.nan


def _random_matrix(seed: int, n: int = 60, k: int = 4, p: float = 0.7, missing: float = 0.2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = rng.random(n) < p
    x = np.where(rng.random((n, k)) < 0.8, truth[:, None], ~truth[:, None]).astype(float)
    x[rng.random((n, k)) < missing] = NAN
    return x


def test_kappa_paradox_hand_computed():
    """90 both-yes, 5 + 5 disagreements, 0 both-no: 90% agreement, kappa below zero, AC1 high.

    kappa: p_e = .95^2 + .05^2 = .905 -> (.90 - .905) / .095 = -0.0526
    AC1:   pi = .95, p_e = 2 * .95 * .05 = .095 -> (.90 - .095) / .905 = 0.8895
    """
    a = np.array([1.0] * 95 + [0.0] * 5)
    b = np.array([1.0] * 90 + [0.0] * 5 + [1.0] * 5)
    s = nominal.pair_stats(nominal.pair_unit_counts(a, b).sum(axis=1))
    assert float(s["agreement"]) == pytest.approx(0.90)
    assert float(s["kappa"]) == pytest.approx((0.90 - 0.905) / 0.095)
    assert float(s["kappa"]) == pytest.approx(cohen_kappa_score(a, b))
    assert float(s["ac1"]) == pytest.approx((0.90 - 0.095) / 0.905)
    assert interpret(float(s["kappa"]), "kappa") == "poor"
    assert interpret(float(s["ac1"]), "kappa") == "almost perfect"


def test_cohen_kappa_matches_sklearn_with_missing_ratings():
    for seed in range(6):
        x = _random_matrix(seed)
        a, b = x[:, 0], x[:, 2]
        ok = np.isfinite(a) & np.isfinite(b)
        assert nominal.cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a[ok], b[ok]))


def test_krippendorff_nominal_matches_library_with_missing():
    for seed in range(6):
        x = _random_matrix(seed, k=3 + seed % 3)
        assert nominal.krippendorff_nominal(x) == pytest.approx(
            krippendorff.alpha(reliability_data=x.T, level_of_measurement="nominal"))


def test_fleiss_kappa_matches_statsmodels_on_complete_units():
    for seed in range(6):
        x = _random_matrix(seed, k=3 + seed % 3)
        complete = x[np.isfinite(x).all(axis=1)].astype(int)
        table, _ = aggregate_raters(complete)
        assert nominal.fleiss_kappa(x) == pytest.approx(sm_fleiss(table))


def test_multi_rater_ac1_reduces_to_the_pairwise_one():
    x = _random_matrix(3, k=2, missing=0.0)
    ones, zeros = nominal.counts_from_matrix(x)
    multi = nominal.multi_stats(nominal.multi_unit_sums(ones, zeros, 2).sum(axis=1), 2)
    assert float(multi["ac1"]) == pytest.approx(nominal.gwet_ac1(x[:, 0], x[:, 1]))
    # Gwet (2014) with missing ratings, by hand on 3 units: [1,1,nan], [1,0,1], [0,nan,nan]
    y = np.array([[1, 1, NAN], [1, 0, 1], [0, NAN, NAN]], dtype=float)
    ones, zeros = nominal.counts_from_matrix(y)
    s = nominal.multi_stats(nominal.multi_unit_sums(ones, zeros, 3).sum(axis=1), 3)
    pa = (1.0 + (2 * 1) / (3 * 2)) / 2  # units with 2+ ratings: 1 and 1/3
    pi = (1.0 + 2 / 3 + 0.0) / 3  # share of 'present' per unit, over units with 1+ ratings
    pe = 2 * pi * (1 - pi)
    assert float(s["ac1"]) == pytest.approx((pa - pe) / (1 - pe))


def test_constant_raters_leave_kappa_undefined_not_zero():
    a = b = np.ones(10)
    s = nominal.pair_stats(nominal.pair_unit_counts(a, b).sum(axis=1))
    assert math.isnan(float(s["kappa"])) and float(s["agreement"]) == 1.0
    assert float(s["ac1"]) == pytest.approx(1.0)


def test_icc_shrout_fleiss_published_example():
    """Shrout & Fleiss (1979) Table 2: 6 targets x 4 judges. They report ICC(2,1) = .29 and ICC(3,1) = .71;
    R psych::ICC gives the intervals [.019, .76] and [.34, .95]."""
    x = np.array([[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]], float)
    r = interval.icc(x)
    assert r["ms_rows"] == pytest.approx(11.24, abs=0.01)
    assert r["ms_cols"] == pytest.approx(32.49, abs=0.01)
    assert r["ms_err"] == pytest.approx(1.02, abs=0.01)
    assert r["icc2"] == pytest.approx(0.290, abs=0.001)
    assert r["icc3"] == pytest.approx(0.715, abs=0.001)
    assert (r["icc2_low"], r["icc2_high"]) == pytest.approx((0.019, 0.761), abs=0.002)
    assert (r["icc3_low"], r["icc3_high"]) == pytest.approx((0.342, 0.946), abs=0.002)


def test_icc_mean_squares_match_statsmodels_anova():
    import statsmodels.api as sm
    from statsmodels.formula.api import ols

    rng = np.random.default_rng(4)
    x = rng.normal(50, 10, (23, 3)) + rng.normal(0, 8, (23, 1)) + np.array([0, 3, -2])
    long = pd.DataFrame([(i, j, x[i, j]) for i in range(23) for j in range(3)], columns=["item", "rater", "y"])
    table = sm.stats.anova_lm(ols("y ~ C(item) + C(rater)", data=long).fit())
    ms = table["sum_sq"] / table["df"]
    r = interval.icc(x)
    assert r["ms_rows"] == pytest.approx(ms["C(item)"])
    assert r["ms_cols"] == pytest.approx(ms["C(rater)"])
    assert r["ms_err"] == pytest.approx(ms["Residual"])
    # the definitions, written out
    msr, msc, mse, k, n = r["ms_rows"], r["ms_cols"], r["ms_err"], 3, 23
    assert r["icc3"] == pytest.approx((msr - mse) / (msr + (k - 1) * mse))
    assert r["icc2"] == pytest.approx((msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n))
    assert r["icc2_low"] < r["icc2"] < r["icc2_high"] and r["icc3_low"] < r["icc3"] < r["icc3_high"]


def test_krippendorff_interval_published_example_and_library():
    """Krippendorff (2011), 'Computing Krippendorff's alpha-reliability': 4 coders, 12 units, missing data;
    interval alpha = 0.849."""
    x = np.array([[1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN], [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
                  [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN], [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN]]).T
    assert interval.krippendorff_interval(x) == pytest.approx(0.849, abs=0.0005)
    rng = np.random.default_rng(2)
    y = rng.normal(60, 15, (40, 3))
    y[rng.random((40, 3)) < 0.25] = NAN
    assert interval.krippendorff_interval(y) == pytest.approx(
        krippendorff.alpha(reliability_data=y.T, level_of_measurement="interval"))


def test_bland_altman_and_rank_correlations_by_hand():
    from scipy.stats import kendalltau, spearmanr

    a, b = np.array([1.0, 2, 3, 4, 7]), np.array([0.0, 2, 2, 5, 6])
    r = interval.pair_scores(a, b)
    d = a - b  # 1, 0, 1, -1, 1: mean .4, sd sqrt(((.6)^2*3 + .4^2 + 1.4^2) / 4) = sqrt(.8)
    assert r["mean_diff"] == pytest.approx(0.4)
    assert r["sd_diff"] == pytest.approx(math.sqrt(0.8))
    assert r["loa_low"] == pytest.approx(0.4 - 1.96 * math.sqrt(0.8))
    assert r["loa_high"] == pytest.approx(0.4 + 1.96 * math.sqrt(0.8))
    assert d.mean() == pytest.approx(r["mean_diff"])
    assert r["spearman"] == pytest.approx(spearmanr(a, b).statistic)
    assert r["kendall"] == pytest.approx(kendalltau(a, b).statistic)


def test_interpretation_bands():
    assert [interpret(v, "kappa") for v in (-0.1, 0.0, 0.2, 0.21, 0.6, 0.61, 0.8, 0.81)] == [
        "poor", "slight", "slight", "fair", "moderate", "substantial", "substantial", "almost perfect"]
    assert [interpret(v, "alpha") for v in (0.6, 0.667, 0.79, 0.8)] == ["unreliable", "tentative", "tentative",
                                                                       "reliable"]
    assert [interpret(v, "icc") for v in (0.49, 0.5, 0.75, 0.9, 0.91)] == ["poor", "moderate", "good", "good",
                                                                          "excellent"]
    assert interpret(None, "kappa") == "" and interpret(NAN, "icc") == ""
