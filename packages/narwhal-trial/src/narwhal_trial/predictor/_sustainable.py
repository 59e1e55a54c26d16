"""The sustainable rate beside the trial-sized edge (``predict --find-max-rate``).

The trial-sized edge answers "does a trial of N requests pass at this rate"; the sustainable rate
answers "what does the fleet keep up with". It is the edge of a ``LONG_REQUESTS`` trial on the
fleet held at its profiled concurrency, the fits alone (the limit of the trial-sized edge as the
trial grows), or the throughput bound when that is lower (``_capacity``). Where the trial-sized
edge lies more than ``TOO_SHORT`` above it, the trial is too short to test capacity, and the
document says how many requests at that rate would: the fewest for which the bound shows a miss,
or the long trial's count.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from narwhal_trial.documents._prediction_capacity import SustainableRate
from narwhal_trial.predictor._capacity import (
    LONG_REQUESTS,
    TOO_SHORT,
    ThroughputBound,
    held_model,
    lengthened,
    requests_to_test,
)
from narwhal_trial.predictor._model import FleetModel, TrialTarget
from narwhal_trial.predictor._rates import find_max_rate
from narwhal_trial.predictor._vtime import TrialShape


def sustainable_rate(
    model: FleetModel,
    shape: TrialShape,
    target: TrialTarget,
    bound: ThroughputBound,
    trial_edge: float | None,
) -> SustainableRate:
    """The sustainable rate, and whether the trial-sized edge ``trial_edge`` (a rate, or a
    scheduled shape's speedup; None when no pace passes) is too short a trial to test it."""
    long = lengthened(shape, max(LONG_REQUESTS, shape.requests))
    long = dataclasses.replace(long, max_in_flight=shape.max_in_flight)
    per_pace = long.mean_rate(1.0) if shape.scheduled else 1.0
    start = bound.rate / per_pace
    if trial_edge is not None:
        start = min(start, trial_edge)
    search = find_max_rate(held_model(model), long, target, start, 1, 0, bound, at_max=False)
    long_rate = search.max_rate  # requests/s (a scheduled shape's: the mean at its speedup)
    rate: float | None = None
    source: Literal["long trial", "throughput bound"] | None = None
    if long_rate is not None and bound.rate < long_rate:
        rate, source = bound.rate, "throughput bound"
    elif long_rate is not None:
        rate, source = long_rate, "long trial"
    pace = None if rate is None else rate / per_pace
    too_short = trial_edge is not None and pace is not None and trial_edge > TOO_SHORT * pace
    needed = None
    if too_short and trial_edge is not None:
        needed = long.requests
        if shape.mean_rate(trial_edge) > bound.rate:
            needed = min(needed, requests_to_test(bound.rate, shape, target, trial_edge))
    return SustainableRate(
        rate=rate,
        speedup=pace if shape.scheduled else None,
        source=source,
        long_trial_requests=long.requests,
        long_trial_edge=long_rate,
        throughput_bound=bound.rate,
        throughput_bound_fast=bound.fast_rate,
        concurrency=bound.concurrency,
        trial_too_short=too_short,
        requests_to_test=needed,
    )
