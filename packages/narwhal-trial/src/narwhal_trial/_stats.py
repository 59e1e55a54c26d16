"""The trial's arithmetic: exact-decimal pass threshold, the Wilson interval, percentiles."""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_CEILING, Decimal, InvalidOperation

import numpy as np

WILSON_Z_95 = 1.959963984540054
"""The two-sided 95 % normal quantile used for the attainment interval."""

PERCENTILES = (50, 90, 95, 99)


def parse_fraction(text: str, what: str) -> Decimal:
    """Parse an attainment such as ``"0.95"`` exactly; it must lie in (0, 1]."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation as exc:
        raise ValueError(f"{what} must be a decimal number, got {text!r}") from exc
    if not value.is_finite() or value <= 0 or value > 1:
        raise ValueError(f"{what} must be in (0, 1], got {text!r}")
    return value


def parse_seconds(text: str, what: str) -> Decimal:
    """Parse a latency bound in seconds exactly; it must be finite and positive."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation as exc:
        raise ValueError(f"{what} must be a decimal number of seconds, got {text!r}") from exc
    if not value.is_finite() or value <= 0:
        raise ValueError(f"{what} must be a positive number of seconds, got {text!r}")
    return value


def required_good(attainment: Decimal, requests: int) -> int:
    """ceil(attainment x requests) in exact decimal arithmetic: 0.55 x 100 needs 55, not 56."""
    return int((attainment * requests).to_integral_value(rounding=ROUND_CEILING))


def wilson_interval(successes: int, trials: int, z: float = WILSON_Z_95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion; ``(0, 1)`` when there are no trials."""
    if trials <= 0:
        return (0.0, 1.0)
    if not 0 <= successes <= trials:
        raise ValueError(f"successes {successes} not within 0..{trials}")
    p = successes / trials
    z2 = z * z
    denom = 1.0 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials))
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return (low, high)


def binomial_width(trials: int, p: float, low: float = 0.05, high: float = 0.95) -> float:
    """The exact ``low``-``high`` width of Binomial(``trials``, ``p``) / ``trials``: the
    nearest-rank quantiles (the smallest count whose cumulative probability reaches each level)
    apart, over ``trials``; 0 at ``p`` 0 or 1 or without trials. The width a trial of that many
    requests has even when each is good with probability ``p`` exactly."""
    if trials <= 0 or not 0.0 < p < 1.0:
        return 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    whole = math.lgamma(trials + 1)
    cumulative, first = 0.0, None
    for k in range(trials + 1):
        cumulative += math.exp(
            whole
            - math.lgamma(k + 1)
            - math.lgamma(trials - k + 1)
            + k * log_p
            + (trials - k) * log_q
        )
        if first is None and cumulative >= low:
            first = k
        if cumulative >= high:
            return (k - (k if first is None else first)) / trials
    return (trials - (trials if first is None else first)) / trials


def within_ns(interval_ns: int, bound_s: Decimal) -> bool:
    """True when an interval in integer ns is at most a decimal bound in seconds, exactly."""
    return Decimal(interval_ns) <= bound_s * 1_000_000_000


def tpot_within(span_ns: int, tokens: int, bound_s: Decimal) -> bool:
    """True when span_ns / (tokens - 1) ≤ bound_s, compared exactly (no division)."""
    if tokens <= 1:
        return True  # vllm bench serve: TPOT is 0 with one output token
    return Decimal(span_ns) <= bound_s * 1_000_000_000 * (tokens - 1)


def distribution(values: Sequence[float]) -> dict[str, float | int | None]:
    """count, mean, max, p50/p90/p95/p99 of ``values`` (linear interpolation); None when empty."""
    out: dict[str, float | int | None] = {"count": len(values)}
    if not values:
        out.update({"mean": None, "max": None} | {f"p{q}": None for q in PERCENTILES})
        return out
    arr = np.asarray(values, dtype=np.float64)
    out["mean"] = float(arr.mean())
    out["max"] = float(arr.max())
    for q, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES), strict=True):
        out[f"p{q}"] = float(v)
    return out
