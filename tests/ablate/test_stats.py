"""The ratio-of-medians statistic: hand-computed points, intervals that behave, the noise bar."""

from __future__ import annotations

import math
import random

import pytest

from d2kgrade.ablate.stats import Ratio, load_bearing, ratio_of_medians


def test_points_are_ratios_of_medians_and_their_geomean() -> None:
    num = {"a": [2.0, 2.2, 2.1], "b": [9.0, 9.0, 9.0]}
    den = {"a": [1.0, 1.1, 1.05], "b": [3.0, 3.0, 3.0]}
    overall, per = ratio_of_medians(num, den, resamples=200)
    assert per["a"].value == pytest.approx(2.1 / 1.05) and per["b"].value == pytest.approx(3.0)
    assert overall.value == pytest.approx(math.sqrt(2.0 * 3.0))
    # constant figures: every resample gives the same ratio
    assert (per["b"].low, per["b"].high) == (3.0, 3.0)
    assert per["a"].low <= per["a"].value <= per["a"].high


def test_missing_rounds_and_workloads_are_left_out() -> None:
    num = {"a": [2.0, None, 2.0], "b": [1.0, None, None], "c": [1.0, 1.0]}
    den = {"a": [1.0, 1.0, 1.0], "b": [1.0, 1.0, 1.0]}
    overall, per = ratio_of_medians(num, den, resamples=50)
    assert set(per) == {"a"} and overall.value == pytest.approx(2.0)
    assert ratio_of_medians({"a": [1.0]}, {"a": [1.0]}) == (None, {})


def test_interval_covers_a_known_slowdown_and_noise_decides() -> None:
    rng = random.Random(3)
    base = [1.0 + rng.gauss(0, 0.005) for _ in range(8)]
    twin = [b * (1 + rng.gauss(0, 0.005)) for b in base]
    slow = [b * 1.1 * (1 + rng.gauss(0, 0.005)) for b in base]
    noise, _ = ratio_of_medians({"w": twin}, {"w": base}, resamples=1000, seed=1)
    sd, _ = ratio_of_medians({"w": slow}, {"w": base}, resamples=1000, seed=2)
    assert noise.low < 1.0 < noise.high and noise.half_width_pct < 3
    assert sd.low <= sd.value <= sd.high and abs(sd.value - 1.1) < 0.01 and sd.low > 1.05
    assert load_bearing(sd, noise.half_width_pct)
    same, _ = ratio_of_medians({"w": twin}, {"w": base}, resamples=1000, seed=4)
    assert not load_bearing(same, noise.half_width_pct)


def test_half_width_is_the_reach_from_one() -> None:
    assert Ratio(1.0, 0.98, 1.01).half_width_pct == pytest.approx(2.0)
    assert Ratio(1.2, 1.1, 1.3).half_width_pct == pytest.approx(30.0)
    assert not load_bearing(Ratio(1.05, 1.02, 1.08), noise_pct=2.5)
    assert load_bearing(Ratio(1.05, 1.03, 1.08), noise_pct=2.5)
