"""``edge``'s search on a fake trial runner: a rate passes below a threshold and misses above it.

No engine and no clock: each test says which verdicts the runner gives and checks the rates the
search tries, where it stops and with which exit code.
"""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from narwhal_trial.documents._records import Summary
from narwhal_trial.edge._search import (
    Bracket,
    SearchPlan,
    TrialOutcome,
    Verdict,
    band_rates,
    outcome_of,
    round_rate,
    search,
)
from narwhal_trial.run._summary import RunFacts, summarize


def _outcome(verdict: Verdict) -> TrialOutcome:
    good = 20 if verdict == "pass" else 10
    return TrialOutcome(
        verdict=verdict,
        good=good,
        required_good=19,
        requests=20,
        attainment=good / 20,
        client_schedule_valid=verdict != "invalid",
        exit_code={"pass": 0, "miss": 2, "invalid": 2, "error": 1, "interrupted": 130}[verdict],
        error="no drain" if verdict == "error" else None,
    )


class Runner:
    """Pass at or below ``edge``, miss above; ``special`` gives other verdicts to chosen trials
    (by index, from 1). Records every (index, rate, repeat) it was asked."""

    def __init__(self, edge: float, special: dict[int, Verdict] | None = None) -> None:
        self.edge = edge
        self.special = special or {}
        self.calls: list[tuple[int, float, int]] = []

    def __call__(self, index: int, rate: float, repeat: int) -> TrialOutcome:
        self.calls.append((index, rate, repeat))
        if index in self.special:
            return _outcome(self.special[index])
        return _outcome("pass" if rate <= self.edge else "miss")

    @property
    def rates(self) -> list[float]:
        return [rate for _, rate, _ in self.calls]


def test_doubling_then_bisection_brackets_the_edge() -> None:
    """From 1 request/s: 1, 2, 4, 8 (miss), then geometric midpoints until within 5 %."""
    run = Runner(5.3)
    ending = search(SearchPlan(start=1.0), run)
    assert run.rates[:4] == [1.0, 2.0, 4.0, 8.0]
    assert run.rates[4] == round_rate(math.sqrt(32))
    b = ending.bracket
    assert (ending.stop, ending.exit_code) == ("within tolerance", 0)
    assert b.highest_pass is not None and b.lowest_miss is not None
    assert b.highest_pass <= 5.3 < b.lowest_miss
    assert b.lowest_miss / b.highest_pass - 1 <= 0.05
    assert ending.trials == len(run.calls) == 8


def test_halving_when_the_start_misses() -> None:
    """From 8 request/s with the edge at 0.7: 8, 4, 2, 1 (misses), 0.5 (pass), then bisection."""
    run = Runner(0.7)
    ending = search(SearchPlan(start=8.0, tolerance=0.1), run)
    assert run.rates[:5] == [8.0, 4.0, 2.0, 1.0, 0.5]
    assert ending.exit_code == 0 and ending.bracket.lowest_miss is not None
    assert ending.bracket.highest_pass is not None
    assert ending.bracket.highest_pass <= 0.7 < ending.bracket.lowest_miss


def test_band_start_pass_then_pass_10() -> None:
    """The band (4, 5, 6): pass_50 passes, pass_10 misses, then midpoints: 4 trials."""
    run = Runner(5.5)
    ending = search(SearchPlan(start=5.0, band=(4.0, 5.0, 6.0)), run)
    assert run.rates == [5.0, 6.0, round_rate(math.sqrt(30)), run.rates[3]]
    assert ending.exit_code == 0 and ending.trials == 4


def test_band_start_miss_then_pass_90() -> None:
    """pass_50 misses, so the next trial is at pass_90."""
    run = Runner(4.5)
    search(SearchPlan(start=5.0, band=(4.0, 5.0, 6.0)), run)
    assert run.rates[:2] == [5.0, 4.0]


def test_an_exact_band_needs_two_trials() -> None:
    """A band of one rate (today's deterministic predictor) that is right within the tolerance:
    the trial above it by the tolerance misses, and the bracket is found in two trials."""
    run = Runner(5.1)
    ending = search(SearchPlan(start=5.0, band=(5.0,), tolerance=0.05), run)
    assert run.rates == [5.0, 5.25]
    assert (ending.exit_code, ending.trials) == (0, 2)


def test_a_band_far_off_gallops_with_growing_steps() -> None:
    """Beyond the band the steps grow: x1.05, x1.05², x1.05⁴ … until the edge is passed."""
    run = Runner(9.0)
    search(SearchPlan(start=5.0, band=(5.0,), tolerance=0.05), run)
    expected = [5.0]
    for k in range(4):
        expected.append(round_rate(expected[-1] * 1.05 ** (2**k), "down"))
    assert run.rates[:5] == expected
    assert expected[3] <= 9.0 < expected[4]


def test_invalid_schedule_is_repeated_never_a_miss() -> None:
    """Trial 2 (at 2/s) has an invalid schedule: trial 3 repeats 2/s, which passes; the budget
    counts both."""
    run = Runner(3.0, special={2: "invalid"})
    ending = search(SearchPlan(start=1.0, tolerance=0.5), run)
    assert run.calls[:4] == [(1, 1.0, 0), (2, 2.0, 0), (3, 2.0, 1), (4, 4.0, 0)]
    assert ending.bracket.highest_pass is not None and ending.bracket.highest_pass >= 2.0
    assert ending.exit_code == 0


def test_a_rate_that_stays_invalid_ends_the_search_with_exit_1() -> None:
    """Invalid three times in a row (the first trial and --max-repeats 2): exit 1, no miss read."""
    run = Runner(3.0, special={2: "invalid", 3: "invalid", 4: "invalid"})
    ending = search(SearchPlan(start=1.0, max_repeats=2), run)
    assert run.rates == [1.0, 2.0, 2.0, 2.0]
    assert (ending.stop, ending.exit_code) == ("invalid", 1)
    assert ending.bracket.lowest_miss is None
    assert "client_schedule_valid false" in ending.message


def test_a_blocking_error_is_repeated_then_ends_with_exit_1() -> None:
    """A trial that ended in a blocking error is repeated like an invalid one."""
    run = Runner(3.0, special={1: "error", 2: "error"})
    ending = search(SearchPlan(start=1.0, max_repeats=1), run)
    assert run.rates == [1.0, 1.0]
    assert (ending.stop, ending.exit_code) == ("error", 1)
    assert "no drain" in ending.message


def test_budget_without_a_miss_is_exit_2() -> None:
    """Every rate passes: the budget ends the search with no miss, exit 2."""
    run = Runner(1e9)
    ending = search(SearchPlan(start=1.0, max_trials=3), run)
    assert run.rates == [1.0, 2.0, 4.0]
    assert (ending.stop, ending.exit_code) == ("budget", 2)
    assert "no rate missed" in ending.message


def test_budget_with_a_wide_bracket_is_exit_2() -> None:
    """A bracket wider than the tolerance when the budget runs out: exit 2, the bracket kept."""
    run = Runner(5.3)
    ending = search(SearchPlan(start=1.0, max_trials=5, tolerance=0.01), run)
    assert (ending.stop, ending.exit_code, ending.trials) == ("budget", 2, 5)
    assert ending.bracket.highest_pass == 4.0
    assert ending.bracket.lowest_miss is not None and ending.bracket.lowest_miss <= 8.0
    assert "wider than the tolerance" in ending.message


def test_repeats_count_in_the_budget() -> None:
    """An invalid trial that is repeated uses the budget too."""
    run = Runner(100.0, special={1: "invalid"})
    ending = search(SearchPlan(start=1.0, max_trials=2), run)
    assert run.calls == [(1, 1.0, 0), (2, 1.0, 1)]
    assert ending.stop == "budget"


def test_interrupted_trial_ends_with_130() -> None:
    """An interrupted trial ends the search at once."""
    run = Runner(3.0, special={2: "interrupted"})
    ending = search(SearchPlan(start=1.0), run)
    assert (ending.stop, ending.exit_code, ending.trials) == ("interrupted", 130, 2)


def test_rate_bounds_end_the_search_with_exit_2() -> None:
    """Doubling past the run's highest rate: the highest rate is tried once, then exit 2."""
    run = Runner(1e9)
    ending = search(SearchPlan(start=3.0, max_rate=10.0, max_trials=20), run)
    assert run.rates == [3.0, 6.0, 10.0]
    assert (ending.stop, ending.exit_code) == ("rate bounds", 2)


def test_a_long_gallop_stays_finite() -> None:
    """Misses all the way down from a band: the steps grow but stay finite, and the run's lowest
    rate ends the search."""
    run = Runner(0.0)
    ending = search(SearchPlan(start=5.0, band=(5.0,), tolerance=1.0, max_trials=100,
                               min_rate=1e-6), run)  # fmt: skip
    assert ending.stop == "rate bounds" and run.rates[-1] == 1e-6
    assert all(b < a for a, b in zip(run.rates, run.rates[1:], strict=False))


def test_band_rates_are_usable_sorted_and_rounded() -> None:
    """None, non-positive, infinite and too-high rates are dropped; duplicates merge."""
    assert band_rates([None, 5.0, 5.0, 0.0, math.inf, 7.123456, 2e4], 1e4) == (5.0, 7.123)


def _summary(**update: object) -> Summary:
    facts = RunFacts(run_id="r", requests=20, rate=1.0, attainment=Decimal("0.95"), max_lag_s=0.05)
    return summarize([], facts).model_copy(update=update)


@pytest.mark.parametrize(
    ("update", "verdict"),
    [
        ({"exit_code": 0, "passed": True, "good": 20}, "pass"),
        ({"exit_code": 2, "client_schedule_valid": True}, "miss"),
        ({"exit_code": 2, "client_schedule_valid": False}, "invalid"),
        ({"exit_code": 1, "error": "no drain in time"}, "error"),
        ({"exit_code": 130, "interrupted": True}, "interrupted"),
    ],
    ids=["pass", "miss", "invalid", "error", "interrupted"],
)
def test_verdict_is_read_from_the_summary(update: dict[str, object], verdict: Verdict) -> None:
    """The run's exit code and schedule validity decide; an invalid 2 is never a miss."""
    outcome = outcome_of(_summary(**update))
    assert outcome.verdict == verdict
    assert outcome.exit_code == update["exit_code"]


@settings(max_examples=200, deadline=None)
@given(
    edge=st.floats(0.05, 5000.0),
    start=st.floats(0.05, 5000.0),
    spread=st.one_of(st.none(), st.floats(1.0, 2.0)),
    tolerance=st.sampled_from([0.01, 0.05, 0.2, 1.0]),
)
def test_every_rate_tried_lies_inside_the_bracket(
    edge: float, start: float, spread: float | None, tolerance: float
) -> None:
    """Whatever the edge, start and band: each rate tried lies strictly inside the bracket so
    far, the bracket always holds the edge, and an exit 0 bracket is within the tolerance."""
    band = () if spread is None else band_rates([start / spread, start, start * spread], 1e4)
    plan = SearchPlan(start=start, band=band, tolerance=tolerance, max_trials=40, max_rate=1e4)
    seen = Bracket(plan)
    calls: list[float] = []

    def run(index: int, rate: float, repeat: int) -> TrialOutcome:
        assert seen.highest_pass is None or rate > seen.highest_pass
        assert seen.lowest_miss is None or rate < seen.lowest_miss
        calls.append(rate)
        verdict: Verdict = "pass" if rate <= edge else "miss"
        seen.record(rate, verdict)
        return _outcome(verdict)

    ending = search(plan, run)
    b = ending.bracket
    assert (b.highest_pass, b.lowest_miss) == (seen.highest_pass, seen.lowest_miss)
    assert b.highest_pass is None or b.highest_pass <= edge
    assert b.lowest_miss is None or b.lowest_miss > edge
    if ending.exit_code == 0:
        assert b.width is not None and b.width <= tolerance * (1 + 1e-9)
    else:
        assert ending.stop in ("budget", "rate bounds"), ending
