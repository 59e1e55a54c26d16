"""The arithmetic of a comparison: Newcombe's interval for the difference of two proportions,
bootstrap intervals for the shift of a quantile and for the ratio of two medians, a ratio's
interval from two relative spreads, and the smallest difference a sample of this size detects
(80 % power at the chosen confidence)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from narwhal_trial._errors import TrialUsageError
from narwhal_trial._stats import wilson_interval
from narwhal_trial.documents._comparison import Verdict

POWER = 0.8
"""The power of the minimum detectable effect: the difference found 80 % of the time."""
RESAMPLES = 2000
"""Bootstrap resamples of each side per quantile."""


CONFIDENCES = (0.5, 0.999)
"""The confidences a comparison takes, both ends included."""


def check_confidence(confidence: float) -> None:
    """TrialUsageError naming ``--confidence`` when it lies outside :data:`CONFIDENCES`."""
    low, high = CONFIDENCES
    if not low <= confidence <= high:
        raise TrialUsageError(f"--confidence must be in [{low}, {high}], got {confidence:g}")


def z_of(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (1.96 at 0.95)."""
    if not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must be in [0.5, 1), got {confidence}")
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def verdict_of(low: float, high: float, *, no_change: float, higher_is_better: bool) -> Verdict:
    """Better or worse when the interval ``[low, high]`` lies wholly on one side of
    ``no_change`` (0 for a difference, 1 for a ratio); else no detectable difference."""
    if low > no_change:
        return "better" if higher_is_better else "worse"
    if high < no_change:
        return "worse" if higher_is_better else "better"
    return "no detectable difference"


@dataclass(frozen=True, slots=True)
class Estimate:
    """A difference (B minus A), its interval at the confidence, and the smallest difference a
    sample of this size detects with 80 % power (a half-width scaled to that power)."""

    difference: float
    low: float
    high: float
    detectable: float


def proportion_difference(
    good_a: int, n_a: int, good_b: int, n_b: int, confidence: float
) -> Estimate:
    """``good_b / n_b - good_a / n_a`` with Newcombe's hybrid score interval (his method 10: the
    two Wilson intervals combined), which keeps its coverage near 0 and 1 where the Wald
    interval does not; the detectable difference is scaled from its wider half."""
    if n_a <= 0 or n_b <= 0:
        raise ValueError(f"both sides need requests, got {n_a} and {n_b}")
    z = z_of(confidence)
    p_a, p_b = good_a / n_a, good_b / n_b
    low_a, high_a = wilson_interval(good_a, n_a, z)
    low_b, high_b = wilson_interval(good_b, n_b, z)
    difference = p_b - p_a
    low = difference - math.sqrt((p_b - low_b) ** 2 + (high_a - p_a) ** 2)
    high = difference + math.sqrt((high_b - p_b) ** 2 + (p_a - low_a) ** 2)
    detectable = _detectable(difference - low, high - difference, z)
    return Estimate(difference, max(-1.0, low), min(1.0, high), detectable)


def quantile_shift(
    a: Sequence[float],
    b: Sequence[float],
    quantile: float,
    confidence: float,
    rng: np.random.Generator,
    resamples: int = RESAMPLES,
) -> Estimate:
    """``quantile(b) - quantile(a)`` with a percentile bootstrap interval: each side resampled
    with replacement, apart, ``resamples`` times; the detectable shift is scaled from the
    interval's wider half."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"a quantile shift needs two values a side, got {len(a)} and {len(b)}")
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    difference = float(np.quantile(xb, quantile) - np.quantile(xa, quantile))
    draws_a = _resampled(xa, quantile, rng, resamples)  # A first: a seed gives one interval
    draws_b = _resampled(xb, quantile, rng, resamples)
    low, high = _percentile_interval(draws_b - draws_a, confidence)
    detectable = _detectable(difference - low, high - difference, z_of(confidence))
    return Estimate(difference, low, high, detectable)


@dataclass(frozen=True, slots=True)
class Ratio:
    """A ratio (B over A) and its interval at the confidence."""

    ratio: float
    low: float
    high: float


def median_ratio(
    a: Sequence[float],
    b: Sequence[float],
    confidence: float,
    rng: np.random.Generator,
    resamples: int = RESAMPLES,
) -> Ratio:
    """``median(b) / median(a)`` of positive values with a percentile bootstrap interval: each
    side resampled with replacement, apart, ``resamples`` times."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"a median ratio needs two values a side, got {len(a)} and {len(b)}")
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if np.any(xa <= 0) or np.any(xb <= 0):
        raise ValueError("a median ratio needs positive values")
    ratio = float(np.median(xb) / np.median(xa))
    draws_a = _resampled(xa, 0.5, rng, resamples)
    draws_b = _resampled(xb, 0.5, rng, resamples)
    return Ratio(ratio, *_percentile_interval(draws_b / draws_a, confidence))


def spread_ratio(ratio: float, rel_a: float, rel_b: float, confidence: float) -> Ratio:
    """``ratio`` with the interval two independent relative standard errors give it: ``ratio``
    times ``exp(±z·√(rel_a² + rel_b²))`` (the errors taken on the log scale)."""
    half = z_of(confidence) * float(np.hypot(rel_a, rel_b))
    return Ratio(ratio, ratio * float(np.exp(-half)), ratio * float(np.exp(half)))


def _resampled(
    x: np.ndarray[Any, np.dtype[np.float64]], quantile: float, rng: np.random.Generator, n: int
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The ``quantile`` of each of ``n`` bootstrap resamples of ``x`` (with replacement)."""
    return np.quantile(x[rng.integers(0, len(x), (n, len(x)))], quantile, axis=1)


def _percentile_interval(
    draws: np.ndarray[Any, np.dtype[np.float64]], confidence: float
) -> tuple[float, float]:
    """The central ``confidence`` share of ``draws``: a percentile bootstrap interval."""
    tail = (1 - confidence) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return float(low), float(high)


def _detectable(below: float, above: float, z: float) -> float:
    """The smallest difference found with 80 % power: the interval's wider half, scaled from
    the confidence's z to z plus the power's (a half width is z standard errors)."""
    return max(below, above) * (z + NormalDist().inv_cdf(POWER)) / z
