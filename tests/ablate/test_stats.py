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


# ----------------------------------------------------------------------------------------------------- oracles


def test_one_workload_matches_scipys_paired_percentile_bootstrap() -> None:
    """scipy.stats.bootstrap resamples the rounds as pairs too; the two intervals differ only by Monte Carlo error
    (4000 resamples each: about 0.3% of the ratio at 12 rounds)."""
    np = pytest.importorskip("numpy")
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(11)
    base = [1 + rng.gauss(0, 0.02) for _ in range(12)]
    slow = [1.1 * (1 + rng.gauss(0, 0.02)) for _ in range(12)]
    ours, _ = ratio_of_medians({"w": slow}, {"w": base}, resamples=4000, seed=5)
    ref = stats.bootstrap((np.array(slow), np.array(base)), lambda a, b: np.median(a) / np.median(b), paired=True,
                          vectorized=False, method="percentile", n_resamples=4000, random_state=1)
    assert ours.value == pytest.approx(float(np.median(slow) / np.median(base)))
    assert ours.low == pytest.approx(ref.confidence_interval.low, rel=0.006)
    assert ours.high == pytest.approx(ref.confidence_interval.high, rel=0.006)


def test_the_geomean_resamples_rounds_jointly_like_scipy() -> None:
    """Two workloads that share each round's drift: scipy, resampling the four series as one paired sample, is the
    definition of 'rounds stay together'; a drift of 8% per round then cancels in each round's ratio."""
    np = pytest.importorskip("numpy")
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(12)
    drift = [1 + rng.gauss(0, 0.08) for _ in range(10)]
    den = {w: [s * d * (1 + rng.gauss(0, 0.01)) for d in drift] for w, s in (("a", 1.0), ("b", 4.0))}
    num = {w: [x * f * (1 + rng.gauss(0, 0.01)) for x in den[w]] for w, f in (("a", 1.3), ("b", 1.0))}
    ours, per = ratio_of_medians(num, den, resamples=4000, seed=6)

    def geo(na, da, nb, db):
        return float(np.sqrt(np.median(na) / np.median(da) * np.median(nb) / np.median(db)))

    ref = stats.bootstrap(tuple(np.array(x) for x in (num["a"], den["a"], num["b"], den["b"])), geo, paired=True,
                          vectorized=False, method="percentile", n_resamples=4000, random_state=2)
    assert ours.low == pytest.approx(ref.confidence_interval.low, rel=0.01)
    assert ours.high == pytest.approx(ref.confidence_interval.high, rel=0.01)
    assert ours.low < math.sqrt(1.3) < ours.high and per["a"].low < 1.3 < per["a"].high


# ------------------------------------------------------------------------------------- synthetic experiments


def simulate(rounds: int, true: float, *, sd: float = 0.01, drift: float = 0.05, trials: int = 100,
             resamples: int = 400, seed: int = 0) -> tuple[float, float]:
    """(coverage of the 95% interval, rate of load_bearing) over synthetic interleaved experiments: per round a
    shared drift (the machine), then orig_a, the variant (``true`` times slower) and orig_b each with their own
    noise ``sd``, as the driver times them."""
    rng = random.Random(seed)
    cover = flagged = 0
    for _ in range(trials):
        d = [1 + rng.gauss(0, drift) for _ in range(rounds)]
        a, b = ([x * (1 + rng.gauss(0, sd)) for x in d] for _ in range(2))
        v = [x * true * (1 + rng.gauss(0, sd)) for x in d]
        noise, _ = ratio_of_medians({"w": b}, {"w": a}, resamples=resamples, seed=1)
        slow, _ = ratio_of_medians({"w": v}, {"w": a}, resamples=resamples, seed=2)
        assert noise is not None and slow is not None
        cover += slow.low <= true <= slow.high
        flagged += load_bearing(slow, noise.half_width_pct)
    return cover / trials, flagged / trials


def test_five_rounds_cover_and_do_not_raise_false_alarms() -> None:
    """At the CLI's 5 rounds the interval covers the true slowdown in about 95% of experiments (0.91-0.97 over
    the cells of docs/ablation.md), a property that changes nothing is almost never load-bearing, a 20% one
    always is, and a 5% drift shared by each round changes none of it (interleaving)."""
    for drift in (0.0, 0.05):
        cover, false_alarm = simulate(5, 1.0, drift=drift)
        assert cover >= 0.85 and false_alarm <= 0.05, (drift, cover, false_alarm)
        cover, power = simulate(5, 1.2, drift=drift, seed=1)
        assert cover >= 0.85 and power == 1.0, (drift, cover, power)


def test_three_rounds_undercover_so_the_benchmark_runs_five() -> None:
    """With 3 rounds a resample has 10 distinct draws and the "95%" interval covers the truth in only ~72% of
    experiments (0.72 in docs/ablation.md): the benchmark's default is 5 rounds."""
    import benchmarks.ablate_references as bench

    cover3, _ = simulate(3, 1.05, trials=200)
    cover5, _ = simulate(5, 1.05, trials=200)
    assert cover3 < 0.88 < cover5
    assert bench.parse(["--device", "cpu"]).rounds >= 5


if __name__ == "__main__":  # the table of docs/ablation.md
    for n in (3, 5, 8):
        for t in (1.0, 1.02, 1.05, 1.2):
            cells = [simulate(n, t, drift=dr, trials=400) for dr in (0.0, 0.05)]
            print(n, t, " ".join(f"{c:.2f}/{f:.2f}" for c, f in cells))
