"""One predicted rate, and the search for the edge: the virtual fleet run once (deterministic) or
replicated with the profiles' spread (Monte Carlo, docs/design.md §11).

A scheduled workload's shape moves on its speedup instead (its offsets divided by it): the
``rate`` of these functions is then the speedup, the predictions report its mean rate beside it
with the attainment per input-length bucket, and the search stops at ``MAX_SPEEDUP``.
"""

from __future__ import annotations

from typing import Any, Literal

from narwhal_trial._stats import distribution, required_good
from narwhal_trial.documents._prediction import (
    AttainmentInterval,
    EdgeBand,
    EngineUse,
    RatePrediction,
    RateSearch,
)
from narwhal_trial.documents._records import Distribution
from narwhal_trial.predictor._beyond import beyond_domain, bounded, pace_text, possible_goods
from narwhal_trial.predictor._buckets import (
    good_flags,
    good_requests,
    nearest_rank,
    predicted_buckets,
)
from narwhal_trial.predictor._capacity import ThroughputBound, throughput_bound
from narwhal_trial.predictor._model import FleetModel, TrialTarget
from narwhal_trial.predictor._sources import spread_sources
from narwhal_trial.predictor._vtime import SimulatedOutcome, TrialShape, simulate
from narwhal_trial.workload._schedule import MAX_SPEEDUP

_SEARCH_PRECISION = 0.01  # stop bisecting when the bracket is within 1 %
_SEARCH_STEPS = 40
#: A crossing not reached at 1/4096 of the start rate is not there: a pass probability below 0.9
#: at a near-idle fleet stays below it (the engine's own spread misses the SLO).
_HALVINGS = 12
#: The pass probabilities whose crossings make the band (0.5: the trial's own judgement).
BAND_LEVELS = (0.9, 0.5, 0.1)


def _good(outcome: SimulatedOutcome, target: TrialTarget) -> int:
    return sum(good_flags(outcome, target))


def outcomes(
    model: FleetModel, shape: TrialShape, rate: float, replications: int, seed: int
) -> list[SimulatedOutcome]:
    """The virtual trial at ``rate``: once on the fits (``replications`` 1), else once per
    replication of the profiles' spread."""
    if replications == 1:
        return [simulate(model.engines, shape, rate)]
    return [
        simulate(model.engines, shape, rate, replica)
        for replica in model.replicas(seed, replications)
    ]


def predict_rate(
    model: FleetModel,
    shape: TrialShape,
    target: TrialTarget,
    rate: float,
    replications: int = 1,
    seed: int = 0,
    bound: ThroughputBound | None = None,
) -> RatePrediction:
    """The predicted trial at ``rate``. Where the load leaves the profiled domain, a miss the
    throughput bound shows (``bound``, else computed), or ``OutsideDomainError``.

    One replication: the fits alone, with the fit-residual interval. More: the median good count,
    its 5-95 % range and each source's share of it (``spread_sources``: three more Monte Carlo
    runs), the share of replications that pass, percentiles over every replication.
    A scheduled shape's ``rate`` is its speedup (see the module's docstring).
    """
    runs = outcomes(model, shape, rate, replications, seed)
    if beyond_domain(model, runs):
        bound = bound or throughput_bound(model, shape)
        return bounded(model, runs, shape, target, rate, bound)
    n = shape.requests
    need = required_good(target.attainment, n)
    goods = sorted(_good(o, target) for o in runs)
    ends: tuple[set[int], set[int]] | None = None
    sources = None
    if replications == 1:
        good = goods[0]
        slow_run = simulate(model.scaled(+1), shape, rate)
        fast_run = simulate(model.scaled(-1), shape, rate)
        slow, fast = _good(slow_run, target), _good(fast_run, target)
        low, high = min(slow, good), max(fast, good)
        interval = AttainmentInterval(method="fit-residuals", low=low / n, high=high / n)
        probability = 1.0 if good >= need else 0.0
        if shape.scheduled:
            ends = (good_requests(slow_run, target), good_requests(fast_run, target))
    else:
        good = nearest_rank(goods, 0.5)
        low, high = nearest_rank(goods, 0.05), nearest_rank(goods, 0.95)
        interval = AttainmentInterval(method="monte-carlo", low=low / n, high=high / n)
        probability = sum(1 for g in goods if g >= need) / replications
        sources = spread_sources(model, shape, target, rate, replications, seed, good)
    first = runs[0]
    roles = {m.iid: m for m in model.engines}
    verdict: dict[str, Any] = {"pass": probability >= 0.5}
    if shape.scheduled:
        verdict["speedup"] = rate
        verdict["buckets"] = predicted_buckets(
            shape.input_lengths(), [good_requests(o, target) for o in runs], ends
        )
    return RatePrediction(
        **verdict,
        rate=shape.mean_rate(rate),
        replications=replications,
        good=good,
        required_good=need,
        attainment=good / n,
        attainment_interval=interval,
        spread_sources=sources,
        pass_probability=probability,
        pass_interval=(low >= need, high >= need),
        schedule_misses=first.schedule_misses,
        ttft_s=Distribution.model_validate(distribution([t for o in runs for t in o.ttft])),
        tpot_s=Distribution.model_validate(distribution([t for o in runs for t in o.tpot])),
        engines=[
            EngineUse(
                iid=iid,
                role=roles[iid].role,
                device=roles[iid].device,
                served=first.served_by[iid],
                prefilled=first.prefilled_by[iid],
                max_decoding=max(o.max_decoding[iid] for o in runs),
                decode_domain_max=model.decode_max[iid],
            )
            for iid in first.served_by
        ],
    )


class _Judge:
    """Pass probabilities by rate, each rate simulated once (``outside domain``: None)."""

    def __init__(
        self,
        model: FleetModel,
        shape: TrialShape,
        target: TrialTarget,
        replications: int,
        seed: int,
        bound: ThroughputBound | None = None,
    ) -> None:
        self._model, self._shape, self._target = model, shape, target
        self._replications, self._seed = replications, seed
        self._need = required_good(target.attainment, shape.requests)
        self.seen: dict[float, float | None] = {}
        self.tried: list[tuple[float, str]] = []
        self._bound = bound

    @property
    def bound(self) -> ThroughputBound:
        """The fleet's throughput bound (computed once, when first needed)."""
        if self._bound is None:
            self._bound = throughput_bound(self._model, self._shape)
        return self._bound

    def _possible(self, rate: float) -> set[int]:
        _, held, extended = possible_goods(self._model, self._shape, self._target, rate, self.bound)
        return held | extended

    def __call__(self, rate: float) -> float | None:
        if rate not in self.seen:
            runs = outcomes(self._model, self._shape, rate, self._replications, self._seed)
            p: float | None = None
            state = "outside domain"
            if not beyond_domain(self._model, runs):
                p = sum(1 for o in runs if _good(o, self._target) >= self._need) / len(runs)
                state = "pass" if p >= 0.5 else "miss"
            elif len(self._possible(rate)) < self._need:
                p, state = 0.0, "miss (bound)"
            self.seen[rate] = p
            self.tried.append((rate, state))
        return self.seen[rate]

    @property
    def bound_if_known(self) -> ThroughputBound | None:
        """The bound when it was computed."""
        return self._bound

    def bracket(self, level: float) -> tuple[float | None, float | None]:
        """The highest rate seen at or above ``level`` below every rate seen under it (or outside
        the domain), and the lowest such rate above it."""
        below = [r for r, p in self.seen.items() if p is None or p < level]
        hi = min(below) if below else None
        above = [r for r, p in self.seen.items() if p is not None and p >= level]
        above = [r for r in above if hi is None or r < hi]
        return (max(above) if above else None), hi


def _crossing(
    judge: _Judge, level: float, start: float, ceiling: float | None = None
) -> float | None:
    """The highest rate whose pass probability is at least ``level`` (to 1 %): double or halve
    from what was seen to bracket it, then bisect. Assumes the probability falls with rate.
    Doubling stops at ``ceiling`` (None: none)."""
    judge(start)
    lo, hi = judge.bracket(level)
    halvings = 0
    for _ in range(_SEARCH_STEPS):
        if (lo is not None and hi is not None) or halvings >= _HALVINGS:
            break
        if lo is not None and ceiling is not None and lo >= ceiling:
            break
        if lo is None:
            halvings += 1
        rate = (
            (lo * 2 if ceiling is None else min(lo * 2, ceiling))
            if lo is not None
            else (hi or start) / 2
        )
        judge(rate)
        lo, hi = judge.bracket(level)
    if lo is None:
        return None
    while hi is not None and hi / lo - 1 > _SEARCH_PRECISION:
        judge((lo * hi) ** 0.5)
        lo2, hi = judge.bracket(level)
        lo = lo2 if lo2 is not None else lo
    return lo


def find_max_rate(
    model: FleetModel,
    shape: TrialShape,
    target: TrialTarget,
    start: float = 1.0,
    replications: int = 1,
    seed: int = 0,
    bound: ThroughputBound | None = None,
    *,
    at_max: bool = True,
) -> RateSearch:
    """The highest rate predicted to pass (pass probability ≥ 0.5), and the band where the pass
    probability crosses 0.9 and 0.1: double (or halve) from ``start`` to bracket each crossing,
    then bisect to within 1 %. Assumes a passing rate's lower rates pass at least as often.
    A scheduled shape's search moves its speedup (``start`` the first), up to ``MAX_SPEEDUP``.
    ``bound``: the fleet's throughput bound, when already known; ``at_max`` False leaves the
    prediction at the highest passing rate out."""
    judge = _Judge(model, shape, target, replications, seed, bound)
    ceiling = MAX_SPEEDUP if shape.scheduled else None
    crossing = {level: _crossing(judge, level, start, ceiling) for level in (0.5, 0.9, 0.1)}
    lo = crossing[0.5]
    band = EdgeBand(
        pass_90=crossing[0.9],
        pass_50=lo,
        pass_10=crossing[0.1],
        replications=replications,
        curve=sorted((r, p) for r, p in judge.seen.items() if p is not None),
    )
    _, hi = judge.bracket(0.5)
    hi_state = "miss" if hi is None or judge.seen[hi] is not None else "outside domain"
    limited: Literal["target", "profile domain"] = (
        "target" if hi_state == "miss" else "profile domain"
    )
    axis: dict[str, Any] = {"axis": "speedup"} if shape.scheduled else {}
    if lo is None:
        rate = min(judge.seen)
        state = dict(judge.tried)[rate]
        return RateSearch(
            **axis,
            max_rate=None,
            at_max=None,
            limited_by="profile domain" if state == "outside domain" else "target",
            detail=f"{pace_text(shape, rate)} is already {state}",
            tried=judge.tried,
            band=band,
        )
    if hi is not None:
        detail = f"{pace_text(shape, hi, '.4g')} is predicted to " + (
            "need a decode batch beyond the profiled concurrency"
            if hi_state != "miss"
            else "miss (the throughput bound shows it)"
            if dict(judge.tried)[hi] == "miss (bound)"
            else "miss"
        )
    elif ceiling is not None and lo >= ceiling:
        detail = f"--speedup is at most {ceiling:g}"
    else:
        detail = f"no {'speedup' if shape.scheduled else 'rate'} above it was reached"
    if shape.scheduled:
        axis["max_speedup"] = lo
    return RateSearch(
        **axis,
        max_rate=shape.mean_rate(lo),
        at_max=predict_rate(model, shape, target, lo, replications, seed, judge.bound_if_known)
        if at_max
        else None,
        limited_by=limited,
        detail=detail,
        tried=judge.tried,
        band=band,
    )
