"""Beyond the profiled decode concurrency: which engines go there, and what the prediction is
then: a miss the throughput bound shows (``_capacity``), or a refusal naming the concurrency to
profile."""

from __future__ import annotations

from typing import Any

from narwhal_trial.documents._prediction import AttainmentInterval, RatePrediction
from narwhal_trial.documents._prediction_capacity import BoundMiss
from narwhal_trial.predictor._buckets import good_requests, predicted_buckets
from narwhal_trial.predictor._capacity import CertainMiss, ThroughputBound, certain_miss
from narwhal_trial.predictor._model import FleetModel, OutsideDomainError, TrialTarget
from narwhal_trial.predictor._vtime import SimulatedOutcome, TrialShape, simulate

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


def possible_goods(
    model: FleetModel, shape: TrialShape, target: TrialTarget, rate: float, bound: ThroughputBound
) -> tuple[CertainMiss, set[int], set[int]]:
    """The bound's verdict at ``rate``, the requests it leaves able to be good, and those good
    when the fits (at the fast end of their worst residuals) are extended beyond the profiled
    concurrency (only computed when the bound shows a miss). A miss is claimed only when their
    union leaves fewer than the required good requests, so it never rests on one premise."""
    found = certain_miss(bound.fast_rate, shape, target, rate)
    held = {k for k, miss in enumerate(found.misses) if not miss}
    extended = (
        good_requests(simulate(model.scaled(-1), shape, rate), target) if found.certain else held
    )
    return found, held, extended


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
    found, held, extended = possible_goods(model, shape, target, rate, bound)
    possible = held | extended
    n, need = shape.requests, found.required_good
    if len(possible) >= need:
        what = "speedup" if shape.scheduled else "rate"
        batch = max(max(o.max_decoding.values()) for o in runs)
        how = (
            f"of its {n} requests the throughput bound ({bound.fast_rate:.4g} request/s at the "
            f"profiled concurrency) leaves {found.max_good} able to be good"
        )
        if found.certain:
            how += f", the fits extended beyond that concurrency {len(extended)}"
        raise OutsideDomainError(
            f"at {pace_text(shape, rate)} " + "; ".join(beyond) + f", and {how} (need {need}): "
            "neither a pass nor a miss can be shown; profile with --decode-concurrency up to "
            f"{batch} (or give --limits) before predicting this {what}"
        )
    good = len(possible)
    verdict: dict[str, Any] = {"pass": False}
    if shape.scheduled:
        verdict["speedup"] = rate
        verdict["buckets"] = predicted_buckets(shape.input_lengths(), [possible])
    return RatePrediction(
        **verdict,
        rate=shape.mean_rate(rate),
        replications=len(runs),
        good=good,
        required_good=need,
        attainment=good / n,
        attainment_interval=AttainmentInterval(method="bound", low=0.0, high=good / n),
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
            held_good=len(held),
            extended_good=len(extended),
            certain_misses=n - good,
            beyond=beyond,
        ),
    )
