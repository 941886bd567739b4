"""Latency statistics: the median with a distribution-free confidence interval, and repeats until it is tight.

Latency samples are skewed (a few runs hit a page fault or a preempted core), so the interval is built
from order statistics of the median, which assumes nothing about the distribution.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

CONFIDENCE = 0.95  # two-sided coverage of the median's interval
TARGET_RELATIVE_HALF_WIDTH = 0.02  # the protocol's bar: median known to within 2 %
MIN_SAMPLES_FOR_INTERVAL = 6  # below this the order-statistic interval spans the whole sample


@dataclass
class LatencyStats:
    median_ms: float
    ci_low_ms: float
    ci_high_ms: float
    ci_relative_half_width: float
    p90_ms: float
    mean_ms: float
    min_ms: float
    repeats: int
    converged: bool  # the interval met the target before a cap stopped the repeats
    stop_reason: str

    def to_dict(self) -> dict:
        return asdict(self)


def median_rank_interval(n: int, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """0-based ranks (low, high) of the exact distribution-free interval of the median of n samples.

    [x_(k), x_(n+1-k)] (1-based) covers the median with probability 1 - 2·P(Binomial(n, 1/2) <= k-1); k is the
    largest with coverage >= `confidence` (the whole sample when even that falls short, below 6 samples).
    """
    # Each term C(n, k) / 2**n in logarithms: 2.0**n overflows a float from n = 1,024 samples on.
    log_half_n = -n * math.log(2.0)

    def probability(k: int) -> float:
        return math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + log_half_n)

    k, below = 1, probability(0)  # below: P(Binomial(n, 1/2) <= k - 1)
    while k < (n + 1) // 2:
        below_next = below + probability(k)
        if 1.0 - 2.0 * below_next < confidence:
            break
        k, below = k + 1, below_next
    return k - 1, n - k


def median_interval(samples: list[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(median, low, high): the exact order-statistic interval of the median (median_rank_interval)."""
    if not samples:
        raise ValueError("no latency samples")
    ordered = np.sort(np.asarray(samples, dtype=np.float64))
    low_rank, high_rank = median_rank_interval(len(ordered), confidence)
    return float(np.median(ordered)), float(ordered[low_rank]), float(ordered[high_rank])


def relative_half_width(samples: list[float]) -> float:
    median, low, high = median_interval(samples)
    return (high - low) / (2.0 * median) if median > 0 else math.inf


def summarize(samples_ms: list[float], stop_reason: str = "fixed repeats",
              target: float = TARGET_RELATIVE_HALF_WIDTH) -> LatencyStats:
    median, low, high = median_interval(samples_ms)
    arr = np.asarray(samples_ms, dtype=np.float64)
    rel = (high - low) / (2.0 * median) if median > 0 else math.inf
    return LatencyStats(median, low, high, rel, float(np.percentile(arr, 90)), float(arr.mean()), float(arr.min()),
                        len(arr), bool(len(arr) >= MIN_SAMPLES_FOR_INTERVAL and rel <= target), stop_reason)


def measure_until_stable(run_once: Callable[[], None], warmup: int, min_repeats: int, max_repeats: int,
                         time_cap_s: float, target: float = TARGET_RELATIVE_HALF_WIDTH,
                         clock: Callable[[], float] = time.perf_counter) -> LatencyStats:
    """Warm up, then repeat until the median's interval is within `target` of it, `max_repeats`, or `time_cap_s`."""
    return measure_interleaved([run_once], warmup, min_repeats, max_repeats, time_cap_s, target, clock)[0]


def measure_interleaved(runs: list[Callable[[], None]], warmup: int, min_repeats: int, max_repeats: int,
                        time_cap_s: float, target: float = TARGET_RELATIVE_HALF_WIDTH,
                        clock: Callable[[], float] = time.perf_counter) -> list[LatencyStats]:
    """Several models timed in turn (A B A B ...), so a drift of the machine's speed shifts them alike: their
    ratio stays honest. Stops when every interval meets the target, or at a cap (the time cap is per model)."""
    for run_once in runs:
        for _ in range(warmup):
            run_once()
    samples: list[list[float]] = [[] for _ in runs]
    started = clock()
    min_repeats = max(min_repeats, MIN_SAMPLES_FOR_INTERVAL)
    while True:
        for run_once, taken in zip(runs, samples):
            t0 = clock()
            run_once()
            taken.append((clock() - t0) * 1000.0)
        n = len(samples[0])
        if n >= min_repeats and all(relative_half_width(taken) <= target for taken in samples):
            reason = "interval within target"
        elif n >= max_repeats:
            reason = "repeat cap"
        elif clock() - started >= time_cap_s * len(runs) and n >= 3:
            reason = "time cap"
        else:
            continue
        return [summarize(taken, reason, target) for taken in samples]


def intervals_overlap(a: dict, b: dict) -> bool:
    return a["ci_low_ms"] <= b["ci_high_ms"] and b["ci_low_ms"] <= a["ci_high_ms"]
