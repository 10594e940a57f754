"""Agreement on binary verdicts (present = 1, absent = 0, missing = NaN), from sums that a bootstrap can resample.

Each statistic is a function of per-unit counts summed over units, so it is computed from a vector of sums
(:func:`pair_sums`, :func:`multi_sums`) and the same function evaluates thousands of bootstrap resamples at once
(the leading axes of the sums are carried through).

- Cohen's kappa (1960): (p_o - p_e) / (1 - p_e), p_e from each rater's own marginals.
- Gwet's AC1 (Gwet 2008, Br J Math Stat Psychol 61:29-48): the same with p_e = 2 pi (1 - pi), pi the mean
  prevalence; it stays high when agreement is high on a skewed prevalence, where kappa collapses (the "kappa
  paradox", Feinstein & Cicchetti 1990). For several raters with missing ratings: Gwet (2014), Handbook of
  Inter-Rater Reliability, 4th ed., ch. 2 (p_a over units with two ratings or more; pi over units with one or more).
- Fleiss' kappa (1971): units rated by every rater.
- Krippendorff's alpha, nominal (Krippendorff 2004/2011): from the coincidence matrix; units with fewer than two
  ratings are not pairable and drop out, so missing ratings are allowed.
"""

from __future__ import annotations

import math

import numpy as np

PAIR_FIELDS = ("n11", "n10", "n01", "n00")
MULTI_FIELDS = ("a_o01", "a_n0", "a_n1",  # Krippendorff: pairable units
                "f_P", "f_N", "f_r1", "f_r0",  # Fleiss: complete units
                "g_pa", "g_n2", "g_pi", "g_n1",  # Gwet AC1, several raters
                "prev_1", "prev_n")  # prevalence over all ratings


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b != 0, a / np.where(b != 0, b, 1.0), math.nan)


# ------------------------------------------------------------------------------------------ two raters


def pair_unit_counts(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-unit one-hot of (a, b) in the order of :data:`PAIR_FIELDS`; zero rows where either is missing.
    Shape ``(4, n_units)``."""
    ok = np.isfinite(a) & np.isfinite(b)
    a1, b1 = ok & (a == 1), ok & (b == 1)
    a0, b0 = ok & (a == 0), ok & (b == 0)
    return np.stack([a1 & b1, a1 & b0, a0 & b1, a0 & b0]).astype(float)


def pair_stats(s: np.ndarray) -> dict[str, np.ndarray]:
    """From summed pair counts (first axis :data:`PAIR_FIELDS`): n, percent agreement, each rater's prevalence,
    Cohen's kappa and Gwet's AC1 (NaN where undefined: kappa when both raters are constant and equal)."""
    n11, n10, n01, n00 = s[0], s[1], s[2], s[3]
    n = n11 + n10 + n01 + n00
    po = _div(n11 + n00, n)
    pa1, pb1 = _div(n11 + n10, n), _div(n11 + n01, n)
    pe_k = pa1 * pb1 + (1 - pa1) * (1 - pb1)
    kappa = _div(po - pe_k, 1 - pe_k)
    pi = (pa1 + pb1) / 2
    pe_g = 2 * pi * (1 - pi)
    ac1 = _div(po - pe_g, 1 - pe_g)
    return {"n": n, "agreement": po, "prevalence_a": pa1, "prevalence_b": pb1, "kappa": kappa, "ac1": ac1}


# ------------------------------------------------------------------------------------------ many raters


def multi_unit_sums(ones: np.ndarray, zeros: np.ndarray, n_raters: int) -> np.ndarray:
    """Per-unit terms of :data:`MULTI_FIELDS` from each unit's count of 1 and 0 ratings. Shape ``(13, n_units)``.

    ``n_raters`` is how many ratings make a unit complete (for Fleiss' kappa).
    """
    r1, r0 = np.asarray(ones, dtype=float), np.asarray(zeros, dtype=float)
    m = r1 + r0
    pairable = m >= 2
    mm1 = np.where(pairable, m - 1, 1.0)
    a_o01 = np.where(pairable, r0 * r1 / mm1, 0.0)
    a_n0, a_n1 = np.where(pairable, r0, 0.0), np.where(pairable, r1, 0.0)
    complete = m == n_raters
    k = float(n_raters)
    f_P = np.where(complete & (k >= 2), (r0 * (r0 - 1) + r1 * (r1 - 1)) / max(k * (k - 1), 1.0), 0.0)
    f_N = complete.astype(float)
    f_r1, f_r0 = np.where(complete, r1, 0.0), np.where(complete, r0, 0.0)
    g_pa = np.where(pairable, (r0 * (r0 - 1) + r1 * (r1 - 1)) / (m * mm1 + (~pairable)), 0.0)
    g_n2 = pairable.astype(float)
    rated = m >= 1
    g_pi = np.where(rated, r1 / np.where(rated, m, 1.0), 0.0)
    g_n1 = rated.astype(float)
    return np.stack([a_o01, a_n0, a_n1, f_P, f_N, f_r1, f_r0, g_pa, g_n2, g_pi, g_n1, r1, m])


def multi_stats(s: np.ndarray, n_raters: int) -> dict[str, np.ndarray]:
    """From summed :data:`MULTI_FIELDS`: Krippendorff's alpha (nominal), Fleiss' kappa, Gwet's AC1 for several
    raters, mean pairwise agreement and prevalence, with the unit counts behind each."""
    a_o01, a_n0, a_n1, f_P, f_N, f_r1, f_r0, g_pa, g_n2, g_pi, g_n1, prev_1, prev_n = s
    n = a_n0 + a_n1
    alpha = 1 - (n - 1) * _div(a_o01, a_n0 * a_n1)
    alpha = np.where((a_n0 > 0) & (a_n1 > 0), alpha, math.nan)
    pbar = _div(f_P, f_N)
    p1 = _div(f_r1, f_N * n_raters)
    pe = p1 ** 2 + (1 - p1) ** 2
    fleiss = _div(pbar - pe, 1 - pe)
    pa = _div(g_pa, g_n2)
    pi = _div(g_pi, g_n1)
    pe_g = 2 * pi * (1 - pi)
    ac1 = _div(pa - pe_g, 1 - pe_g)
    return {"alpha": alpha, "fleiss": fleiss, "ac1": ac1, "agreement": pa, "prevalence": _div(prev_1, prev_n),
            "n_pairable": g_n2, "n_complete": f_N}


def counts_from_matrix(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-unit counts of 1 and 0 ratings of a units x raters matrix with NaN for missing."""
    return np.nansum(x == 1, axis=1).astype(float), np.nansum(x == 0, axis=1).astype(float)


def krippendorff_nominal(x: np.ndarray) -> float:
    """Krippendorff's alpha (nominal, binary) of a units x raters matrix with NaN for missing."""
    ones, zeros = counts_from_matrix(x)
    s = multi_unit_sums(ones, zeros, x.shape[1]).sum(axis=1)
    return float(multi_stats(s, x.shape[1])["alpha"])


def fleiss_kappa(x: np.ndarray) -> float:
    """Fleiss' kappa over the units rated by every rater."""
    ones, zeros = counts_from_matrix(x)
    s = multi_unit_sums(ones, zeros, x.shape[1]).sum(axis=1)
    return float(multi_stats(s, x.shape[1])["fleiss"])


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's kappa of two raters over the units both rated."""
    return float(pair_stats(pair_unit_counts(a, b).sum(axis=1))["kappa"])


def gwet_ac1(a: np.ndarray, b: np.ndarray) -> float:
    """Gwet's AC1 of two raters over the units both rated."""
    return float(pair_stats(pair_unit_counts(a, b).sum(axis=1))["ac1"])
