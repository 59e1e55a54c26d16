"""The backtest's forecast scores (bench/_forecast_scores.py): calibration and sharpness of
``predict``'s forecasts against trials, on hand-made cases whose scores are known."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
TARGET = 0.9


@pytest.fixture
def fs(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO))
    # the repo root is on sys.path only inside this fixture
    import bench._forecast_scores as module

    return module


def _case(fs: ModuleType, rate: float, good: int, median: float, low: float, high: float,
          p: float) -> object:  # fmt: skip
    return fs.Case(rate, fs.Forecast(median, low, high, p), good, 60)


def _shape(fs: ModuleType, cases: list[object], band: tuple[float, float, float]) -> object:
    outcomes = tuple((c.rate, c.attainment) for c in cases)  # type: ignore[attr-defined]
    return fs.ShapeCases("512x32", fs.Band(*band), tuple(cases), outcomes)


def test_a_sharp_true_forecast_meets_every_target(fs: ModuleType) -> None:
    """Pass probabilities that come true, narrow ranges holding each outcome, a band within 10 %
    of a 0.5 crossing inside the measured bracket: every target met, Brier near 0."""
    cases = [
        _case(fs, 1.0, 60, 1.0, 0.95, 1.0, 1.0),
        _case(fs, 2.0, 58, 0.95, 0.9, 1.0, 0.95),
        _case(fs, 3.0, 30, 0.5, 0.35, 0.65, 0.0),
        _case(fs, 4.0, 3, 0.05, 0.0, 0.15, 0.0),
    ]
    shape = _shape(fs, cases, (1.9, 2.1, 2.2))
    scores = fs.score([shape], TARGET, fs.pass_rate([c.attainment for c in cases], TARGET))
    assert scores.brier == pytest.approx((0.05**2) / 4)
    assert scores.base_rate == 0.5
    assert scores.baseline_brier == pytest.approx(0.25)
    assert scores.coverage == 1.0 and scores.strict_coverage == 1.0
    assert scores.mean_width == pytest.approx((0.05 + 0.1 + 0.3 + 0.15) / 4)
    assert scores.crossing_errors == {"512x32": 0.0}  # 2.1 inside the bracket [2, 3]
    assert scores.half_width == pytest.approx(0.3 / 2 / 2.1)
    assert all(scores.targets().values()), scores.targets()


def test_a_range_that_always_covers_still_scores_badly(fs: ModuleType) -> None:
    """A 0-1 range and a pass probability of one half at every rate: full coverage, yet the mean
    width, the Brier score (no better than the naive baseline) and the band miss their targets."""
    outcomes = [(1.0, 60), (2.0, 58), (3.0, 30), (4.0, 3)]
    cases = [_case(fs, r, g, 0.5, 0.0, 1.0, 0.5) for r, g in outcomes]
    shape = _shape(fs, cases, (0.5, 2.5, 5.0))
    scores = fs.score([shape], TARGET, 0.5)
    assert scores.coverage == 1.0
    assert scores.brier == pytest.approx(0.25) == scores.baseline_brier
    targets = scores.targets()
    assert targets["coverage"] is True
    assert targets["mean_width"] is False
    assert targets["brier"] is False
    assert targets["band_half_width"] is False
    assert targets["crossing_error"] is True  # 2.5 lies in [2, 3]: a wide band can centre well


def test_coverage_counts_the_trials_own_sampling_error(fs: ModuleType) -> None:
    """51 of 60 (0.85) against a range of [0.9, 1.0]: outside strictly, but its Wilson 95 %
    interval (about 0.74-0.92) meets the range; 40 of 60 does not."""
    near = _case(fs, 1.0, 51, 0.95, 0.9, 1.0, 0.9)
    far = _case(fs, 1.0, 40, 0.95, 0.9, 1.0, 0.9)
    assert near.covered and not near.strictly_covered  # type: ignore[attr-defined]
    assert not far.covered and not far.strictly_covered  # type: ignore[attr-defined]
    shape = _shape(fs, [near, far], (1, 1, 1))
    scores = fs.score([shape], TARGET, 0.0)
    assert scores.coverage == 0.5 and scores.strict_coverage == 0.0
    assert scores.mean_error == pytest.approx((0.1 + (0.95 - 40 / 60)) / 2)
    assert scores.worst_error == pytest.approx(0.95 - 40 / 60)


@pytest.mark.parametrize(
    ("crossing", "bracket", "error"),
    [
        (2.5, (2.0, 3.0), 0.0),
        (2.0, (2.0, 3.0), 0.0),
        (1.5, (2.0, 3.0), 0.25),  # below: relative to the low end
        (3.6, (2.0, 3.0), 0.2),  # above: relative to the high end
        (9.0, (2.0, float("inf")), 0.0),  # nothing missed: an open bracket holds any higher one
        (None, (2.0, 3.0), None),
    ],
)
def test_the_crossing_error_is_the_distance_to_the_nearer_end(
    fs: ModuleType, crossing: float | None, bracket: tuple[float, float], error: float | None
) -> None:
    assert fs.crossing_error(crossing, bracket) == (None if error is None else pytest.approx(error))


def test_the_bracket_comes_from_every_scored_trial_not_the_forecasts_cases(fs: ModuleType) -> None:
    """A rate whose forecast was refused still bounds the measured edge: the shape's outcomes,
    not its cases, give the bracket (here a miss at 3.0 that no forecast scored)."""
    cases = (_case(fs, 2.0, 60, 1.0, 0.9, 1.0, 1.0),)
    shape = fs.ShapeCases("x", fs.Band(2.5, 2.8, 3.1), cases, ((2.0, 1.0), (3.0, 0.2)))
    assert shape.bracket(TARGET) == (2.0, 3.0)
    assert shape.crossing_error(TARGET) == 0.0


def test_the_baseline_is_the_pass_rate_forecast_everywhere(fs: ModuleType) -> None:
    """Three passes of four: the constant 0.75 scores 0.75 x 0.25 = 0.1875 on those outcomes;
    nothing to score gives None, not a number."""
    attainments = [1.0, 0.95, 0.9, 0.1]
    rate = fs.pass_rate(attainments, TARGET)
    assert rate == 0.75
    cases = [_case(fs, i, round(a * 60), a, a, a, 0.5) for i, a in enumerate(attainments)]
    assert fs.constant_brier(cases, TARGET, rate) == pytest.approx(0.1875)
    assert fs.brier([], TARGET) is None and fs.pass_rate([], TARGET) is None
    empty = fs.score([], TARGET, None)
    assert empty.cases == 0 and set(empty.targets().values()) == {None}


def test_a_band_without_a_crossing_has_no_width(fs: ModuleType) -> None:
    assert fs.Band(None, 2.0, 3.0).half_width() is None
    assert fs.Band(1.8, 2.0, 2.2).half_width() == pytest.approx(0.1)
