"""Unit tests of the trial's arithmetic: the exact pass threshold, Wilson interval, exact bounds."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from narwhal_trial import required_good, wilson_interval
from narwhal_trial._stats import distribution, parse_fraction, parse_seconds, tpot_within, within_ns


def test_required_good_is_exact_where_float_is_not() -> None:
    """ceil(0.55 x 100) is 55 in decimal arithmetic, though floating point gives 56."""
    assert math.ceil(0.55 * 100) == 56  # the trap this guards against
    assert required_good(Decimal("0.55"), 100) == 55


@pytest.mark.parametrize(
    ("attainment", "requests", "need"),
    [("0.95", 200, 190), ("0.95", 20, 19), ("0.95", 21, 20), ("1", 7, 7), ("0.001", 10, 1)],
)
def test_required_good_table(attainment: str, requests: int, need: int) -> None:
    """The runbook's 190 of 200 and a few rounding cases."""
    assert required_good(Decimal(attainment), requests) == need


def test_wilson_interval_known_value() -> None:
    """190 of 200 gives the Wilson 95 % interval (0.9104, 0.9726), worked by hand."""
    low, high = wilson_interval(190, 200)
    assert low == pytest.approx(0.910426, abs=1e-5)
    assert high == pytest.approx(0.972622, abs=1e-5)


def test_wilson_interval_edges() -> None:
    """All or nothing stays inside [0, 1]; no trials gives the whole range."""
    assert wilson_interval(0, 10)[0] == 0.0
    assert wilson_interval(10, 10)[1] == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(11, 10)


def test_bounds_compare_exactly_at_the_limit() -> None:
    """A TTFT or TPOT exactly at the bound is good; one nanosecond more is not."""
    assert within_ns(2_000_000_000, Decimal("2"))
    assert not within_ns(2_000_000_001, Decimal("2"))
    span = 33_300_000 * 127  # TPOT exactly 0.0333 s over 128 tokens
    assert tpot_within(span, 128, Decimal("0.0333"))
    assert not tpot_within(span + 1, 128, Decimal("0.0333"))
    assert tpot_within(10**12, 1, Decimal("0.0333"))  # one token: TPOT is 0 (vllm bench serve)


@pytest.mark.parametrize("text", ["0", "1.5", "-0.1", "nan", "x", "inf"])
def test_parse_fraction_rejects(text: str) -> None:
    """An attainment outside (0, 1] or not a number is refused."""
    with pytest.raises(ValueError, match="--attainment"):
        parse_fraction(text, "--attainment")


def test_parse_seconds() -> None:
    """Bounds keep their decimal text exactly; zero and negatives are refused."""
    assert parse_seconds("0.0333", "--tpot") == Decimal("0.0333")
    with pytest.raises(ValueError, match="positive"):
        parse_seconds("0", "--tpot")


def test_distribution() -> None:
    """Percentiles use linear interpolation; an empty list gives nulls with count 0."""
    d = distribution([1.0, 2.0, 3.0, 4.0])
    assert d["count"] == 4 and d["p50"] == 2.5 and d["max"] == 4.0 and d["mean"] == 2.5
    empty = distribution([])
    assert empty["count"] == 0 and empty["p99"] is None
