"""Forecast verification of ``predict`` against trials: pure scores, no file and no process.

A prediction at a rate is a forecast: a median attainment, its 5-95 % range and the probability
that the trial passes. A trial at that rate is the outcome it forecast. A forecast is judged on
two things at once (docs/benchmarks.md, "Backtest"):

- **calibration**: do the outcomes fall where it said they would (the range covers them, the
  pass probabilities come true as often as they say);
- **sharpness**: does it say something (a narrow range, a band close to its 0.5 crossing). A
  range from 0 to 1 always covers and tells nothing; the Brier score and the widths punish it.

Every score here works on ``Case`` s (one rate: forecast and outcome) and ``ShapeCases`` (the
rates of one workload shape, with the predicted band); ``score`` gathers them for one variant.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tools.conformance._edge_claims import measured_edge, meets_range

#: What the probe-calibrated forecast of vLLM's server is held to (docs/benchmarks.md).
COVERAGE_MIN = 0.8
MEAN_WIDTH_MAX = 0.3
BAND_HALF_WIDTH_MAX = 0.10
BRIER_SHARE_MAX = 0.5
CROSSING_ERROR_MAX = 0.10


@dataclass(frozen=True)
class Forecast:
    """What ``predict`` said at one rate."""

    median: float
    low: float
    high: float
    pass_probability: float

    @property
    def width(self) -> float:
        """How wide the 5-95 % range is."""
        return self.high - self.low


@dataclass(frozen=True)
class Case:
    """One rate: the forecast and the trial's outcome (``good`` of ``requests`` met the SLO)."""

    rate: float
    forecast: Forecast
    good: int
    requests: int

    @property
    def attainment(self) -> float:
        """The measured attainment."""
        return self.good / self.requests

    def passed(self, target: float) -> bool:
        """The trial met the attainment target."""
        return self.attainment >= target

    @property
    def covered(self) -> bool:
        """The measured attainment's Wilson 95 % interval meets the predicted range."""
        return meets_range(self.good, self.requests, self.forecast.low, self.forecast.high)

    @property
    def strictly_covered(self) -> bool:
        """The measured attainment itself lies inside the predicted range."""
        return self.forecast.low <= self.attainment <= self.forecast.high

    @property
    def error(self) -> float:
        """|predicted median - measured attainment|."""
        return abs(self.forecast.median - self.attainment)


@dataclass(frozen=True)
class Band:
    """The predicted edge as a band: the highest rates passing with probability 0.9, 0.5, 0.1."""

    pass_90: float | None
    pass_50: float | None
    pass_10: float | None

    def half_width(self) -> float | None:
        """Half the 0.9-0.1 band over its 0.5 crossing (None when a crossing is missing)."""
        if self.pass_90 is None or self.pass_50 is None or self.pass_10 is None:
            return None
        if self.pass_50 <= 0:
            return None
        return (self.pass_10 - self.pass_90) / 2 / self.pass_50


@dataclass(frozen=True)
class ShapeCases:
    """One workload shape: its rates and its predicted band."""

    name: str
    band: Band
    cases: tuple[Case, ...]
    #: (rate, measured attainment) of every scored trial of the shape, forecast there or not.
    outcomes: tuple[tuple[float, float], ...]

    def bracket(self, target: float) -> tuple[float, float]:
        """The measured edge: highest passing rate below the lowest missing one, and that one
        (0 and infinity where there is none)."""
        return measured_edge(self.outcomes, target)

    def crossing_error(self, target: float) -> float | None:
        """The predicted 0.5 crossing against the measured bracket (``crossing_error``)."""
        return crossing_error(self.band.pass_50, self.bracket(target))


def crossing_error(crossing: float | None, bracket: tuple[float, float]) -> float | None:
    """0 when the crossing lies inside the bracket [low, high], else its distance to the nearer
    end relative to that end; None without a crossing."""
    if crossing is None:
        return None
    low, high = bracket
    if crossing < low:
        return (low - crossing) / low
    if crossing > high:
        return (crossing - high) / high
    return 0.0


def brier(cases: Iterable[Case], target: float) -> float | None:
    """Mean squared difference between pass probability and outcome (1 passed, 0 missed)."""
    terms = [(c.forecast.pass_probability - c.passed(target)) ** 2 for c in cases]
    return sum(terms) / len(terms) if terms else None


def constant_brier(cases: Iterable[Case], target: float, probability: float) -> float | None:
    """The Brier score of forecasting ``probability`` everywhere (the naive baseline)."""
    terms = [(probability - c.passed(target)) ** 2 for c in cases]
    return sum(terms) / len(terms) if terms else None


def pass_rate(attainments: Iterable[float], target: float) -> float | None:
    """The share of trials that passed: the naive baseline's constant forecast."""
    passed = [a >= target for a in attainments]
    return sum(passed) / len(passed) if passed else None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _worst(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


@dataclass(frozen=True)
class Scores:
    """One forecast set of one variant (every shape's rates together)."""

    cases: int
    brier: float | None
    baseline_brier: float | None
    base_rate: float | None
    coverage: float | None
    strict_coverage: float | None
    mean_width: float | None
    mean_error: float | None
    worst_error: float | None
    crossing_errors: dict[str, float | None]
    half_widths: dict[str, float | None]

    @property
    def crossing_error(self) -> float | None:
        """The worst shape's."""
        return _worst(self.crossing_errors.values())

    @property
    def half_width(self) -> float | None:
        """The widest shape's band."""
        return _worst(self.half_widths.values())

    def targets(self) -> dict[str, bool | None]:
        """Each target met (True), missed (False) or not judged (None: nothing to judge)."""
        brier_met = (
            None
            if self.brier is None or self.baseline_brier is None
            else self.brier < BRIER_SHARE_MAX * self.baseline_brier
        )
        return {
            "coverage": None if self.coverage is None else self.coverage >= COVERAGE_MIN,
            "mean_width": _at_most(MEAN_WIDTH_MAX, self.mean_width),
            "band_half_width": _at_most(BAND_HALF_WIDTH_MAX, self.half_width),
            "brier": brier_met,
            "crossing_error": _at_most(CROSSING_ERROR_MAX, self.crossing_error),
        }

    def figures(self) -> dict[str, object]:
        """Every figure, for the JSON file."""
        return {
            "cases": self.cases,
            "brier": self.brier,
            "baseline_brier": self.baseline_brier,
            "base_rate": self.base_rate,
            "coverage": self.coverage,
            "strict_coverage": self.strict_coverage,
            "mean_width": self.mean_width,
            "mean_abs_error": self.mean_error,
            "worst_abs_error": self.worst_error,
            "crossing_errors": self.crossing_errors,
            "crossing_error": self.crossing_error,
            "band_half_widths": self.half_widths,
            "band_half_width": self.half_width,
            "targets": self.targets(),
        }


def _at_most(bound: float, value: float | None) -> bool | None:
    return None if value is None else value <= bound


def score(shapes: Sequence[ShapeCases], target: float, base_rate: float | None) -> Scores:
    """Every score of one forecast set over its shapes; ``base_rate`` is the naive baseline's
    constant forecast (the pass rate of all the variant's trials)."""
    cases = [c for s in shapes for c in s.cases]
    return Scores(
        cases=len(cases),
        brier=brier(cases, target),
        baseline_brier=None if base_rate is None else constant_brier(cases, target, base_rate),
        base_rate=base_rate,
        coverage=_mean([float(c.covered) for c in cases]),
        strict_coverage=_mean([float(c.strictly_covered) for c in cases]),
        mean_width=_mean([c.forecast.width for c in cases]),
        mean_error=_mean([c.error for c in cases]),
        worst_error=max((c.error for c in cases), default=None),
        crossing_errors={s.name: s.crossing_error(target) for s in shapes},
        half_widths={s.name: s.band.half_width() for s in shapes},
    )


def finite(value: float) -> float | None:
    """``value``, or None for infinity (JSON has no infinity)."""
    return None if math.isinf(value) else value
