"""The comparison's nominal 95 % intervals cover the true difference (docs/design.md §17).

Each setting draws 200 synthetic pairs of samples of 200 requests a side from known
distributions and counts how often the interval holds the true difference (B minus A): at least
180 of 200 (90 %) must. Fixed seeds make every count the same on every run.

The bootstrap runs 500 resamples here rather than the command's 2,000: 200 pairs of six settings
at 2,000 would take most of a minute on a busy machine, and the resamples only fix how finely
each interval's ends are read off the bootstrap distribution, not what that distribution is (the
coverage at 2,000 was within a few pairs of these counts when this test was written).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from narwhal_trial.compare._intervals import proportion_difference, quantile_shift

N = 200
"""Requests a side."""
PAIRS = 200
"""Synthetic pairs per setting."""
COVERED = 180
"""At least 90 % of the pairs' intervals hold the truth."""
RESAMPLES = 500
"""Bootstrap resamples in this file (the module says why not the command's 2,000)."""


@pytest.mark.parametrize(
    ("seed", "p_a", "p_b"),
    [(1, 0.95, 0.93), (2, 0.99, 0.99), (3, 0.80, 0.85), (4, 0.999, 0.99)],
)
def test_the_attainment_interval_covers_the_true_difference(
    seed: int, p_a: float, p_b: float
) -> None:
    """Binomial good counts at the true attainments; Newcombe's interval holds ``p_b - p_a``."""
    rng = np.random.default_rng(seed)
    good_a, good_b = rng.binomial(N, p_a, PAIRS), rng.binomial(N, p_b, PAIRS)
    covered = 0
    for ga, gb in zip(good_a.tolist(), good_b.tolist(), strict=True):
        e = proportion_difference(ga, N, gb, N, 0.95)
        assert e.low <= e.difference <= e.high
        covered += e.low <= p_b - p_a <= e.high
    assert covered >= COVERED, f"{covered}/{PAIRS}"


LogNormal = tuple[float, float]
"""``(median, sigma)``: ``exp(N(log median, sigma))``."""

SHIFTS: dict[str, tuple[LogNormal, LogNormal]] = {
    # TTFT on a fleet with headroom: B 10 % slower and a little more spread
    "ttft": ((0.4, 0.25), (0.44, 0.3)),
    # TTFT with queueing: a long right tail, B's median 25 % higher
    "ttft-queued": ((0.4, 1.0), (0.5, 1.0)),
    # TPOT: B's decode 15 % slower throughout
    "tpot": ((0.02, 0.1), (0.023, 0.1)),
}


def _quantile(d: LogNormal, q: float) -> float:
    median, sigma = d
    return median * float(np.exp(sigma * NormalDist().inv_cdf(q)))


def _draws(seed: int, a: LogNormal, b: LogNormal) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    xa = rng.lognormal(np.log(a[0]), a[1], (PAIRS, N))
    xb = rng.lognormal(np.log(b[0]), b[1], (PAIRS, N))
    return xa, xb


@pytest.mark.parametrize("quantile", [0.5, 0.99])
@pytest.mark.parametrize("setting", sorted(SHIFTS))
def test_the_quantile_shift_interval_covers_the_true_shift(setting: str, quantile: float) -> None:
    """Lognormal latencies a side; the bootstrap interval holds the analytic quantile shift."""
    a, b = SHIFTS[setting]
    truth = _quantile(b, quantile) - _quantile(a, quantile)
    xa, xb = _draws(sorted(SHIFTS).index(setting) + 10, a, b)
    boot = np.random.default_rng(99)
    covered = 0
    for sa, sb in zip(xa, xb, strict=True):
        e = quantile_shift(sa.tolist(), sb.tolist(), quantile, 0.95, boot, resamples=RESAMPLES)
        assert e.low <= e.high
        covered += e.low <= truth <= e.high
    assert covered >= COVERED, f"{covered}/{PAIRS}"


def test_a_fifteen_percent_slower_decode_is_found_most_of_the_time() -> None:
    """Coverage alone would pass an interval of everything: the same intervals also find B's
    15 % slower TPOT median (an interval above zero) in at least 80 % of the pairs, and never
    call it faster."""
    a, b = SHIFTS["tpot"]
    xa, xb = _draws(7, a, b)
    boot = np.random.default_rng(98)
    found = 0
    for sa, sb in zip(xa, xb, strict=True):
        e = quantile_shift(sa.tolist(), sb.tolist(), 0.5, 0.95, boot, resamples=RESAMPLES)
        assert e.high > 0
        found += e.low > 0
    assert found >= 0.8 * PAIRS, f"{found}/{PAIRS}"
