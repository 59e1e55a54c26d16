"""The documents of ``summary.json`` ``schedule`` (computed by ``_schedule_view``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from narwhal_store import ClosedModel
from narwhal_trial._interval import Interval


class LengthBucket(ClosedModel):
    """Requests whose input length is in ``[low, high)``, and how many were good."""

    low: int
    high: int
    requests: int
    good: int
    attainment: float
    interval: Interval


class OfferedLoad(ClosedModel):
    """What fell due per bin: bin i covers ``[i * bin_s, (i + 1) * bin_s)`` seconds from t0."""

    bin_s: float
    requests: list[int]
    input_tokens: list[int]
    output_tokens: list[int]


class Histogram(ClosedModel):
    """``counts[i]`` lengths in ``[edges[i], edges[i + 1])``."""

    edges: list[int]
    counts: list[int]


class DensestSecond(ClosedModel):
    """The one-second window of due times with the most requests (the first of equals)."""

    start_s: float = Field(description="its first due time, seconds from t0")
    requests: int
    max_lag_s: float | None = Field(description="the worst send lag among its sent requests")
    misses: int = Field(description="its client schedule misses")


class ScheduleView(ClosedModel):
    """The run's view of its workload's schedule (see the module's docstring)."""

    source: Literal["trace", "synthetic"]
    speedup: float
    span_s: float = Field(description="first to last due time at this speedup")
    mean_rate: float
    offered_token_rate: float = Field(
        description="prompt + output tokens per second over the span (0 when it is 0)"
    )
    buckets: list[LengthBucket]
    offered: OfferedLoad
    input_lengths: Histogram
    output_lengths: Histogram
    densest_second: DensestSecond
