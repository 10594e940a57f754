"""The summary of a many-draw tolerance audit (``benchmarks/tolerance_audit.py --seeds``): per implementation,
the distribution over draws of the worst element's share of the tolerance, and the tolerance it would need.

Plain Python on the audit's row records (no torch), so the statistics are tested on hand-made rows. For each
task, workload and distribution (and ``"all"``, the rotation's mix), per implementation and output:

- ``tol_ratio``, ``atol_needed``, ``rtol_needed``: quantiles over draws (q50, q90, q99, max) and, for 1 draw in N
  (:data:`FAIL_RATES`), the value exceeded that often: empirical (the 1 - 1/N quantile) when there are at least N
  draws, and a Gumbel fit of the per-draw maxima (:func:`gumbel_quantile`) always; ``value`` is the empirical one
  when there is one.
- ``tolerance_fail_1_in_N``: the (atol, rtol) at which the implementation fails 1 draw in N, three ways: both
  terms scaled by the tol_ratio's value (a draw fails under (f atol, f rtol) exactly when its worst share exceeds
  f), atol raised with rtol kept, rtol raised with atol kept (the per-draw ``atol_needed``/``rtol_needed`` are the
  smallest that pass, so their 1 - 1/N quantile fails 1 draw in N).
- ``paired``: each implementation against the first (the baseline, cuBLAS for the GEMMs) on the same draws.

A draw is one input set. A timed evaluation meets ``sets`` of them (one per distribution for gemm_bf16 on an H200)
besides its correctness trials, so its chance to fail is about the sum of its sets' per-draw rates.
"""

from __future__ import annotations

import math
from typing import Any

TILE_MODS = (64, 128, 256)
"""The audit records the worst element's index modulo these: every BM and BN of the GEMM experts' configs (64-256,
and the 128-wide halves of a subtiled epilogue), so a fault tied to one place in a tile shows as one residue."""
FAIL_RATES = (100, 1000)
"""The summary gives the tolerance at which an implementation fails 1 draw in each of these."""


def finite(x: float) -> float | None:
    """``x``, or None for an infinite or NaN value (JSON has neither)."""
    return x if math.isfinite(x) else None


def quantile(xs: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default, Hyndman-Fan type 7)."""
    v = sorted(xs)
    if not v:
        raise ValueError("quantile of no values")
    h = (len(v) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(v) - 1)
    if v[lo] == v[hi]:  # also inf == inf, which the interpolation would turn into nan
        return v[lo]
    return v[lo] + (h - lo) * (v[hi] - v[lo])


def gumbel_quantile(xs: list[float], q: float) -> float | None:
    """The ``q`` quantile of a Gumbel (maximum) distribution fitted by moments: scale b = s sqrt(6)/pi, location
    m - 0.5772 b (s the sample standard deviation, n - 1). None for fewer than 2 values or any infinite one. The
    worst element of a draw is a maximum over millions of elements, so its tail is nearly Gumbel; it lets 256
    draws say something about 1 in 1000."""
    if len(xs) < 2 or not all(math.isfinite(x) for x in xs):
        return None
    n = len(xs)
    mean = sum(xs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    b = sd * math.sqrt(6) / math.pi
    return mean - 0.5772156649015329 * b - b * math.log(-math.log(q))


def _stat(values: list[float | None]) -> dict:
    """Quantiles over draws and, per :data:`FAIL_RATES` 1/N, the value exceeded by 1 draw in N."""
    xs = [math.inf if v is None else float(v) for v in values]
    out: dict[str, Any] = {k: finite(quantile(xs, q)) for k, q in (("q50", 0.5), ("q90", 0.9), ("q99", 0.99))}
    out["max"] = finite(max(xs))
    for rate in FAIL_RATES:
        emp = finite(quantile(xs, 1 - 1 / rate)) if len(xs) >= rate else None
        out[f"1_in_{rate}"] = {"empirical": emp, "gumbel": gumbel_quantile(xs, 1 - 1 / rate),
                               "value": emp if emp is not None else gumbel_quantile(xs, 1 - 1 / rate)}
    return out


def _mode(points: list[list[int] | None]) -> dict:
    """The most common point and its count, of the draws that have one (a draw without errors has none)."""
    counts: dict[tuple[int, ...], int] = {}
    for p in points:
        if p is not None:
            counts[tuple(p)] = counts.get(tuple(p), 0) + 1
    at, c = max(counts.items(), key=lambda kv: kv[1]) if counts else ((), 0)
    return {"mode": list(at), "count": c, "of": sum(p is not None for p in points)}


def summarize_outputs(outputs: list[dict]) -> dict:
    """One implementation's records of one output over draws: ``n_draws``, ``n_fail`` (draws out of tolerance),
    ``tol_ratio``/``atol_needed``/``rtol_needed`` as :func:`_stat`; ``tolerance_fail_1_in_N``: the tolerance at
    which it fails 1 draw in N, three ways: both terms scaled by the tol_ratio's value, atol raised (rtol kept),
    rtol raised (atol kept); ``worst_index_mod``: the most common residue of the worst element per tile size."""
    atol, rtol = outputs[0]["tol"]
    stats = {k: _stat([o[k] if k != "tol_ratio" else o["worst"]["tol_ratio"] for o in outputs])
             for k in ("tol_ratio", "atol_needed", "rtol_needed")}
    out: dict[str, Any] = {"n_draws": len(outputs), "n_fail": sum(not o["ok"] for o in outputs), "tol": [atol, rtol],
                           **stats, "n_above_mean": {level: sum(o["n_above"][level] for o in outputs) / len(outputs)
                                                     for level in outputs[0]["n_above"]}}
    for rate in FAIL_RATES:
        f, a, r = (stats[k][f"1_in_{rate}"]["value"] for k in ("tol_ratio", "atol_needed", "rtol_needed"))
        out[f"tolerance_fail_1_in_{rate}"] = {"scaled": None if f is None else [f * atol, f * rtol],
                                             "atol_at_rtol": None if a is None else [a, rtol],
                                             "rtol_at_atol": None if r is None else [atol, r]}
    out["worst_index_mod"] = {str(m): _mode([(o["worst"]["index_mod"] or {}).get(str(m)) for o in outputs])
                              for m in TILE_MODS}
    return out


def summarize(rows: list[dict]) -> list[dict]:
    """Per task, workload and distribution (and ``"all"`` of them): per implementation and output
    :func:`summarize_outputs`, and ``paired``: per other implementation against the first (the baseline), the
    draws where its worst tol_ratio is higher, equal, lower, and above the first's maximum over the draws."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for row in rows:
        if "draw" not in row or "results" not in row:
            continue
        for dist in (row["dist"], "all"):
            groups.setdefault((row["task"], row["workload"], dist), []).append(row)
    out = []
    for (task, wl, dist), grp in sorted(groups.items()):
        entry: dict[str, Any] = {"task": task, "workload": wl, "dist": dist, "n_draws": len(grp),
                                 "errors": {}, "impls": {}}
        per: dict[str, dict[str, list[dict]]] = {}
        for row in grp:
            for res in row["results"]:
                if "error" in res:
                    entry["errors"][res["impl"]] = entry["errors"].get(res["impl"], 0) + 1
                    continue
                for o in res["outputs"]:
                    if o.get("worst") is not None:
                        per.setdefault(res["impl"], {}).setdefault(o["name"], []).append(o)
        entry["impls"] = {impl: {name: summarize_outputs(os) for name, os in outs.items()}
                          for impl, outs in per.items()}
        entry["paired"] = _paired(grp)
        out.append(entry)
    return out


def _paired(rows: list[dict]) -> dict:
    def worst(res: dict) -> float | None:
        if "error" in res:
            return None
        xs = [o["worst"]["tol_ratio"] for o in res["outputs"] if o.get("worst") is not None]
        return max((math.inf if x is None else x for x in xs), default=None)

    pairs: dict[str, list[tuple[float, float]]] = {}
    first = rows[0]["results"][0]["impl"] if rows else ""
    for row in rows:
        w = {res["impl"]: worst(res) for res in row["results"]}
        base = w.get(first)
        for impl, x in w.items():
            if impl != first and x is not None and base is not None:
                pairs.setdefault(impl, []).append((base, x))
    out = {}
    for impl, ps in pairs.items():
        top = max(b for b, _ in ps)
        out[impl] = {"against": first, "n": len(ps), "higher": sum(x > b for b, x in ps),
                     "equal": sum(x == b for b, x in ps), "lower": sum(x < b for b, x in ps),
                     "above_its_max": sum(x > top for _, x in ps)}
    return out
