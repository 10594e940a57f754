"""How numbers print, the same in the terminal, the HTML report and the Markdown twin."""

from __future__ import annotations

import math


def value(x: float | None, fmt: str) -> str:
    """One number: ``pct`` (share of 1 as a percent), ``x`` (a speedup), ``score`` (0-100), ``num``."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if fmt == "pct":
        return f"{100 * x:.1f}%"
    if fmt == "x":
        return f"{x:.2f}x"
    if fmt == "score":
        return f"{x:.1f}"
    return f"{x:.2f}"


def delta(x: float | None, fmt: str) -> str:
    """A signed difference (percentage points for shares)."""
    if x is None or not math.isfinite(x):
        return "–"
    if fmt == "pct":
        return f"{100 * x:+.1f} pp"
    if fmt == "x":
        return f"{x:+.2f}x"
    if fmt == "score":
        return f"{x:+.1f}"
    return f"{x:+.2f}"


def interval(lo: float | None, hi: float | None, fmt: str, *, signed: bool = False) -> str:
    """``[lo, hi]``, or '' when there is no interval."""
    if lo is None or hi is None:
        return ""
    if signed and fmt == "pct":  # percentage points; the delta beside it carries the unit
        return f"[{100 * lo:+.1f}, {100 * hi:+.1f}]"
    f = delta if signed else value
    return f"[{f(lo, fmt)}, {f(hi, fmt)}]"


def stat(x: float | None, digits: int = 3) -> str:
    """An agreement statistic (kappa, alpha, ICC...)."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:.{digits}f}"
