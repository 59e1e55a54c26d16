"""``edge``'s terminal lines: how the search starts, one line per trial, how it ended."""

from __future__ import annotations

from pathlib import Path

from narwhal_trial.edge._document import PredictedBand
from narwhal_trial.edge._search import Bracket, Ending, SearchPlan, TrialOutcome
from narwhal_trial.edge._settings import EdgeSettings


def unit(settings: EdgeSettings) -> str:
    """How a searched value is shown: ``/s`` for a rate, ``x`` for a speedup."""
    return "/s" if settings.searched == "rate" else "x"


def _rate(rate: float | None, unit: str = "/s") -> str:
    return "none" if rate is None else f"{rate:g}{unit}"


def opening(settings: EdgeSettings, band: PredictedBand | None, plan: SearchPlan) -> str:
    """Where the search starts and how it goes on."""
    u = unit(settings)
    first = f"{Bracket(plan).first():g}{u}"
    if settings.searched == "speedup":
        first = f"speedup {first} of the workload's schedule"
    how = (
        f"bisecting to within {settings.tolerance:.1%} in at most {settings.max_trials} trials of "
        f"{settings.run.requests} requests"
    )
    if band is None:
        return f"edge: doubling from {first}, then {how}"
    shown = (
        f"predicted band pass_90 {_rate(band.pass_90)}, pass_50 {_rate(band.pass_50)}, pass_10 "
        f"{_rate(band.pass_10)} ({band.replications} replication(s))"
    )
    if band.sustainable_rate is not None:
        shown += f", sustainable {band.sustainable_rate:.4g}/s ({band.sustainable_source})"
    if not plan.band:
        return f"edge: {shown} holds no passing rate: doubling from {first}, then {how}"
    return f"edge: {shown}: starting at {first}, then {how}"


def trial_line(
    index: int,
    rate: float,
    repeat: int,
    o: TrialOutcome,
    b: Bracket,
    max_repeats: int,
    unit: str = "/s",
) -> str:
    """One trial as it finishes: rate (or speedup), good of required, verdict, the bracket."""
    head = f"trial {index} at {rate:g}{unit}: {o.good}/{o.requests} good (need {o.required_good})"
    if o.verdict in ("invalid", "error"):
        what = "INVALID schedule" if o.verdict == "invalid" else f"ERROR ({o.error})"
        again = (
            f"repeating {rate:g}{unit} ({repeat + 1} of {max_repeats})"
            if repeat < max_repeats
            else "no repeat left"
        )
        return f"{head} -> {what}, never read as a miss; {again}"
    width = "" if b.width is None else f", width {b.width:.1%}"
    return (
        f"{head} -> {o.verdict.upper()}; bracket: pass {_rate(b.highest_pass, unit)}, miss "
        f"{_rate(b.lowest_miss, unit)}{width}"
    )


def closing(ending: Ending, path: Path, unit: str = "/s") -> str:
    """The bracket found, the trials it took and why the search stopped."""
    b = ending.bracket
    width = "" if b.width is None else f" (width {b.width:.1%})"
    return (
        f"edge: highest pass {_rate(b.highest_pass, unit)}, lowest miss "
        f"{_rate(b.lowest_miss, unit)}{width} "
        f"after {ending.trials} trial(s): {ending.message}; {path} (exit {ending.exit_code})"
    )
