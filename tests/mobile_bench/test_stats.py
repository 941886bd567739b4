"""The median's confidence interval and the adaptive-repeat protocol, on synthetic samples."""

from __future__ import annotations

import numpy as np
import pytest

from pocketbert.mobile_bench.timing.stats import (
    MIN_SAMPLES_FOR_INTERVAL,
    TARGET_RELATIVE_HALF_WIDTH,
    measure_interleaved,
    measure_until_stable,
    median_interval,
    median_rank_interval,
    summarize,
)

COVERAGE_TRIALS = 400
INTERVAL_CONFIDENCE = 0.95
NOMINAL_COVERAGE = 0.95
COVERAGE_SLACK = 0.04  # the order-statistic interval is conservative; it must not under-cover by more than this


class FakeClock:
    """A clock whose every timed call takes the next scripted duration (seconds)."""

    def __init__(self, durations):
        self.now, self.durations, self.calls = 0.0, iter(durations), 0

    def __call__(self):
        return self.now

    def run_once(self):
        self.now += next(self.durations)
        self.calls += 1


def test_interval_brackets_the_median_of_sorted_ranks():
    samples = list(range(1, 101))  # 1..100
    median, low, high = median_interval(samples)
    assert median == 50.5
    # n = 100: the exact binomial interval is the 40th to the 61st value (coverage 96.5 %)
    assert (low, high) == (40.0, 61.0)


@pytest.mark.parametrize("n", [6, 10, 25, 50, 51, 100, 300, 1023, 1024, 5000, 20000])  # 2.0**1024 overflows
def test_interval_is_the_narrowest_with_exact_coverage_of_95_percent(n):
    from scipy.stats import binom

    low, high = median_rank_interval(n)
    assert high == n - 1 - low  # symmetric ranks
    # [x_(low), x_(high)] (0-based) holds the median when low < #samples below it <= high
    coverage = binom.cdf(high, n, 0.5) - binom.cdf(low, n, 0.5)
    assert coverage >= INTERVAL_CONFIDENCE
    if low + 1 < high - 1:  # one rank narrower on each side falls short
        narrower = binom.cdf(high - 1, n, 0.5) - binom.cdf(low + 1, n, 0.5)
        assert narrower < INTERVAL_CONFIDENCE
    if n == 50:
        assert (low, high) == (17, 32)  # 1-based ranks 18-33


def test_interval_covers_the_true_median_about_95_percent_of_the_time():
    rng = np.random.default_rng(0)
    true_median = np.log(2)  # exponential(1): skewed like latency samples
    hits = 0
    for _ in range(COVERAGE_TRIALS):
        _, low, high = median_interval(list(rng.exponential(1.0, size=60)))
        hits += low <= true_median <= high
    assert hits / COVERAGE_TRIALS >= NOMINAL_COVERAGE - COVERAGE_SLACK


def test_summarize_reports_convergence_only_with_enough_tight_samples():
    tight = summarize([10.0, 10.01, 9.99, 10.0, 10.02, 9.98, 10.0, 10.01])
    assert tight.converged and tight.ci_relative_half_width <= TARGET_RELATIVE_HALF_WIDTH
    assert summarize([10.0, 10.0, 10.0]).converged is False  # too few samples for an interval
    with pytest.raises(ValueError):
        summarize([])


def test_steady_latency_stops_as_soon_as_the_interval_is_tight():
    clock = FakeClock([0.010] * 1000)
    stats = measure_until_stable(clock.run_once, warmup=3, min_repeats=4, max_repeats=100, time_cap_s=60, clock=clock)
    assert stats.stop_reason == "interval within target"
    assert stats.repeats == MIN_SAMPLES_FOR_INTERVAL  # min_repeats is raised to what an interval needs
    assert clock.calls == 3 + MIN_SAMPLES_FOR_INTERVAL
    assert stats.median_ms == pytest.approx(10.0)


def test_noisy_latency_runs_until_a_cap():
    rng = np.random.default_rng(1)
    noisy = list(rng.choice([0.005, 0.020], size=1000))  # a bimodal sample never pins its median to 2 %
    clock = FakeClock(noisy)
    stats = measure_until_stable(clock.run_once, warmup=0, min_repeats=6, max_repeats=50, time_cap_s=60, clock=clock)
    assert stats.stop_reason == "repeat cap" and stats.repeats == 50 and not stats.converged

    clock = FakeClock([0.5] * 100)  # slow runs: the time cap ends it (with the three samples a median needs)
    stats = measure_until_stable(clock.run_once, warmup=0, min_repeats=10, max_repeats=100, time_cap_s=1.0,
                                 target=0.0, clock=clock)
    assert stats.stop_reason == "time cap" and stats.repeats == 3


def test_interleaved_models_share_the_machines_drift():
    # the machine slows by 1 % per round; A takes 10 ms and B 20 ms at the start of the run
    durations = []
    for i in range(200):
        durations += [0.010 * 1.01**i, 0.020 * 1.01**i]
    clock = FakeClock(durations)
    a, b = measure_interleaved([clock.run_once, clock.run_once], warmup=0, min_repeats=6, max_repeats=12,
                               time_cap_s=60, clock=clock)
    assert a.repeats == b.repeats == 12
    assert b.median_ms / a.median_ms == pytest.approx(2.0)  # timed one after the other, the ratio would drift
