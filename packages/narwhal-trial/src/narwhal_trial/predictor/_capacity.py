"""What the fleet keeps up with for as long as a trial lasts, beside what a trial of one size shows.

- **The throughput bound**: the requests per second the profiled engines complete when every
  engine's decode batch is held at its highest profiled concurrency (or its ``max_num_seqs``,
  when lower). It is measured on the virtual fleet (``_vtime``) offered the trial's own requests
  faster than it completes them: the completions per second while the offers last. A batch
  larger than any profiled is not assumed to serve faster, since no profile shows that it does.
- **The sustainable rate**: the edge of a long trial (``LONG_REQUESTS``) on that fleet, the fits
  alone, which is the limit of the trial-sized edge as the trial grows; or the throughput bound
  when that is lower. A short trial's edge can lie far above it: its few requests arrive and
  drain before any queue grows.
- **A certain miss**: served first come, first served at no more than the bound, the ``k``-th
  request (from 0) completes no earlier than ``(k + 1) / bound`` after the first offer; a good
  request completes by its arrival plus the TTFT bound plus ``output - 1`` TPOT bounds. Each
  request for which that cannot hold misses, if no batch beyond the profile serves faster
  (``CertainMiss``). ``_beyond`` claims the trial's miss (``MISS (bound)``) only when the
  fits extended beyond the profile leave too few good requests as well.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from narwhal_trial._stats import required_good
from narwhal_trial.predictor._model import FleetModel, TrialTarget
from narwhal_trial.predictor._vtime import EngineModel, TrialShape, simulate

#: Requests of the long trial whose edge is the sustainable rate.
LONG_REQUESTS = 2000
#: Requests offered to the saturated fleet for the throughput bound.
_SATURATION_REQUESTS = 1000
#: A fleet keeps up when it completes at least this share of what it is offered.
_KEPT_UP = 0.97
#: The bound's precision, and the most doublings or halvings to bracket it.
_PRECISION = 0.01
_STEPS = 12
#: The trial-sized edge is "too short to test capacity" beyond this much above the sustainable.
TOO_SHORT = 1.1


@dataclass(frozen=True, slots=True)
class ThroughputBound:
    """The bound, on the fits and on the fits at the fast end of their worst residuals."""

    rate: float
    fast_rate: float
    concurrency: dict[str, int | None]
    """per engine, the decode batch it is held at (None: neither profiled nor limited)"""


@dataclass(frozen=True, slots=True)
class CertainMiss:
    """The requests the bound keeps from being good at one pace."""

    misses: list[bool]
    """per request, True when it cannot be good"""
    max_good: int
    required_good: int

    @property
    def certain(self) -> bool:
        """Fewer requests can be good than the trial needs."""
        return self.max_good < self.required_good

    @property
    def first(self) -> int | None:
        """The first request (from 1) that cannot be good, None when every request can be."""
        return next((k + 1 for k, miss in enumerate(self.misses) if miss), None)


def _lowest(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def held_engines(model: FleetModel, sign: int = 0) -> list[EngineModel]:
    """Every engine with ``max_num_seqs`` at most its highest profiled decode concurrency
    (``sign`` -1: every fit at the fast end of its worst residual, as ``FleetModel.scaled``)."""
    engines = model.engines if sign == 0 else model.scaled(sign)
    return [
        dataclasses.replace(m, max_num_seqs=_lowest(m.max_num_seqs, model.decode_max[m.iid]))
        for m in engines
    ]


def held_model(model: FleetModel) -> FleetModel:
    """``model`` whose engines never batch beyond the profiled concurrency."""
    return dataclasses.replace(model, engines=held_engines(model))


def lengthened(shape: TrialShape, requests: int) -> TrialShape:
    """``shape`` with ``requests`` offers: the runbook's count, or a scheduled workload's requests
    repeated (each repeat after the last offset plus one mean gap), without the in-flight cap."""
    if shape.offsets_s is None or shape.inputs is None or shape.outputs is None:
        return dataclasses.replace(shape, requests=requests, max_in_flight=None)
    n = shape.requests
    span = shape.offsets_s[-1]
    period = span + (span / (n - 1) if n > 1 and span > 0 else 1.0)
    offsets = tuple(shape.offsets_s[k % n] + (k // n) * period for k in range(requests))
    inputs = tuple(shape.inputs[k % n] for k in range(requests))
    outputs = tuple(shape.outputs[k % n] for k in range(requests))
    return dataclasses.replace(
        shape,
        requests=requests,
        max_in_flight=None,
        offsets_s=offsets,
        inputs=inputs,
        outputs=outputs,
    )


def _ends(engines: list[EngineModel], shape: TrialShape, pace: float) -> list[float]:
    """When each sent request's last token reached the client, offered at ``pace``."""
    run = simulate(engines, shape, pace)
    arrivals, outs = shape.arrivals(pace), shape.output_lengths()
    return [
        arrivals[k] + t + p * max(0, outs[k] - 1)
        for k, t, p in zip(run.sent, run.ttft, run.tpot, strict=True)
    ]


def _window_rate(engines: list[EngineModel], shape: TrialShape, pace: float) -> float:
    """Requests per second completed in the second half of the offers at ``pace``."""
    until = shape.arrivals(pace)[-1]
    ends = sorted(end for end in _ends(engines, shape, pace) if until / 2 <= end <= until)
    return (len(ends) - 1) / (ends[-1] - ends[0]) if len(ends) > 1 else 0.0


def _completion_rate(engines: list[EngineModel], shape: TrialShape) -> float:
    """The most requests per second the engines complete, whatever they are offered: bracket the
    highest pace they keep up with (completions within ``_KEPT_UP`` of the offers), then bisect it
    to ``_PRECISION``. Offered more, a fleet may complete less (a prefill engine sharing the GPU
    with its decode engine takes more of it), so the most seen is kept, not the last."""
    makespan = max(_ends(engines, shape, 1e9))  # everything at once: the order of magnitude
    seen: dict[float, float] = {}

    def kept_up(pace: float) -> bool:
        seen[pace] = _window_rate(engines, shape, pace)
        return seen[pace] >= _KEPT_UP * shape.mean_rate(pace)

    pace = shape.requests / makespan / shape.mean_rate(1.0)
    low, high = (pace, None) if kept_up(pace) else (None, pace)
    for _ in range(_STEPS):
        if low is not None and high is not None:
            break
        pace = pace * 2 if high is None else pace / 2
        if kept_up(pace):
            low = pace
        else:
            high = pace
    while low is not None and high is not None and high / low - 1 > _PRECISION:
        middle = (low * high) ** 0.5
        if kept_up(middle):
            low = middle
        else:
            high = middle
    return max(seen.values())


def throughput_bound(model: FleetModel, shape: TrialShape) -> ThroughputBound:
    """The fleet's throughput bound for the trial's requests (see the module's docstring)."""
    saturating = lengthened(shape, max(_SATURATION_REQUESTS, shape.requests))
    held = held_engines(model)
    return ThroughputBound(
        rate=_completion_rate(held, saturating),
        fast_rate=_completion_rate(held_engines(model, -1), saturating),
        concurrency={m.iid: m.max_num_seqs for m in held},
    )


def certain_miss(bound: float, shape: TrialShape, target: TrialTarget, pace: float) -> CertainMiss:
    """Which requests of the trial at ``pace`` (a rate, or a scheduled shape's speedup) cannot be
    good when the fleet completes at most ``bound`` requests per second."""
    ttft, tpot = float(target.ttft_s), float(target.tpot_s)
    arrivals, outs = shape.arrivals(pace), shape.output_lengths()
    misses = [
        (k + 1) / bound > arrivals[k] + ttft + max(0, outs[k] - 1) * tpot
        for k in range(shape.requests)
    ]
    return CertainMiss(
        misses=misses,
        max_good=shape.requests - sum(misses),
        required_good=required_good(target.attainment, shape.requests),
    )


def requests_to_test(bound: float, shape: TrialShape, target: TrialTarget, pace: float) -> int:
    """The fewest requests at ``pace`` for which the bound shows a miss (``pace`` above it)."""
    n = max(shape.requests, 1)
    for _ in range(40):
        if certain_miss(bound, lengthened(shape, n), target, pace).certain:
            break
        n *= 2
    low, high = n // 2, n
    while high - low > 1:
        mid = (low + high) // 2
        if certain_miss(bound, lengthened(shape, mid), target, pace).certain:
            high = mid
        else:
            low = mid
    return high
