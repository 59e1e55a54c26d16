"""Synthetic arrivals and lengths (``narwhal_trial.workload._arrivals``): the constant schedule
agrees with the runbook trial's, the random ones are seeded and have the asked mean (statistical
checks with fixed seeds and loose bounds: deterministic, never timed)."""

from __future__ import annotations

import numpy as np
import pytest

from narwhal_trial._errors import TrialUsageError
from narwhal_trial.workload._arrivals import (
    LengthSpec,
    arrival_offsets_s,
    draw_lengths,
    offsets_ns,
    parse_length_spec,
)
from narwhal_trial.workload._schedule import due_offsets_ns

DRAWS = 10_000
RATES = (0.5, 1.0, 3.0, 7.0, 1 / 3, 2.5, 33.3, 123.456, 1000.0, 6.02)


@pytest.mark.parametrize("rate", RATES)
def test_constant_is_the_trial_schedule(rate: float) -> None:
    """In nanoseconds, exactly ``due_offsets_ns``; in seconds, ``i / rate`` to the nanosecond."""
    offsets = arrival_offsets_s(DRAWS, rate)
    assert offsets.dtype == np.float64
    assert offsets_ns(offsets) == due_offsets_ns(DRAWS, rate)
    assert np.abs(offsets - np.arange(DRAWS) / rate).max() < 1e-9
    assert offsets[0] == 0.0


def test_constant_runbook_rate() -> None:
    assert arrival_offsets_s(4, 0.5).tolist() == [0.0, 2.0, 4.0, 6.0]
    assert offsets_ns(arrival_offsets_s(3, 3.0))[2] == 666_666_667


@pytest.mark.parametrize(("kind", "cv"), [("poisson", None), ("gamma", 0.5), ("gamma", 2.0)])
@pytest.mark.parametrize("rate", [0.5, 4.0, 250.0])
def test_random_arrivals_have_the_asked_rate(kind: str, cv: float | None, rate: float) -> None:
    """The mean gap is 1 / rate within 5 % over 10,000 draws (the standard error is at most 2 %
    for CV 2); first at 0, never going back."""
    offsets = arrival_offsets_s(DRAWS + 1, rate, kind, burstiness=cv, seed=7)  # type: ignore[arg-type]
    assert offsets[0] == 0.0
    gaps = np.diff(offsets)
    assert (gaps >= 0).all()
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.05)
    expected_cv = 1.0 if cv is None else cv
    assert gaps.std() / gaps.mean() == pytest.approx(expected_cv, rel=0.1)


def test_gamma_cv_1_is_poisson_in_distribution() -> None:
    """Same mean and CV, and close quantiles of the gaps (default burstiness: 1)."""
    gamma = np.diff(arrival_offsets_s(DRAWS + 1, 2.0, "gamma", seed=1))
    poisson = np.diff(arrival_offsets_s(DRAWS + 1, 2.0, "poisson", seed=2))
    for q in (0.1, 0.5, 0.9):
        assert np.quantile(gamma, q) == pytest.approx(np.quantile(poisson, q), rel=0.1)
    assert gamma.mean() == pytest.approx(poisson.mean(), rel=0.05)


@pytest.mark.parametrize(("kind", "cv"), [("poisson", None), ("gamma", 3.0)])
def test_random_arrivals_are_seeded(kind: str, cv: float | None) -> None:
    a = arrival_offsets_s(500, 10.0, kind, burstiness=cv, seed=42)  # type: ignore[arg-type]
    b = arrival_offsets_s(500, 10.0, kind, burstiness=cv, seed=42)  # type: ignore[arg-type]
    c = arrival_offsets_s(500, 10.0, kind, burstiness=cv, seed=43)  # type: ignore[arg-type]
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("kind", ["constant", "poisson", "gamma"])
def test_small_counts(kind: str) -> None:
    assert arrival_offsets_s(0, 1.0, kind).tolist() == []  # type: ignore[arg-type]
    assert arrival_offsets_s(1, 1.0, kind).tolist() == [0.0]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": -1, "rate": 1.0}, "must not be negative"),
        ({"n": 3, "rate": 0.0}, "rate must be a number > 0"),
        ({"n": 3, "rate": float("inf")}, "rate must be a number > 0"),
        ({"n": 3, "rate": 1.0, "kind": "gamma", "burstiness": 0.0}, r"burstiness .* must be > 0"),
        ({"n": 3, "rate": 1.0, "kind": "gamma", "burstiness": -1.0}, "must be > 0, got -1"),
        ({"n": 3, "rate": 1.0, "kind": "gamma", "burstiness": float("nan")}, "must be > 0"),
        ({"n": 3, "rate": 1.0, "kind": "poisson", "burstiness": 1.0}, "gamma arrivals only"),
        ({"n": 3, "rate": 1.0, "burstiness": 1.0}, "gamma arrivals only, not constant"),
        ({"n": 3, "rate": 1.0, "kind": "bursty"}, "unknown arrival kind 'bursty'"),
    ],
)
def test_arrival_refusals(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(TrialUsageError, match=match) as info:
        arrival_offsets_s(**kwargs)  # type: ignore[arg-type]
    assert "\n" not in info.value.message


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("8192", LengthSpec("fixed", 8192)),
        ("fixed:128", LengthSpec("fixed", 128)),
        (" uniform:100-200 ", LengthSpec("uniform", 100, 200)),
        ("uniform:5-5", LengthSpec("uniform", 5, 5)),
        ("normal:1000,250.5", LengthSpec("normal", 1000, 250.5)),
        ("lognormal:800,0.6", LengthSpec("lognormal", 800, 0.6)),
        ("normal:3,0", LengthSpec("normal", 3, 0)),
    ],
)
def test_parse_length_spec(text: str, spec: LengthSpec) -> None:
    assert parse_length_spec(text, "--input-tokens") == spec
    assert parse_length_spec(str(spec), "--input-tokens") == spec  # str() reads back


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "not a length; use N, uniform:LO-HI, normal:MEAN,SD or lognormal:MEDIAN,SIGMA"),
        ("abc", "not a length"),
        ("0", "lengths must be at least 1 token, got 0"),
        ("12.5", "token counts must be integers"),
        ("zipf:1,2", "unknown length kind 'zipf'"),
        ("uniform:200-100", "HI (100) must not be below LO (200)"),
        ("uniform:0-100", "lengths must be at least 1 token, got 0"),
        ("uniform:100", "not a length"),
        ("uniform:1-2-3", "not a length"),
        ("normal:100", "not a length"),
        ("normal:0,5", "MEAN must be > 0, got 0"),
        ("normal:100,-1", "SD must not be negative, got -1"),
        ("lognormal:-3,1", "MEDIAN must be > 0, got -3"),
        ("lognormal:100,x", "not a length"),
        ("lognormal:100,inf", "parameters must be finite numbers"),
    ],
)
def test_parse_length_spec_refusals(text: str, problem: str) -> None:
    with pytest.raises(TrialUsageError) as info:
        parse_length_spec(text, "--output-tokens")
    message = info.value.message
    assert message.startswith(f"--output-tokens {text!r}: {problem}")
    assert "\n" not in message


def test_length_spec_checks_itself() -> None:
    with pytest.raises(ValueError, match="HI"):
        LengthSpec("uniform", 10, 5)
    with pytest.raises(ValueError, match="SIGMA"):
        LengthSpec("lognormal", 10, -1)


def test_draw_lengths_fixed_and_seeded() -> None:
    fixed = draw_lengths(5, LengthSpec("fixed", 128), seed=3)
    assert fixed.dtype == np.int64
    assert fixed.tolist() == [128] * 5
    spec = parse_length_spec("lognormal:800,0.6", "--input-tokens")
    assert np.array_equal(draw_lengths(300, spec, seed=9), draw_lengths(300, spec, seed=9))
    assert not np.array_equal(draw_lengths(300, spec, seed=9), draw_lengths(300, spec, seed=10))
    assert draw_lengths(0, spec).tolist() == []
    with pytest.raises(TrialUsageError, match="must not be negative"):
        draw_lengths(-1, spec)


def test_draw_lengths_distributions() -> None:
    """Means and medians close to the asked ones over 10,000 draws; all integers >= 1."""
    uniform = draw_lengths(DRAWS, LengthSpec("uniform", 100, 200), seed=1)
    assert uniform.min() == 100
    assert uniform.max() == 200  # both ends included
    assert uniform.mean() == pytest.approx(150, rel=0.01)
    normal = draw_lengths(DRAWS, LengthSpec("normal", 1000, 100), seed=2)
    assert normal.mean() == pytest.approx(1000, rel=0.01)
    assert normal.std() == pytest.approx(100, rel=0.05)
    lognormal = draw_lengths(DRAWS, LengthSpec("lognormal", 800, 0.6), seed=3)
    assert np.median(lognormal) == pytest.approx(800, rel=0.03)
    assert lognormal.mean() == pytest.approx(800 * np.exp(0.6**2 / 2), rel=0.03)
    clipped = draw_lengths(DRAWS, LengthSpec("normal", 2, 10), seed=4)
    assert clipped.min() == 1  # clipped to at least 1
    assert (clipped == 1).mean() > 0.4
    assert draw_lengths(10, LengthSpec("normal", 3, 0)).tolist() == [3] * 10
