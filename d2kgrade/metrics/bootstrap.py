"""Cluster bootstrap: resample clusters (tasks) with replacement, recompute from per-cluster sums.

Every statistic d2kgrade bootstraps is a function of sums over clusters (a mean is sum/count, a geometric mean
is exp(sum of logs / count), kappa comes from summed 2x2 counts), so one resample is an index draw and a sum:
thousands of resamples of every metric take milliseconds. Intervals are percentile intervals; the draw is seeded,
so a result reproduces exactly.
"""

from __future__ import annotations

import math

import numpy as np


def draw(n_clusters: int, resamples: int, seed: int) -> np.ndarray:
    """Cluster indices of ``resamples`` bootstrap samples, shape ``(resamples, n_clusters)``."""
    rng = np.random.default_rng(seed)
    if n_clusters == 0 or resamples == 0:
        return np.zeros((resamples, n_clusters), dtype=np.int64)
    return rng.integers(0, n_clusters, size=(resamples, n_clusters))


def weights(idx: np.ndarray, n_clusters: int) -> np.ndarray:
    """How often each cluster was drawn in each resample: ``(resamples, n_clusters)``."""
    b = idx.shape[0]
    flat = (idx + n_clusters * np.arange(b)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n_clusters).reshape(b, n_clusters).astype(float)


def resum(per_cluster: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Sums over resampled clusters: ``per_cluster`` is ``(..., C)``, ``w`` from :func:`weights`; the result is
    ``(..., B)``."""
    return np.tensordot(per_cluster, w, axes=([-1], [1]))


def percentile_ci(samples: np.ndarray, ci: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval over the last axis, ignoring NaN resamples (a resample where a statistic is
    undefined, e.g. no task correct in both arms)."""
    if samples.shape[-1] == 0:
        nan = np.full(samples.shape[:-1], math.nan)
        return nan, nan
    lo_q, hi_q = 100 * (1 - ci) / 2, 100 * (1 + ci) / 2
    with np.errstate(all="ignore"):
        all_nan = np.all(np.isnan(samples), axis=-1)
        filled = np.where(all_nan[..., None], 0.0, samples)
        lo = np.nanpercentile(filled, lo_q, axis=-1)
        hi = np.nanpercentile(filled, hi_q, axis=-1)
    lo = np.where(all_nan, math.nan, lo)
    hi = np.where(all_nan, math.nan, hi)
    return lo, hi


def safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), math.nan)
