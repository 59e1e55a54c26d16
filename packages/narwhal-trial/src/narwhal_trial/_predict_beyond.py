"""Beyond the profiled decode concurrency: which engines go there, and what the prediction is
then: a miss the throughput bound shows (``_capacity``), or a refusal naming the concurrency to
profile."""

from __future__ import annotations

from typing import Any

from narwhal_trial._capacity import ThroughputBound, certain_miss
from narwhal_trial._model import FleetModel, OutsideDomainError, TrialTarget
from narwhal_trial._predict_buckets import predicted_buckets
from narwhal_trial._prediction import AttainmentInterval, RatePrediction
from narwhal_trial._prediction_capacity import BoundMiss
from narwhal_trial._vtime import SimulatedOutcome, TrialShape

#: The share of replications that may need a decode batch beyond the profiled concurrency before
#: the rate leaves the profiled domain (their 5-95 % range would rest on extrapolation beyond it).
BEYOND_SHARE = 0.05


def beyond_domain(model: FleetModel, outcomes: list[SimulatedOutcome]) -> list[str]:
    """Per engine whose decode batch outgrows its profiled concurrency: in any run of the fits
    alone, or in more than ``BEYOND_SHARE`` of the replications."""
    out = []
    for iid, top in model.decode_max.items():
        if top is None:
            continue
        over = [o.max_decoding[iid] for o in outcomes if o.max_decoding.get(iid, 0) > top]
        if not over or (len(outcomes) > 1 and len(over) <= BEYOND_SHARE * len(outcomes)):
            continue
        where = "" if len(outcomes) == 1 else f" in {len(over)} of {len(outcomes)} replications"
        out.append(
            f"{iid} reaches {max(over)} decoding sequences{where}, beyond the profiled decode "
            f"domain (concurrency up to {top})"
        )
    return out


def pace_text(shape: TrialShape, pace: float, precision: str = "g") -> str:
    """``2 request/s``, or a scheduled shape's ``speedup 2x``."""
    return f"speedup {pace:{precision}}x" if shape.scheduled else f"{pace:{precision}} request/s"


def bounded(
    model: FleetModel,
    runs: list[SimulatedOutcome],
    shape: TrialShape,
    target: TrialTarget,
    rate: float,
    bound: ThroughputBound,
) -> RatePrediction:
    """The trial beyond the profiled concurrency: a miss the throughput bound shows, else
    ``OutsideDomainError`` saying which concurrency to profile."""
    beyond = beyond_domain(model, runs)
    found = certain_miss(bound.fast_rate, shape, target, rate)
    if not found.certain:
        what = "speedup" if shape.scheduled else "rate"
        batch = max(max(o.max_decoding.values()) for o in runs)
        raise OutsideDomainError(
            f"at {pace_text(shape, rate)} " + "; ".join(beyond) + f", and the throughput bound "
            f"({bound.fast_rate:.4g} request/s at the profiled concurrency) leaves "
            f"{found.max_good} of {shape.requests} requests able to be good (need "
            f"{found.required_good}): neither a pass nor a miss can be shown; profile with "
            f"--decode-concurrency up to {batch} (or give --limits) before predicting this {what}"
        )
    n = shape.requests
    possible = {k for k, miss in enumerate(found.misses) if not miss}
    verdict: dict[str, Any] = {"pass": False}
    if shape.scheduled:
        verdict["speedup"] = rate
        verdict["buckets"] = predicted_buckets(shape.input_lengths(), [possible])
    return RatePrediction(
        **verdict,
        rate=shape.mean_rate(rate),
        replications=len(runs),
        good=found.max_good,
        required_good=found.required_good,
        attainment=found.max_good / n,
        attainment_interval=AttainmentInterval(method="bound", low=0.0, high=found.max_good / n),
        pass_probability=0.0,
        pass_interval=(False, False),
        schedule_misses=0,
        ttft_s=None,
        tpot_s=None,
        engines=[],
        bound=BoundMiss(
            throughput_bound=bound.fast_rate,
            concurrency=bound.concurrency,
            first_miss=found.first or n,
            certain_misses=n - found.max_good,
            beyond=beyond,
        ),
    )
