"""The parts of the ``predict`` document about capacity, and their text lines: the sustainable
rate beside the trial-sized edge (``RateSearch.sustainable``) and a miss the throughput bound
shows beyond the profiled concurrency (``RatePrediction.bound``). Both are left out when empty,
so a prediction inside the profiled domain reads as before."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from narwhal_trial.documents._prediction_schedule import omitted_when_none
from narwhal_trial.documents._records import AliasedDoc


class SustainableRate(AliasedDoc):
    """The highest rate the fleet keeps up with for as long as a trial lasts."""

    rate: float | None = Field(
        description="requests per second (a scheduled workload's mean); null when even the long "
        "trial's lowest rate misses"
    )
    speedup: float | None = omitted_when_none(
        "a scheduled workload: the speedup of its repeated schedule at that rate"
    )
    source: Literal["long trial", "throughput bound"] | None = Field(
        description="long trial: the edge of a long_trial_requests trial on the fits alone, with "
        "no decode batch beyond the profiled concurrency; throughput bound: the bound, where it "
        "is lower"
    )
    long_trial_requests: int
    long_trial_edge: float | None = Field(description="the long trial's edge, requests/s")
    throughput_bound: float = Field(
        description="requests/s the profiled engines complete at most, every decode batch held "
        "at its highest profiled concurrency (the fits)"
    )
    throughput_bound_fast: float = Field(
        description="the same with every fit at the fast end of its worst residual (what a "
        "bounded miss is judged against)"
    )
    concurrency: dict[str, int | None] = Field(
        description="per engine, the decode batch it is held at (null: unbounded)"
    )
    trial_too_short: bool = Field(
        description="the trial-sized edge lies more than 10% above the sustainable rate: the "
        "trial's requests arrive and drain before a queue grows"
    )
    requests_to_test: int | None = Field(
        description="with trial_too_short: the fewest requests at the trial-sized edge that would "
        "show the miss"
    )


class BoundMiss(AliasedDoc):
    """A trial beyond the profiled concurrency whose miss the throughput bound shows: ``good`` is
    the most requests that can be good, and no latency is predicted."""

    throughput_bound: float = Field(
        description="requests/s the engines complete at most (the fits at the fast end of their "
        "worst residuals, every decode batch at its highest profiled concurrency)"
    )
    concurrency: dict[str, int | None] = Field(description="per engine, the batch held at")
    first_miss: int = Field(
        description="the first request (from 1) that cannot be good: the queue has kept it past "
        "its TTFT bound plus its output's TPOT bounds"
    )
    held_good: int = Field(description="requests the bound leaves able to be good")
    extended_good: int = Field(
        description="requests good with the fits (at the fast end of their worst residuals) "
        "extended beyond the profiled concurrency: the miss is claimed only when neither this "
        "nor held_good, together, reach the required good"
    )
    certain_misses: int = Field(description="requests good under neither premise")
    beyond: list[str] = Field(description="why the latencies cannot be predicted")


def _rate(value: float | None) -> str:
    return "none" if value is None else f"{value:.4g}/s"


def _held(concurrency: dict[str, int | None]) -> str:
    return ", ".join(f"{iid} {'unbounded' if c is None else c}" for iid, c in concurrency.items())


def sustainable_lines(s: SustainableRate, trial_edge: float | None, requests: int) -> list[str]:
    """The sustainable rate, and the line saying when the trial is too short to test it."""
    bound = (
        f"throughput bound {_rate(s.throughput_bound)} with decode batches held at "
        f"{_held(s.concurrency)}"
    )
    if s.rate is None:
        return [f"sustainable rate: none ({s.long_trial_requests}-request trial misses; {bound})"]
    if s.source == "throughput bound":
        how = f"the throughput bound (a {s.long_trial_requests}-request trial's edge is "
        how += f"{_rate(s.long_trial_edge)}); decode batches held at {_held(s.concurrency)}"
    else:
        how = f"the edge of a {s.long_trial_requests}-request trial on the fits; {bound}"
    lines = [f"sustainable rate: {_rate(s.rate)} ({how})"]
    if s.trial_too_short and trial_edge is not None:
        lines.append(
            f"trial too short to test capacity: at {_rate(trial_edge)} its {requests} requests "
            "arrive and drain before a queue grows; a trial of at least "
            f"{s.requests_to_test} requests at that rate would miss"
        )
    return lines


def bound_lines(b: BoundMiss, ttft_s: str, tpot_s: str) -> list[str]:
    """Why a bounded miss is certain, and why it gives no latencies."""
    return [
        f"  held at the profiled decode concurrency ({_held(b.concurrency)}) the engines complete "
        f"at most {_rate(b.throughput_bound)}: from request {b.first_miss} on, the queue keeps "
        f"each request past TTFT {ttft_s} s plus its output at TPOT {tpot_s} s ({b.held_good} "
        "can be good)",
        f"  with the fits extended beyond it, at their fastest, {b.extended_good} are good; "
        f"{b.certain_misses} are good under neither",
        "  no latencies predicted: " + "; ".join(b.beyond),
    ]
