"""One predicted rate, and the search for the edge: the virtual fleet run once (deterministic) or
replicated with the profiles' spread (Monte Carlo, docs/design.md §11).

A scheduled workload's shape moves on its speedup instead (its offsets divided by it): the
``rate`` of these functions is then the speedup, the predictions report its mean rate beside it
with the attainment per input-length bucket, and the search stops at ``MAX_SPEEDUP``.
"""

from __future__ import annotations

from typing import Any, Literal

from narwhal_trial._model import FleetModel, OutsideDomainError, TrialTarget
from narwhal_trial._predict_buckets import (
    good_flags,
    good_requests,
    nearest_rank,
    predicted_buckets,
)
from narwhal_trial._prediction import (
    AttainmentInterval,
    EdgeBand,
    EngineUse,
    RatePrediction,
    RateSearch,
)
from narwhal_trial._records import Distribution
from narwhal_trial._stats import distribution, required_good
from narwhal_trial._vtime import SimulatedOutcome, TrialShape, simulate
from narwhal_trial._workload_schedule import MAX_SPEEDUP

_SEARCH_PRECISION = 0.01  # stop bisecting when the bracket is within 1 %
_SEARCH_STEPS = 40
#: A crossing not reached at 1/4096 of the start rate is not there: a pass probability below 0.9
#: at a near-idle fleet stays below it (the engine's own spread misses the SLO).
_HALVINGS = 12
#: The pass probabilities whose crossings make the band (0.5: the trial's own judgement).
BAND_LEVELS = (0.9, 0.5, 0.1)


def _good(outcome: SimulatedOutcome, target: TrialTarget) -> int:
    return sum(good_flags(outcome, target))


#: The share of replications that may need a decode batch beyond the profiled concurrency before
#: a rate is refused (their 5-95 % range would rest on extrapolation beyond it).
BEYOND_SHARE = 0.05


def _beyond(model: FleetModel, outcomes: list[SimulatedOutcome]) -> list[str]:
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


def _at(shape: TrialShape, pace: float, precision: str = "g") -> str:
    """``2 request/s``, or a scheduled shape's ``speedup 2x``."""
    return f"speedup {pace:{precision}}x" if shape.scheduled else f"{pace:{precision}} request/s"


def _check_batch(
    model: FleetModel, outcomes: list[SimulatedOutcome], shape: TrialShape, rate: float
) -> None:
    beyond = _beyond(model, outcomes)
    if beyond:
        what = "speedup" if shape.scheduled else "rate"
        raise OutsideDomainError(
            f"at {_at(shape, rate)} " + "; ".join(beyond) + ": profile with a larger "
            f"--decode-concurrency (or give --limits) before predicting this {what}"
        )


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
) -> RatePrediction:
    """The predicted trial at ``rate``; ``OutsideDomainError`` when the load leaves the domain.

    One replication: the fits alone, with the fit-residual interval. More: the median good count,
    its 5-95 % range, the share of replications that pass, percentiles over every replication.
    A scheduled shape's ``rate`` is its speedup (see the module's docstring).
    """
    runs = outcomes(model, shape, rate, replications, seed)
    _check_batch(model, runs, shape, rate)
    n = shape.requests
    need = required_good(target.attainment, n)
    goods = sorted(_good(o, target) for o in runs)
    ends: tuple[set[int], set[int]] | None = None
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
    ) -> None:
        self._model, self._shape, self._target = model, shape, target
        self._replications, self._seed = replications, seed
        self._need = required_good(target.attainment, shape.requests)
        self.seen: dict[float, float | None] = {}
        self.tried: list[tuple[float, str]] = []

    def __call__(self, rate: float) -> float | None:
        if rate not in self.seen:
            runs = outcomes(self._model, self._shape, rate, self._replications, self._seed)
            p: float | None = None
            if not _beyond(self._model, runs):
                p = sum(1 for o in runs if _good(o, self._target) >= self._need) / len(runs)
            self.seen[rate] = p
            state = "outside domain" if p is None else "pass" if p >= 0.5 else "miss"
            self.tried.append((rate, state))
        return self.seen[rate]

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
) -> RateSearch:
    """The highest rate predicted to pass (pass probability ≥ 0.5), and the band where the pass
    probability crosses 0.9 and 0.1: double (or halve) from ``start`` to bracket each crossing,
    then bisect to within 1 %. Assumes a passing rate's lower rates pass at least as often.
    A scheduled shape's search moves its speedup (``start`` the first), up to ``MAX_SPEEDUP``."""
    judge = _Judge(model, shape, target, replications, seed)
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
        state = "outside domain" if judge.seen[rate] is None else "miss"
        return RateSearch(
            **axis,
            max_rate=None,
            at_max=None,
            limited_by="target" if state == "miss" else "profile domain",
            detail=f"{_at(shape, rate)} is already {state}",
            tried=judge.tried,
            band=band,
        )
    if hi is not None:
        detail = f"{_at(shape, hi, '.4g')} is predicted to " + (
            "miss" if hi_state == "miss" else "need a decode batch beyond the profiled concurrency"
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
        at_max=predict_rate(model, shape, target, lo, replications, seed),
        limited_by=limited,
        detail=detail,
        tried=judge.tried,
        band=band,
    )
