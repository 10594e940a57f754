"""Agreement on 0-100 implementation scores: ICC(2,1), ICC(3,1), Krippendorff's alpha (interval), rank
correlations and Bland-Altman limits.

ICCs follow Shrout & Fleiss (1979), Psychol Bull 86:420-428, from the two-way ANOVA mean squares of an items x
raters table (items rated by every rater): ICC(2,1) (two-way random, absolute agreement, single rater) and
ICC(3,1) (two-way mixed, consistency, single rater). The 95% intervals are the F-based ones of McGraw & Wong
(1996), Psychol Methods 1:30-46, Table 7 (ICC(A,1) and ICC(C,1)), the same as R's ``psych::ICC``.

As in :mod:`d2kgrade.agreement.nominal`, statistics come from per-unit sums (:func:`icc_unit_sums`,
:func:`interval_unit_sums`) so that a cluster bootstrap is a weighted sum.
"""

from __future__ import annotations

import math

import numpy as np

from d2kgrade.agreement.nominal import _div


def icc_unit_sums(x: np.ndarray) -> np.ndarray:
    """Per-item terms of the ANOVA of a complete items x raters matrix ``x`` (n, k): rows are
    ``[1, row_sum^2, sum x^2, row_sum, col_sum_1..k]``. Shape ``(4 + k, n)``."""
    rs = x.sum(axis=1)
    return np.vstack([np.ones(len(x)), rs ** 2, (x ** 2).sum(axis=1), rs, x.T])


def icc_from_sums(s: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """Mean squares and ICC(2,1), ICC(3,1) from summed :func:`icc_unit_sums` (leading axis the fields)."""
    n, rs2, x2, total = s[0], s[1], s[2], s[3]
    cols = s[4:4 + k]
    ct = _div(total ** 2, n * k)
    ss_rows = rs2 / k - ct
    ss_cols = _div((cols ** 2).sum(axis=0), n) - ct
    ss_tot = x2 - ct
    ss_err = ss_tot - ss_rows - ss_cols
    ms_r = _div(ss_rows, n - 1)
    ms_c = ss_cols / max(k - 1, 1)
    ms_e = _div(ss_err, (n - 1) * (k - 1))
    icc3 = _div(ms_r - ms_e, ms_r + (k - 1) * ms_e)
    icc2 = _div(ms_r - ms_e, ms_r + (k - 1) * ms_e + _div(k * (ms_c - ms_e), n))
    return {"n": n, "ms_rows": ms_r, "ms_cols": ms_c, "ms_err": ms_e, "icc2": icc2, "icc3": icc3}


def icc(x: np.ndarray, ci: float = 0.95) -> dict[str, float]:
    """ICC(2,1) and ICC(3,1) of a complete items x raters matrix, with McGraw & Wong's F-based intervals.

    Returns: ``icc2, icc2_low, icc2_high, icc3, icc3_low, icc3_high, ms_rows, ms_cols, ms_err, f, df1, df2, n, k``.
    """
    from scipy.stats import f as fdist

    n, k = x.shape
    r = {key: float(v) for key, v in icc_from_sums(icc_unit_sums(x).sum(axis=1), k).items()}
    ms_r, ms_c, ms_e = r["ms_rows"], r["ms_cols"], r["ms_err"]
    df1, df2 = n - 1, (n - 1) * (k - 1)
    a = 1 - ci
    out = {**r, "n": float(n), "k": float(k), "df1": float(df1), "df2": float(df2)}
    out["f"] = ms_r / ms_e if ms_e > 0 else math.nan
    nan = math.nan
    out.update(icc2_low=nan, icc2_high=nan, icc3_low=nan, icc3_high=nan)
    if n < 2 or k < 2 or not ms_e > 0:
        return out
    # ICC(3,1) = ICC(C,1): exact F interval
    f_obs = ms_r / ms_e
    f_l = f_obs / fdist.ppf(1 - a / 2, df1, df2)
    f_u = f_obs * fdist.ppf(1 - a / 2, df2, df1)
    out["icc3_low"] = (f_l - 1) / (f_l + k - 1)
    out["icc3_high"] = (f_u - 1) / (f_u + k - 1)
    # ICC(2,1) = ICC(A,1): Satterthwaite-approximate F interval (McGraw & Wong 1996, Table 7, case 2A)
    rho = r["icc2"]
    if math.isfinite(rho) and rho < 1:
        aa = k * rho / (n * (1 - rho))
        bb = 1 + k * rho * (n - 1) / (n * (1 - rho))
        v = (aa * ms_c + bb * ms_e) ** 2 / ((aa * ms_c) ** 2 / (k - 1) + (bb * ms_e) ** 2 / df2)
        fu = fdist.ppf(1 - a / 2, df1, v)
        fl = fdist.ppf(1 - a / 2, v, df1)
        out["icc2_low"] = n * (ms_r - fu * ms_e) / (fu * (k * ms_c + (k * n - k - n) * ms_e) + n * ms_r)
        out["icc2_high"] = n * (fl * ms_r - ms_e) / (k * ms_c + (k * n - k - n) * ms_e + n * fl * ms_r)
    return out


def interval_unit_sums(x: np.ndarray) -> np.ndarray:
    """Per-unit terms of Krippendorff's alpha (interval) of a units x raters matrix with NaN for missing:
    ``[D_o term, m, sum v, sum v^2]`` over pairable units (two values or more). Shape ``(4, n_units)``."""
    ok = np.isfinite(x)
    v = np.where(ok, x, 0.0)
    m = ok.sum(axis=1).astype(float)
    s1, s2 = v.sum(axis=1), (v ** 2).sum(axis=1)
    pairable = m >= 2
    do = np.where(pairable, 2 * (m * s2 - s1 ** 2) / np.where(pairable, m - 1, 1.0), 0.0)
    return np.vstack([do, np.where(pairable, m, 0.0), np.where(pairable, s1, 0.0), np.where(pairable, s2, 0.0)])


def interval_alpha_from_sums(s: np.ndarray) -> np.ndarray:
    """Krippendorff's alpha (interval) from summed :func:`interval_unit_sums`:
    ``1 - (n - 1) * sum D_o / (2 (n S2 - S1^2))``."""
    do, n, s1, s2 = s[0], s[1], s[2], s[3]
    return 1 - (n - 1) * _div(do, 2 * (n * s2 - s1 ** 2))


def krippendorff_interval(x: np.ndarray) -> float:
    """Krippendorff's alpha (interval) of a units x raters matrix with NaN for missing."""
    return float(interval_alpha_from_sums(interval_unit_sums(x).sum(axis=1)))


def pair_scores(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Two raters' scores on the items both rated: Spearman's rho, Kendall's tau-b (with p-values), the mean
    difference a - b, its SD and the Bland-Altman 95% limits of agreement (mean +- 1.96 SD; Bland & Altman 1986,
    Lancet i:307-310)."""
    from scipy.stats import kendalltau, spearmanr

    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    n = len(a)
    out = {"n": float(n)}
    nan = math.nan
    if n >= 3 and np.ptp(a) > 0 and np.ptp(b) > 0:
        sp, kt = spearmanr(a, b), kendalltau(a, b)
        out.update(spearman=float(sp.statistic), spearman_p=float(sp.pvalue), kendall=float(kt.statistic),
                   kendall_p=float(kt.pvalue))
    else:
        out.update(spearman=nan, spearman_p=nan, kendall=nan, kendall_p=nan)
    d = a - b
    md = float(d.mean()) if n else nan
    sd = float(d.std(ddof=1)) if n >= 2 else nan
    out.update(mean_diff=md, sd_diff=sd, loa_low=md - 1.96 * sd, loa_high=md + 1.96 * sd)
    return out
