"""``edge``'s search: which rate to try next, what a trial's summary says, when to stop.

Pure logic, no I/O: the command (``_command``) runs each trial with ``run_trial`` and feeds
its verdict back. The bracket is the highest rate that passed and the lowest that missed; every
rate tried lies strictly inside the bracket so far, so the two never cross (docs/design.md §12).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from typing import Literal

from narwhal_trial.documents._records import Summary

Verdict = Literal["pass", "miss", "invalid", "error", "interrupted"]
"""A trial as the search reads it: ``pass`` (exit 0), ``miss`` (exit 2 with a valid schedule),
``invalid`` (exit 2 with ``client_schedule_valid`` false), ``error`` (exit 1, a blocking error
in the summary), ``interrupted`` (exit 130). Only ``pass`` and ``miss`` move the bracket."""

Stop = Literal["within tolerance", "budget", "rate bounds", "invalid", "error", "interrupted"]
"""Why the search ended: the bracket is within the tolerance (exit 0); the trial budget ran out, or
the next rate would leave the run's bounds, first (exit 2); a rate stayed invalid or in error
after its repeats (exit 1); interrupted (exit 130)."""

STOP_EXIT: dict[Stop, int] = {
    "within tolerance": 0,
    "budget": 2,
    "rate bounds": 2,
    "invalid": 1,
    "error": 1,
    "interrupted": 130,
}

RATE_DIGITS = 4
"""Rates tried are rounded to this many significant digits (folder names, manifests and humans
read them; the smallest tolerance, 1 %, keeps every midpoint apart from the bracket's ends)."""


@dataclass(frozen=True, slots=True)
class TrialOutcome:
    """What the search needs from one trial's summary."""

    verdict: Verdict
    good: int
    required_good: int
    requests: int
    attainment: float
    client_schedule_valid: bool
    exit_code: int
    error: str | None = None


def outcome_of(summary: Summary) -> TrialOutcome:
    """Read the verdict from ``summary.json`` as ``run`` judged it (``_summary.exit_code``): 130
    interrupted, 1 a blocking error, 0 a pass with a valid schedule; a 2 is a miss only when the
    schedule was valid, otherwise the rate was never really offered (``invalid``)."""
    verdict: Verdict
    if summary.interrupted or summary.exit_code == 130:
        verdict = "interrupted"
    elif summary.error is not None or summary.exit_code == 1:
        verdict = "error"
    elif summary.exit_code == 0:
        verdict = "pass"
    elif not summary.client_schedule_valid:
        verdict = "invalid"
    else:
        verdict = "miss"
    return TrialOutcome(
        verdict=verdict,
        good=summary.good,
        required_good=summary.required_good,
        requests=summary.requests,
        attainment=summary.attainment,
        client_schedule_valid=summary.client_schedule_valid,
        exit_code=summary.exit_code,
        error=summary.error,
    )


def round_rate(rate: float, rounding: Literal["nearest", "down", "up"] = "nearest") -> float:
    """``rate`` to :data:`RATE_DIGITS` significant digits, to the nearest or down or up (a step
    up from a pass rounds down, a step down from a miss rounds up: the step stays within the
    tolerance)."""
    exact = Decimal(repr(rate))
    scale = exact.adjusted() - (RATE_DIGITS - 1)
    mode = {"nearest": ROUND_HALF_EVEN, "down": ROUND_FLOOR, "up": ROUND_CEILING}[rounding]
    return float(exact.scaleb(-scale).to_integral_value(rounding=mode).scaleb(scale))


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """How to search: the start, the predicted band's rates (empty: a doubling search), the
    tolerance, the budget and the rates a run may be offered at."""

    start: float
    band: tuple[float, ...] = ()
    tolerance: float = 0.05
    max_trials: int = 8
    max_repeats: int = 2
    min_rate: float = 0.0
    max_rate: float = math.inf
    searched: str = "rate"
    """What the values are: ``rate`` (request/s) or a scheduled workload's ``speedup``."""

    def shown(self, value: float, fmt: str = "g") -> str:
        """A value with its unit: ``7.5 request/s``, or ``speedup 2``."""
        if self.searched == "rate":
            return f"{value:{fmt}} request/s"
        return f"speedup {value:{fmt}}"


@dataclass(slots=True)
class Bracket:
    """The highest rate that passed and the lowest that missed, and the next rate to try.

    Without a band: twice the rate after a pass, half after a miss, until both ends exist. With
    one: the next band rate beyond the current end by more than the tolerance, then steps of
    (1 + tolerance), squared at each further step the same way (1.05, 1.1025, 1.2155… at 5 %).
    With both ends: the geometric midpoint, until ``lowest_miss / highest_pass - 1 ≤ tolerance``.
    """

    plan: SearchPlan
    highest_pass: float | None = None
    lowest_miss: float | None = None
    _up: int = field(default=0, init=False, repr=False)
    _down: int = field(default=0, init=False, repr=False)

    @property
    def width(self) -> float | None:
        """``lowest_miss / highest_pass - 1``; None until both ends exist."""
        if self.highest_pass is None or self.lowest_miss is None:
            return None
        return self.lowest_miss / self.highest_pass - 1

    @property
    def within_tolerance(self) -> bool:
        """True when both ends exist and lie within the tolerance of each other."""
        width = self.width
        return width is not None and width <= self.plan.tolerance * (1 + 1e-9)

    def first(self) -> float:
        """The first rate to try (the band's pass_50, or the start rate)."""
        return round_rate(min(max(self.plan.start, self.plan.min_rate), self.plan.max_rate))

    def record(self, rate: float, verdict: Verdict) -> None:
        """Move an end of the bracket for a ``pass`` or a ``miss``; other verdicts leave it."""
        if verdict == "pass" and (self.highest_pass is None or rate > self.highest_pass):
            self.highest_pass = rate
        elif verdict == "miss" and (self.lowest_miss is None or rate < self.lowest_miss):
            self.lowest_miss = rate

    def next_rate(self) -> float | None:
        """The next rate to try, strictly inside the bracket; None when no such rate is left
        within the run's bounds."""
        lo, hi, plan = self.highest_pass, self.lowest_miss, self.plan
        step = 1 + plan.tolerance
        if lo is not None and hi is not None:
            rate = round_rate(math.sqrt(lo * hi))
        elif lo is not None:
            above = [b for b in plan.band if b > lo * step]
            if above:
                rate = round_rate(min(above))
            else:
                factor = 2.0 if not plan.band else _gallop(step, self._up)
                rate = round_rate(min(lo * factor, plan.max_rate), "down")
                self._up += 1
        elif hi is not None:
            below = [b for b in plan.band if b < hi / step]
            if below:
                rate = round_rate(max(below))
            else:
                factor = 2.0 if not plan.band else _gallop(step, self._down)
                rate = round_rate(max(hi / factor, plan.min_rate), "up")
                self._down += 1
        else:
            return self.first()
        inside = (lo is None or rate > lo) and (hi is None or rate < hi)
        return rate if inside and plan.min_rate <= rate <= plan.max_rate else None


def _gallop(step: float, k: int) -> float:
    """``step ** (2 ** k)``, kept finite (the run's rate bounds stop the search long before)."""
    return math.exp(min(math.log(step) * 2.0 ** min(k, 64), 700.0))


@dataclass(frozen=True, slots=True)
class Ending:
    """How the search ended and what it found."""

    stop: Stop
    trials: int
    message: str
    bracket: Bracket

    @property
    def exit_code(self) -> int:
        """0 within tolerance; 2 budget or rate bounds; 1 invalid or error; 130 interrupted."""
        return STOP_EXIT[self.stop]


RunOne = Callable[[int, float, int], TrialOutcome]
"""Run trial number ``index`` (from 1) at ``rate``, its ``repeat``-th attempt at that rate (0 the
first); returns its outcome."""

Observe = Callable[[int, float, int, TrialOutcome, Bracket], None]
"""Called after each trial with its index, rate, repeat, outcome and the bracket it left."""


def search(plan: SearchPlan, run_one: RunOne, observe: Observe | None = None) -> Ending:
    """Run trials until the bracket is within the tolerance or the budget is spent.

    An ``invalid`` or ``error`` trial is repeated at the same rate (at most ``plan.max_repeats``
    times) and never read as a miss; one that stays so ends the search (exit 1).
    """
    b = Bracket(plan)
    rate: float | None = b.first()
    trials = repeats = 0
    while True:
        if rate is None:
            return Ending("rate bounds", trials, _bounds_message(b), b)
        if trials >= plan.max_trials:
            return Ending("budget", trials, _budget_message(b, trials), b)
        trials += 1
        outcome = run_one(trials, rate, repeats)
        b.record(rate, outcome.verdict)
        if observe is not None:
            observe(trials, rate, repeats, outcome, b)
        if outcome.verdict == "interrupted":
            return Ending("interrupted", trials, f"interrupted during trial {trials}", b)
        if outcome.verdict in ("invalid", "error"):
            repeats += 1
            if repeats > plan.max_repeats:
                return Ending(
                    "invalid" if outcome.verdict == "invalid" else "error",
                    trials,
                    _stuck_message(plan, rate, repeats, outcome),
                    b,
                )
            continue
        repeats = 0
        if b.within_tolerance:
            return Ending("within tolerance", trials, f"bracket found in {trials} trial(s)", b)
        rate = b.next_rate()


def _budget_message(b: Bracket, trials: int) -> str:
    if b.highest_pass is None or b.lowest_miss is None:
        missing = "passed" if b.highest_pass is None else "missed"
        return (
            f"no {b.plan.searched} {missing} within the budget of {trials} trial(s) (--max-trials)"
        )
    return (
        f"the budget of {trials} trial(s) ran out with the bracket {b.width:.1%} wide, wider than "
        f"the tolerance {b.plan.tolerance:.1%} (--max-trials, --tolerance)"
    )


def _bounds_message(b: Bracket) -> str:
    p, what = b.plan, b.plan.searched
    if b.lowest_miss is None:
        return f"no {what} missed up to {p.shown(p.max_rate)}, the run's highest {what}"
    if b.highest_pass is None:
        return f"no {what} passed down to {p.shown(p.min_rate, '.4g')}, the run's lowest {what}"
    if what == "rate":
        return f"no rate left to try between {b.highest_pass:g} and {b.lowest_miss:g} request/s"
    return f"no speedup left to try between {b.highest_pass:g} and {b.lowest_miss:g}"


def _stuck_message(plan: SearchPlan, rate: float, attempts: int, outcome: TrialOutcome) -> str:
    what = (
        "the client could not keep its schedule (client_schedule_valid false: inspect "
        "requests.jsonl, raise --max-in-flight or repair client scheduling)"
        if outcome.verdict == "invalid"
        else f"a blocking error ({outcome.error})"
    )
    return f"{attempts} trial(s) at {plan.shown(rate)} in a row ended in {what}"


def band_rates(values: Sequence[float | None], max_rate: float) -> tuple[float, ...]:
    """The band's usable rates (positive, finite, at most ``max_rate``), sorted and rounded."""
    usable = {
        round_rate(v) for v in values if v is not None and math.isfinite(v) and 0 < v <= max_rate
    }
    return tuple(sorted(usable))
