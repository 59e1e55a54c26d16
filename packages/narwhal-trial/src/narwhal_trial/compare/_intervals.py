"""The arithmetic of a comparison: Newcombe's interval for the difference of two proportions,
bootstrap intervals for the shift of a quantile and for the ratio of two medians, a ratio's
interval from two relative spreads, and the smallest difference a sample of this size detects
(80 % power at the chosen confidence)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from narwhal_trial._stats import wilson_interval

POWER = 0.8
"""The power of the minimum detectable effect: the difference found 80 % of the time."""
RESAMPLES = 2000
"""Bootstrap resamples of each side per quantile."""


def z_of(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (1.96 at 0.95)."""
    if not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must be in [0.5, 1), got {confidence}")
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


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
    draws_a = np.quantile(xa[rng.integers(0, len(xa), (resamples, len(xa)))], quantile, axis=1)
    draws_b = np.quantile(xb[rng.integers(0, len(xb), (resamples, len(xb)))], quantile, axis=1)
    shifts = draws_b - draws_a
    tail = (1 - confidence) / 2
    low, high = (float(v) for v in np.quantile(shifts, [tail, 1 - tail]))
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
    draws_a = np.median(xa[rng.integers(0, len(xa), (resamples, len(xa)))], axis=1)
    draws_b = np.median(xb[rng.integers(0, len(xb), (resamples, len(xb)))], axis=1)
    tail = (1 - confidence) / 2
    low, high = (float(v) for v in np.quantile(draws_b / draws_a, [tail, 1 - tail]))
    return Ratio(ratio, low, high)


def spread_ratio(ratio: float, rel_a: float, rel_b: float, confidence: float) -> Ratio:
    """``ratio`` with the interval two independent relative standard errors give it: ``ratio``
    times ``exp(±z·√(rel_a² + rel_b²))`` (the errors taken on the log scale)."""
    half = z_of(confidence) * float(np.hypot(rel_a, rel_b))
    return Ratio(ratio, ratio * float(np.exp(-half)), ratio * float(np.exp(half)))


def _detectable(below: float, above: float, z: float) -> float:
    """The smallest difference found with 80 % power: the interval's wider half, scaled from
    the confidence's z to z plus the power's (a half width is z standard errors)."""
    return max(below, above) * (z + NormalDist().inv_cdf(POWER)) / z
